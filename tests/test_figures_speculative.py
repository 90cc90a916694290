"""The Speculative decoding page's pure figure builders, on hand-made data."""

from __future__ import annotations

import numpy as np

from ui.common.conventions import bar_axes_hold_zero
from ui.speculative import figures as figs

ROWS = [
    [(" on", "kept", "a"), (" the", "kept", "b"), (" mat", "bonus", "c")],
    [(" because", "rejected", "d"), (" as", "residual", "e")],
    [("<0xF0>", "plain", "f")],
]
NAMES = ["0 · prompt", "1 · verify", "2 · plain"]


def test_step_rows_draw_each_cell_in_its_kind_and_leave_the_rest_empty():
    fig = figs.make_step_rows(ROWS, NAMES)
    heatmap = fig.data[0]
    order = list(figs.KINDS)
    z = np.asarray(heatmap.z, dtype=float)
    assert z.shape == (3, 3)
    assert [int(v) for v in z[0]] == [order.index("kept"), order.index("kept"), order.index("bonus")]
    assert int(z[1, 0]) == order.index("rejected") and int(z[1, 1]) == order.index("residual")
    assert np.isnan(z[1, 2]) and np.isnan(z[2, 1])  # no cell where the step had no token
    assert list(heatmap.text[0]) == ["·on", "·the", "·mat"]
    assert list(heatmap.customdata[1])[:2] == ["d", "e"]
    assert list(fig.layout.yaxis.ticktext) == NAMES and fig.layout.yaxis.autorange == "reversed"
    # every kind's colour is one flat band of the scale, at the kind's own code
    scale = heatmap.colorscale
    for i, kind in enumerate(order):
        colours = {c for v, c in scale if i / len(order) <= v <= (i + 1) / len(order) and c == figs.KINDS[kind][0]}
        assert colours == {figs.KINDS[kind][0]}
    legend = [t.name for t in fig.data[1:]]
    assert legend == [figs.KINDS[k][1] for k in order]  # every kind appears in these rows


def test_step_rows_table_has_one_row_per_cell():
    table = figs.step_rows_table(ROWS, NAMES)
    assert len(table) == 6 and list(table["kind"][:3]) == ["kept", "kept", "bonus"]
    assert list(table["step"]).count("1 · verify") == 2


def test_p_vs_q_marks_the_draft_and_leaves_unrecorded_values_out():
    fig = figs.make_p_vs_q([" on", " in", " at"], [0.6, 0.2, None], [0.3, None, 0.4], 0, "title")
    p, q = fig.data
    assert list(p.x) == [0.6, 0.2, None] and list(q.x) == [0.3, None, 0.4]
    assert p.text[2] == "not in its top" and q.text[1] == "not in its top"
    assert fig.layout.yaxis.ticktext[0] == "▸ ·on" and fig.layout.yaxis.ticktext[1] == "·in"
    assert not bar_axes_hold_zero(fig) and fig.layout.xaxis.range[1] >= 0.6


def test_acceptance_test_shades_the_keeping_stretch_and_places_u():
    fig = figs.make_acceptance_test(0.0, 0.35, 0.81, False, "title")
    bars = [t for t in fig.data if t.type == "bar"]
    assert [(b.base[0], b.x[0]) for b in bars] == [(0.0, 0.35), (0.35, 0.65)]  # no empty stretch before 0
    assert bars[0].marker.color == figs.KEEP_COLOR and bars[1].marker.color == figs.REJECT_COLOR
    u = next(t for t in fig.data if t.type == "scatter")
    assert list(u.x) == [0.81] and "0.810" in u.text[0] and "rejected" in u.hovertemplate
    lookup = figs.make_acceptance_test(0.534, 0.556, 0.466, False, "title")  # prompt lookup: x's range of p
    assert [round(b.base[0], 3) for b in lookup.data if b.type == "bar"] == [0.0, 0.534, 0.556]


def test_distribution_outlines_the_drawn_token():
    fig = figs.make_distribution([" a", " b"], [0.7, 0.3], 1, "title")
    assert list(fig.data[0].marker.line.color) == ["#adb5bd", "#0d6efd"]
    assert not bar_axes_hold_zero(fig)


def test_sweep_has_its_three_measures_and_the_one_times_line():
    fig = figs.make_sweep([4, 8], [None, 0.25], [1.0, 1.5], [0.4, 1.2], "k", "title")
    kept, tpf, speed = fig.data
    assert list(kept.y) == [0.0, 0.25] and list(kept.text) == ["none drafted", "25%"]
    assert list(tpf.y) == [1.0, 1.5] and list(speed.text) == ["0.40×", "1.20×"]
    assert list(kept.x) == ["k = 4", "k = 8"]
    assert any(s.y0 == 1.0 and s.y1 == 1.0 for s in fig.layout.shapes)
    assert not bar_axes_hold_zero(fig)
    table = figs.sweep_table([4, 8], [None, 0.25], [1.0, 1.5], [0.4, 1.2], "k")
    assert list(table.columns) == ["k", "drafts kept", "tokens per forward", "speed-up vs plain"]


def test_seed_counts_pair_the_two_samples():
    fig = figs.make_seed_counts(["·on ·the", "3 other pairs"], [120, 80], [110, 90], "title")
    assert [t.name for t in fig.data] == ["plain decoding", "speculative"]
    assert list(fig.data[0].x) == [120, 80] and list(fig.data[1].x) == [110, 90]
    assert not bar_axes_hold_zero(fig)
