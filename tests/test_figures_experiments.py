"""Pure figure builders of ``ui/experiments/figures.py`` on hand-made numbers."""

from __future__ import annotations

import numpy as np

from ui.experiments import figures as figs


def test_before_after_bars_and_their_differences():
    fig = figs.make_before_after([" cat", " dog"], np.array([0.6, 0.1]), np.array([0.2, 0.3]), "t")
    assert [trace.name for trace in fig.data] == ["before", "after"]
    assert list(fig.data[1].customdata) == ["0.2000 (Δp -0.4000)", "0.3000 (Δp +0.2000)"]
    assert list(fig.data[0].x) == ["·cat", "·dog"]


def test_lens_region_is_outlined_the_rest_dimmed_and_changed_cells_marked():
    probs = np.full((3, 2, 3), 0.4)
    strings = [[["a", "b", "c"]] * 2] * 3
    changed = np.array([[False, False], [False, True], [True, True]])
    fig = figs.make_lens_with_region(["embed", "layer 0", "layer 1"], ["x", "y"], probs, strings, (1, 1), changed)
    veils = [s for s in fig.layout.shapes if s.fillcolor == figs.DIM_COLOR]
    outline = next(s for s in fig.layout.shapes if s.fillcolor != figs.DIM_COLOR)
    assert (outline.x0, outline.x1, outline.y0, outline.y1) == (0.5, 1.5, 0.5, 2.5)
    # what it cannot reach is dimmed: the readout below the block (every position), and the position before it
    assert sorted((s.x0, s.x1, s.y0, s.y1) for s in veils) == [(-0.5, 0.5, 0.5, 2.5), (-0.5, 1.5, -0.5, 0.5)]
    assert list(fig.data[-1].x) == [1, 0, 1] and list(fig.data[-1].y) == ["layer 0", "layer 1", "layer 1"]
    assert not figs.make_lens_with_region(["embed"], ["x"], probs[:1, :1], strings, None, changed[:1, :1]).layout.shapes


def test_sweep_heatmaps_keep_their_numbers_and_shapes():
    delta = np.array([[0.0, -1.0], [0.5, 0.25]])
    fig = figs.make_head_importance(delta, " cat", "switched off")
    assert np.array_equal(np.asarray(fig.data[0].z), delta) and fig.data[0].zmin == -1.0
    restored = np.array([[0.0, 1.0, 0.2], [0.0, 0.1, 0.9]])
    fig = figs.make_patching(restored, ["The", " cat", " so"], (" cat", " dog"))
    assert np.array_equal(np.asarray(fig.data[0].z), restored)
    assert list(fig.layout.xaxis.ticktext) == ["The", "·cat", "·so"]


def test_attribution_shows_the_largest_terms_largest_on_top():
    fig = figs.make_attribution(["a", "b", "c", "d"], np.array([0.1, -3.0, 2.0, 0.0]), " cat", top_n=3)
    assert list(fig.data[0].y) == ["a", "c", "b"] and list(fig.data[0].x) == [0.1, 2.0, -3.0]


def test_the_csv_tables_hold_the_charts_numbers():
    """Each chart's download table: named columns, the same numbers the chart draws."""
    before = figs.before_after_table([" cat", " dog"], np.array([0.6, 0.1]), np.array([0.2, 0.3]))
    assert list(before.columns) == ["token", "p_before", "p_after", "delta_p"]
    assert before["token"].tolist() == ["·cat", "·dog"] and np.allclose(before["delta_p"], [-0.4, 0.2])

    probs = np.arange(12, dtype=float).reshape(3, 2, 2) / 12  # (readouts, positions, ranks)
    strings = [[["a", "b"], ["c", "d"]]] * 3
    changed = np.array([[False, False], [False, True], [True, True]])
    lens = figs.lens_region_table(["embed", "layer 0", "layer 1"], ["x", "y"], probs, strings, (1, 1), changed)
    assert len(lens) == 12 and np.array_equal(lens["probability"], probs.reshape(-1))
    cell = lens[(lens["layer"] == "layer 0") & (lens["position"] == 1)]
    assert cell["reachable"].all() and cell["top_changed"].all()
    assert not lens[lens["position"] == 0]["reachable"].any()  # left of the reachable block
    assert lens[lens["layer"] == "layer 1"]["top_changed"].tolist() == [True, True, True, True]

    delta = np.array([[0.0, -1.0], [0.5, 0.25]])
    sweep = figs.head_importance_table(delta)
    assert sweep.set_index(["layer", "head"])["delta_log_p"].to_dict() == {
        (0, 0): 0.0,
        (0, 1): -1.0,
        (1, 0): 0.5,
        (1, 1): 0.25,
    }
    patch = figs.patching_table(delta, [" the", "it"])
    assert patch["token"].tolist() == ["·the", "it", "·the", "it"] and np.array_equal(
        patch["restored"], delta.reshape(-1)
    )
    terms = figs.attribution_table(["embed", "L0.H0"], np.array([1.5, -0.5]))
    assert terms["contribution"].sum() == 1.0
