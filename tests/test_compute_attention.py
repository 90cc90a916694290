"""The attention helpers (ui.compute_attention) on the real model, against its recorded forward."""

from __future__ import annotations

import numpy as np
import pytest

MODEL = "SmolLM2-135M-Instruct"  # the name every helper below is asked about


@pytest.fixture
def real(ui_engine):
    """The session's engine, with the UI helpers' model lookup pointed at it (``ui_engine`` in conftest.py)."""
    return ui_engine


@pytest.mark.real_model
def test_score_steps_reproduce_the_recorded_forward(real):
    import torch

    from ui.attention.compute import attention_maps, query_over_layers, score_steps, top_heads

    ids = real.tokenizer.encode("The cat sat on the mat because it was tired.")
    maps = attention_maps(MODEL, ids)
    assert maps.probs.shape == (real.config.n_layers, real.config.n_heads, len(ids), len(ids))
    assert np.allclose(maps.probs.sum(-1), 1.0, atol=1e-5)
    _, trace = real.traced_forward(ids)
    steps = score_steps(maps, layer=3, head=2, query=7)
    recorded = trace.layers[3].scaled_scores[0, 2, 7].numpy()
    assert np.allclose(steps.masked, recorded, atol=1e-4, equal_nan=False)
    softmax = torch.softmax(torch.tensor(steps.masked), -1).numpy()
    assert np.allclose(softmax, steps.probs, atol=1e-5)
    assert query_over_layers(maps, 7).shape == (real.config.n_layers, len(ids))
    best = top_heads(maps, query=7, key=1)
    assert best[0][2] >= best[-1][2] and maps.kv_group(8) == 2


@pytest.mark.real_model
def test_attention_is_capped_for_long_prompts(real):
    from ui.attention.compute import MAX_TOKENS, attention_maps

    ids = real.tokenizer.encode("word " * 300)
    maps = attention_maps(MODEL, ids)
    assert maps.n_tokens == MAX_TOKENS and maps.total_tokens == len(ids) > MAX_TOKENS


@pytest.mark.real_model
def test_rope_scores_by_distance_reproduce_the_recorded_score(real):
    from ui.attention.compute import attention_maps, scores_by_distance

    ids = real.tokenizer.encode("The cat sat on the mat because it was tired.")
    maps = attention_maps(MODEL, ids)
    for layer, head in ((0, 0), (13, 8), (29, 4)):
        result = scores_by_distance(MODEL, maps, layer, head, query=7, key=1)
        assert result.actual_distance == 6
        assert result.scores[6] == pytest.approx(result.recorded, abs=1e-3)
    same_distance = scores_by_distance(MODEL, maps, 5, 2, query=4, key=4)
    assert same_distance.scores[0] == pytest.approx(same_distance.recorded, abs=1e-3)
