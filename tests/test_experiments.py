"""The sweeps of ``inference/generation/experiments.py`` on tiny random models: batched rows equal solo runs."""

from __future__ import annotations

import pytest
import torch

from inference.generation import experiments
from inference.model.interventions import HeadEdit, InterventionError, Interventions, ResidualPatch
from tests.test_batching import tiny_engine
from tests.tolerances import max_abs_diff, model_tolerance

CLEAN = [5, 60, 17, 40, 3, 9, 22, 71]
CORRUPT = [5, 60, 18, 40, 3, 9, 22, 71]  # differs at position 2


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def tiny(request):
    return tiny_engine(request.param)


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_a_batched_layer_of_head_ablations_equals_each_alone(tiny, mode):
    target, layer = 11, 1
    means = experiments.prompt_head_means(tiny, CLEAN)
    batched = experiments.ablate_layer_heads(tiny, CLEAN, layer, target, mode, means=means)  # (H,)
    alone = torch.stack(
        [
            tiny.forward_logits(CLEAN, Interventions(heads=(HeadEdit(layer, h, mode, mean=means[layer, h]),)))[
                -1
            ].log_softmax(-1)[target]
            for h in range(tiny.config.n_heads)
        ]
    )
    assert max_abs_diff(batched, alone) <= model_tolerance(tiny.config, alone, context=len(CLEAN))
    assert batched.shape == (tiny.config.n_heads,)
    assert (batched != experiments.target_logprob(tiny, CLEAN, target)).all()


def test_patching_restores_nothing_before_the_difference_and_everything_at_the_end(tiny):
    first = experiments.check_patch_prompts(CLEAN, CORRUPT)
    assert first == 2
    clean_answer, corrupt_answer = 11, 12
    run = experiments.clean_run(tiny, CLEAN)
    clean_gap = float(experiments.answer_gap(run.last_logits, clean_answer, corrupt_answer))
    corrupt_gap = float(experiments.answer_gap(tiny.recompute_last(CORRUPT), clean_answer, corrupt_answer))
    gaps = torch.stack(
        [
            experiments.patch_position(tiny, CORRUPT, run.streams, p, clean_answer, corrupt_answer)
            for p in range(len(CLEAN))
        ],
        dim=1,
    )  # (L, T)
    share = experiments.restored_share(gaps, clean_gap, corrupt_gap)
    bound = model_tolerance(tiny.config, run.last_logits, context=len(CLEAN))
    scale = abs(clean_gap - corrupt_gap)
    assert abs(float(share[-1, -1]) - 1.0) <= 2 * bound / scale  # the final stream is the clean one
    assert torch.all((share[:, :first]).abs() <= 2 * bound / scale)  # identical streams before the difference


def test_a_patch_through_the_shared_prefix_equals_the_full_recompute(tiny):
    """The batch reuses the corrupted K/V before the patched position: the same as running every position."""
    run = experiments.clean_run(tiny, CLEAN)
    position, answers = 4, (11, 12)
    gaps = experiments.patch_position(tiny, CORRUPT, run.streams, position, *answers)  # (L,)
    full = torch.stack(
        [
            experiments.answer_gap(
                tiny.forward_logits(
                    CORRUPT, Interventions(patches=(ResidualPatch(layer, position, run.streams[layer, position]),))
                )[-1],
                *answers,
            )
            for layer in range(tiny.config.n_layers)
        ]
    )
    # a gap is the difference of two logits, each within the bound: twice the bound
    assert max_abs_diff(gaps, full) <= 2 * model_tolerance(tiny.config, run.last_logits, context=len(CLEAN))


def test_bad_patching_prompts_and_layers_are_refused(tiny):
    with pytest.raises(InterventionError, match="8 tokens and the corrupted one 7"):
        experiments.check_patch_prompts(CLEAN, CORRUPT[:-1])
    with pytest.raises(InterventionError, match="the same tokens"):
        experiments.check_patch_prompts(CLEAN, list(CLEAN))
    with pytest.raises(InterventionError, match="nothing to restore"):
        experiments.restored_share(torch.zeros(2), 1.5, 1.5)
    with pytest.raises(InterventionError, match="layer 5 is out of range"):
        experiments.ablate_layer_heads(tiny, CLEAN, 5, 3)
