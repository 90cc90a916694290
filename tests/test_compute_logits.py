"""The logits helpers (ui.logits.compute) on the real model: sampler stages, temperature sweep, logit lens."""

from __future__ import annotations

import dataclasses

import hypothesis as hyp
import numpy as np
import pytest
import torch
from hypothesis import strategies as hst
from hypothesis.extra import numpy as hnp

from inference import SamplingParams
from ui.logits import compute as compute_logits

PROMPT = "The cat sat"
MODEL = "SmolLM2-135M-Instruct"  # the name every engine-backed helper is asked about


@pytest.fixture
def real(ui_engine_and_server):
    """The session's engine, behind the logits and sampling helpers (``ui_engine_and_server`` in conftest.py)."""
    return ui_engine_and_server


def _key(**changes) -> tuple:
    return dataclasses.replace(SamplingParams(temperature=1.0, seed=0), **changes).canonical()


@pytest.mark.real_model
def test_stages_follow_the_engine_and_tiny_top_p_keeps_one(real):
    view = compute_logits.sampling_stages(MODEL, PROMPT, False, _key(top_p=0.01), 8)
    assert view.stage_names == ["softmax", "temperature", "top_k", "top_p", "min_p", "final"]
    assert view.survivors["top_p"] == 1 and view.survivors["final"] == 1
    assert real.tokenizer.decode([view.greedy_token_id]) == " on"  # the article's example: "The cat sat" -> " on"
    greedy = compute_logits.sampling_stages(MODEL, PROMPT, False, _key(temperature=0.0), 8)
    assert greedy.stage_names == ["softmax", "final"] and greedy.entropy_bits == 0.0


@pytest.mark.real_model
def test_temperature_sharpens_below_one_and_flattens_above(real):
    sweep = compute_logits.temperature_sweep(MODEL, PROMPT, False, (0.3, 1.0, 1.5))
    assert sweep.entropy_bits[0] < sweep.entropy_bits[1] < sweep.entropy_bits[2]
    assert sweep.top_probability[0] > sweep.top_probability[1] > sweep.top_probability[2]


@pytest.mark.real_model
def test_logit_lens_last_layer_is_the_models_output_and_block_adds_up(real):
    traced = compute_logits.traced_prompt(MODEL, PROMPT, False)
    lens, walk = traced.lens, traced.walk
    ids = real.encode_prompt(PROMPT)
    argmax = real.forward_logits(ids).argmax(-1).tolist()
    assert lens.top_ids.shape == (real.config.n_layers + 1, len(ids), 3)
    assert lens.top_ids[-1, :, 0].tolist() == argmax
    assert lens.final_token_probability[-1] == pytest.approx(float(lens.top_probs[-1, -1, 0]))
    vec = torch.from_numpy(walk.last_vectors)  # (L, S, D)
    torch.testing.assert_close(vec[:, 2], vec[:, 0] + vec[:, 1], atol=1e-3, rtol=1e-4)  # residual add 1
    torch.testing.assert_close(vec[:, 5], vec[:, 2] + vec[:, 4], atol=1e-3, rtol=1e-4)  # residual add 2
    assert walk.shape == (len(ids), real.config.d_model)


@hyp.settings(max_examples=150, deadline=None)
@hyp.given(
    logits=hnp.arrays(
        np.float32,
        hnp.array_shapes(min_dims=1, max_dims=1, min_side=1, max_side=400),
        elements=hst.floats(-60, 60, width=32) | hst.sampled_from([0.0, 1.5, -3.0]),  # ties on purpose
    ),
    temperature=hst.sampled_from([0.0, 1e-3, 0.05, 0.3, 1.0, 1.7, 2.0, 50.0]),
    mass=hst.floats(0.01, 0.999),
)
def test_the_logits_order_counts_the_mass_as_a_sort_does(logits, temperature, mass):
    """The temperature playground sorts the logits once for all its frames: the same count, ties and T = 0 included."""
    probs = compute_logits.softmax_at(logits, temperature)
    order = compute_logits.descending_order(logits)
    assert np.array_equal(probs[order], np.sort(probs)[::-1])
    assert compute_logits.tokens_for_mass(probs, mass, order) == compute_logits.tokens_for_mass(probs, mass)
