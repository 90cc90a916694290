"""The chart conventions (``ui.common.conventions``) and the figures that follow them, on hand-made data."""

from __future__ import annotations

import numpy as np

from ui.common import conventions as conv


def test_paired_charts_take_one_range():
    left, right = [0.377, 0.1, 0.05], [0.215, 0.2, 0.01]
    assert conv.shared_range(left, right) == [0.0, 0.377 * 1.15]
    assert conv.shared_range([0.0]) == [0.0, 0.01 * 1.15]  # never an empty axis


def test_the_two_top_10s_of_the_compare_page_share_their_axis():
    """The issue's case: 37.7% and 21.5% drawn on 0-0.4 and 0-0.2 looked alike."""
    from ui.generation.figures import make_alternatives_bar

    axis = conv.shared_range([0.377, 0.2], [0.215, 0.1])
    left = make_alternatives_bar([" a", " b"], [0.377, 0.2], " a", "left", axis)
    right = make_alternatives_bar([" c", " d"], [0.215, 0.1], " c", "right", axis)
    assert list(left.layout.xaxis.range) == list(right.layout.xaxis.range) == axis
    assert not conv.bar_axes_hold_zero(left) and not conv.bar_axes_hold_zero(right)


def test_a_flat_line_says_so():
    scores = np.linspace(6.785, 6.800, 65)  # the RoPE chart: 0.2 % drawn as large swings
    note = conv.flat_note(scores, "the score")
    assert note.startswith("Zoomed in: the score spans only 0.015") and "0.22%" in note
    assert conv.flat_note(np.linspace(-3.6, 8.0, 65)) is None
    assert conv.flat_note([1.0]) is None and conv.flat_note([0.0, 0.0]) is None

    from ui.embeddings.figures import make_distance_scores

    flat = make_distance_scores(np.arange(65), scores, 6, 6.79, " it", " The")
    assert any(a.text.startswith("Zoomed in") for a in flat.layout.annotations)
    moving = make_distance_scores(np.arange(65), np.linspace(-3.6, 8.0, 65), 6, 1.0, " it", " cat")
    assert not any((a.text or "").startswith("Zoomed in") for a in moving.layout.annotations)


def test_labels_fit_their_cells():
    assert conv.fit_label("<0xE3><0x83>", 6) == "<0xE3…" and conv.fit_label("cat", 6) == "cat"
    size, drawn = conv.fit_cells(["<0xE3><0x83>", "·the"], 10, 13)
    assert conv.MIN_CELL_FONT_PX <= size <= 13
    width = conv.PLOT_PX / 10 - 4
    for text in drawn.values():
        assert len(text) * conv.CHAR_PX * size * conv.PROJECTOR_FONT_SCALE <= width + 1e-9

    from ui.sampling.figures import make_token_strips

    fig = make_token_strips([["<0xE3><0x83>", "<0xAB>", " the"] * 4], ["sampled"], [[0.5, 0.2, 1.45e-6] * 4], None, "t")
    heat = fig.data[0]
    per_cell = conv.PLOT_PX / 12 - 4
    assert all(
        len(t) * conv.CHAR_PX * heat.textfont.size * conv.PROJECTOR_FONT_SCALE <= per_cell
        for row in heat.text
        for t in row
    )
    assert "p = 1.45e-6" in heat.customdata[0][2]  # the hover has the whole token and its probability


def test_crowded_labels_are_thinned():
    angles = [0.0, 0.01, 0.02, 1.0, 6.27]
    assert conv.spread_out(angles, 0.45, period=2 * np.pi) == [True, False, False, True, False]  # 6.27 is next to 0

    from ui.embeddings.figures import make_rope_rotation

    slow = np.array([[0.001 * p, 0.5 * p] for p in range(12)])  # (P, pairs): pair 0 barely turns
    fig = make_rope_rotation(slow, [0, 1], np.array([6283.0, 12.6]))
    labels = [t.text[1] for t in fig.data if t.mode == "lines+markers+text"]
    first_pair, second_pair = labels[:12], labels[12:]
    assert [t for t in first_pair if t] == ["0"]  # twelve arrows on one spot: one label, not a pile
    assert len([t for t in second_pair if t]) == 12


def test_bar_charts_start_at_zero():
    from ui.generation import figures as generation
    from ui.logits import figures as logits
    from ui.quantization import figures as quant

    figures = [
        logits.make_logits_bar([" a", " b"], [3.0, -1.0]),
        logits.make_probability_overlay([" a", " b"], [0.6, 0.4], [0.9, 0.1], "T = 1", "T = 0.5"),
        generation.make_alternatives_bar([" a"], [0.2], " a", "t"),
        quant.make_block_layout([3, 15, 0], np.array([0.1, 0.2, 0.3]), 3, (0, 15), None, "t"),
        quant.make_block_layout([-128, 127, 5], np.array([0.1, 0.2, 0.3]), 3, (-128, 127), None, "t"),
        quant.make_mode_speed(["float32"], [20.0]),
    ]
    for fig in figures:
        assert not conv.bar_axes_hold_zero(fig), fig.layout.title.text


def test_the_projector_scale_is_the_shells():
    from ui.common.charts import FONT_SCALE

    assert conv.PROJECTOR_FONT_SCALE == FONT_SCALE


def test_every_chart_keeps_all_its_tick_labels(monkeypatch):
    """Plotly hides a tick label reaching past the chart's edge (the class histogram's last bar, 'other (49,142
    tokens)' on two lines, in a narrow column): every chart the pages draw grows its margin instead and keeps it."""
    import plotly.graph_objects as go

    from ui.common import charts

    drawn = []
    monkeypatch.setattr(charts, "presenting", lambda: False)
    monkeypatch.setattr(charts, "file_stem", lambda key, name=None: key)
    monkeypatch.setattr(charts.st, "plotly_chart", lambda fig, **kwargs: drawn.append(fig))
    monkeypatch.setattr(charts.st, "download_button", lambda *args, **kwargs: None)
    fig = go.Figure(go.Bar(x=[0, 1], y=[1, 2]))
    fig.update_xaxes(tickmode="array", tickvals=[0, 1], ticktext=["·This", "other<br>(49,142 tokens)"])
    charts.show(fig, key="histogram")
    axis = drawn[0].layout.xaxis
    assert axis.automargin is True and axis.ticklabeloverflow == "allow"
    assert list(axis.ticktext) == ["·This", "other<br>(49,142 tokens)"]  # the labels themselves untouched


def test_keeping_tick_labels_sets_what_update_xaxes_sets_on_every_chart():
    """``keep_tick_labels`` sets each x axis itself (a third of ``update_xaxes``'s Python); on every chapter's chart
    spec, with its hand-made arguments (subplots with many x axes among them), the figure's JSON is the same."""
    import importlib

    from tests.chart_samples import SAMPLES
    from ui.common.charts import keep_tick_labels

    subplots = 0
    for name, (args, kwargs) in SAMPLES.items():
        chapter, spec = name.split(".")
        chart = getattr(importlib.import_module(f"ui.{chapter}.figures"), spec)(*args, **kwargs)
        fig = chart.figure()  # built twice (not a deep copy: that alone changes the JSON's bytes)
        expected = chart.figure().update_xaxes(automargin=True, ticklabeloverflow="allow")
        assert keep_tick_labels(fig).to_json() == expected.to_json(), name
        subplots += "xaxis2" in fig.layout
    assert subplots >= 3  # the check reached figures with several x axes
