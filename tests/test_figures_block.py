"""The transformer-block figure builders (ui.logit_lens.figures), on hand-made data."""

from __future__ import annotations

import numpy as np

from ui.logit_lens.figures import make_answer_formation, make_block_activations, make_block_diagram, make_logit_lens


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


def test_every_stage_label_fits_its_box_on_a_projector():
    """Gemma's nine stages (the longest names: "RMSNorm (pre-attention)") at presenter size, in the plot width a
    1280-px wide page gives a full-width chart (~800 px): no label runs out of its box."""
    import re

    from inference.inspection import FOUR_NORM_STAGES
    from ui.common.charts import FONT_SCALE
    from ui.common.conventions import CHAR_PX
    from ui.logit_lens import figures as block

    diagram = make_block_diagram(FOUR_NORM_STAGES, (128, 640), [1234.5] * 9, "block 17")
    labels = [a for a in diagram.layout.annotations if a.text]
    assert len(labels) == 9
    box_px = block.BOX_WIDTH * 800
    for label in labels:
        chars = len(re.sub(r"<[^>]+>", "", label.text))
        assert chars * CHAR_PX * label.font.size * FONT_SCALE * 1.05 < box_px, label.text  # bold: ~5% wider
