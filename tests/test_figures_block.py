"""The transformer-block figure builders (ui.figures.block), on hand-made data."""
from __future__ import annotations

import numpy as np

from ui.figures.block import make_answer_formation, make_block_activations, make_block_diagram, make_logit_lens


def test_block_figures():
    stages = ["block input", "attention output", "residual add 1", "RMSNorm", "feed-forward output", "residual add 2"]
    diagram = make_block_diagram(stages, (3, 576), [1.0] * 6, "block 0")
    assert len(diagram.layout.shapes) == 6
    assert "3 × 576" in diagram.layout.annotations[0].text
    heat = make_block_activations(stages, np.random.default_rng(0).normal(size=(6, 576)), n_dims=64)
    assert np.asarray(heat.data[0].z).shape == (6, 64)
    strings = [[["a", "b", "c"]] * 2] * 3  # (L=3, T=2, k=3)
    lens = make_logit_lens(["embed", "layer 0", "layer 1"], ["x", "y"], np.full((3, 2, 3), 0.3), strings)
    assert np.asarray(lens.data[0].z).shape == (3, 2)
    assert make_answer_formation(["embed", "layer 0"], [0.1, 0.9], " on").data[0].y == (0.1, 0.9)
