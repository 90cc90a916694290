"""The sampling figure builders (ui.sampling.figures), on hand-made data."""

from __future__ import annotations

import pytest

from ui.sampling.figures import make_cumulative_ranges, make_draw_histogram, make_token_strips, toy_ranges


def test_toy_ranges_are_the_articles():
    starts, ends = toy_ranges([0.1, 0.2, 0.7])
    assert starts == pytest.approx([0.0, 0.1, 0.3])
    assert ends == pytest.approx([0.1, 0.3, 1.0])


def test_cumulative_ranges_mark_u_and_add_the_tail():
    fig = make_cumulative_ranges(
        ["a", "b"], [0.0, 0.5], [0.5, 0.8], u=0.6, chosen_index=1, title="t", other_label="5 other tokens"
    )
    (bars,) = fig.data  # one trace, a bar per range
    assert list(bars.customdata) == ["a", "b", "5 other tokens"] and list(bars.y) == ["", "", ""]
    assert list(bars.base) == pytest.approx([0.0, 0.5, 0.8]) and list(bars.x) == pytest.approx([0.5, 0.3, 0.2])
    assert list(bars.marker.line.width) == [1, 4, 1]  # the range u = 0.6 lands in
    assert bars.marker.line.color[1] != "white" and bars.marker.line.color[0] == "white"
    assert bars.marker.color[2] != bars.marker.color[0]  # the remainder in its own grey
    assert bars.text[0] == "a<br>0.00–0.50" and "p = " in bars.hovertemplate[2]
    assert fig.layout.shapes[0].x0 == 0.6 and fig.layout.annotations[0].text.startswith("u = 0.6")
    assert "·on" in make_cumulative_ranges([" on"], [0.0], [1.0], 0.5, 0, "t").data[0].text[0]
    nothing_shown = make_cumulative_ranges(["a"], [0.0], [0.5], 0.7, None, "t", other_label="9 other tokens")
    assert list(nothing_shown.data[0].marker.line.width) == [1, 4]  # u past the shown ranges: the remainder holds it
    assert (
        make_cumulative_ranges(["token 0"], [0.0], [1.0], 0.5, 0, "t", token_labels=False)
        .data[0]
        .text[0]
        .startswith("token 0")
    )


def test_draw_histogram_reports_the_fit():
    fig = make_draw_histogram(["a", "b"], [0.6, 0.4], [0.55, 0.45], 1000, 10.1, 1, 0.0015)
    assert "χ² = 10.10" in fig.layout.title.text and "p = 0.0015" in fig.layout.title.text
    assert len(fig.data) == 2


def test_token_strips_box_the_divergence():
    fig = make_token_strips([[" on", " a"], [" on", " the"]], ["A", "B"], [[0.9, 0.5], [0.9, 0.2]], 1, "t")
    assert fig.layout.shapes[0].x0 == 0.5 and fig.layout.shapes[0].x1 == 1.5
    assert make_token_strips([["x"]], ["A"], [[1.0]], None, "t").layout.shapes == ()
