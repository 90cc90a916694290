"""Direct logit attribution (``inference/model/attribution.py``): the terms add up to the logit within the derived bound.

With the final norm's scale frozen, the split is exact in real arithmetic; the sum of the
terms and the model's own logit differ only by rounding. The bound is ``inference/model/tolerances.py``'s
formula with the terms' total magnitude as its scale, for every token of the vocabulary at once
(the library's ``rounding_bound`` must be that same number).
"""

from __future__ import annotations

import pytest
import torch

from inference.model.attribution import attribute_logit
from inference.model.interventions import HeadEdit, InterventionError, Interventions, ResidualPatch
from tests.test_batching import tiny_engine
from tests.tolerances import logit_tolerance

IDS = [5, 60, 17, 40, 3, 9, 22, 71, 14, 50]


def derived_bound(engine, magnitude: float) -> float:
    config = engine.config
    reduction = max(config.d_model, config.d_ff, config.n_heads * config.head_dim)
    return logit_tolerance(magnitude, reduction, config.n_layers, compared=config.vocab_size)


@pytest.mark.parametrize(
    "family", ["llama", "gpt2", "gemma3"]
)  # RMSNorm; LayerNorm with biases; (1 + w) norms, four per block
def test_contributions_sum_to_the_logit_within_the_derived_bound(family):
    engine = tiny_engine(family)
    logits = engine.forward_logits(IDS)[-1]
    for token in [*logits.topk(3).indices.tolist(), *logits.topk(3, largest=False).indices.tolist(), 0]:
        split = engine.logit_attribution(IDS, token)
        assert split.bound == pytest.approx(derived_bound(engine, split.magnitude), rel=1e-12)
        assert abs(split.residual) <= split.bound, (token, split.residual, split.bound)
        assert split.heads.shape == (engine.config.n_layers, engine.config.n_heads)
        assert (split.final_bias != 0) == (family == "gpt2")
        assert split.patches == 0.0


def test_an_ablated_head_contributes_nothing_and_a_patch_is_its_own_term():
    engine = tiny_engine("llama")
    last = len(IDS) - 1
    spec = Interventions(heads=(HeadEdit(1, 2),), patches=(ResidualPatch(0, last, torch.full((64,), 0.3)),))
    split = engine.logit_attribution(IDS, 11, spec)
    assert split.heads[1, 2] == 0.0
    assert split.patches != 0.0
    assert abs(split.residual) <= split.bound


def test_attribution_needs_a_trace_with_head_outputs_and_a_real_token():
    engine = tiny_engine("llama")
    logits, trace = engine.traced_forward(IDS)
    with pytest.raises(InterventionError, match="outside the vocabulary"):
        attribute_logit(engine.model, logits, trace, engine.config.vocab_size)
    trace.layers[0].head_outputs = None
    with pytest.raises(InterventionError, match="traced forward"):
        attribute_logit(engine.model, logits, trace, 3)


@pytest.mark.real_model
def test_real_model_attribution_of_cat(engine):
    ids = engine.encode_prompt("The cat sat on the mat because it was tired, so the")
    cat = engine.tokenizer.encode(" cat")[0]
    split = engine.logit_attribution(ids, cat)
    assert split.bound == pytest.approx(derived_bound(engine, split.magnitude), rel=1e-12)
    assert abs(split.residual) <= split.bound
    assert split.magnitude > abs(split.logit)  # terms cancel: the scale of the bound is their total size
