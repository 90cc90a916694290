"""The embedding helpers (ui.compute_embeddings) on the real model's matrix."""

from __future__ import annotations

import numpy as np
import pytest

MODEL = "SmolLM2-135M-Instruct"  # the name every helper below is asked about


@pytest.fixture
def real(ui_engine):
    """The session's engine, with the UI helpers' model lookup pointed at it (``ui_engine`` in conftest.py)."""
    return ui_engine


@pytest.mark.real_model
def test_embedding_helpers_read_the_real_matrix(real):
    from ui.embeddings import compute as emb

    assert emb.matrix_shape(MODEL) == (real.config.vocab_size, real.config.d_model)
    rows = emb.rows_for(MODEL, [2644, 2767])
    assert rows.shape == (2, real.config.d_model)
    assert np.allclose(rows[0], real.model.embed.weight[2644].detach().numpy())
    neighbours = emb.nearest(MODEL, 2644)
    cosines = [c for _, _, c in neighbours]
    assert cosines == sorted(cosines, reverse=True) and 2644 not in [i for i, _, _ in neighbours]
    assert {" cats", " Cat", " dog"} & {p for _, p, _ in neighbours}
    projection = emb.project(MODEL, [504, 2644], (" cat", " dog", " banana"))
    assert projection.points.shape == (4, 2)  # " cat" is already a prompt token
    assert 0 < sum(projection.explained) <= 1.0 + 1e-6
    angles = emb.rope_angles(MODEL, 8)
    assert np.allclose(np.cos(angles), emb.rope_cos(MODEL, 8), atol=1e-5)
    assert emb.rope_wavelengths(MODEL)[0] == pytest.approx(2 * np.pi, rel=1e-3)
