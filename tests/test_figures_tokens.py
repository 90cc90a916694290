"""The token figure builders (ui.tokenization.figures), on hand-made data."""

from __future__ import annotations

import plotly.graph_objects as go

from ui.tokenization.figures import make_token_id_chart, token_chips_html, visible

PIECES = ["The", " cat", " sat", "."]


def test_visible_marks_whitespace_and_controls():
    assert visible(" a\nb\tc\x00\x07") == "·a↵b→c␀␇"


def test_token_chips_escape_html_and_show_ids_and_specials():
    html = token_chips_html(["<script>", " x"], [5, 6], [True, False])
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert ">5</span>" in html and ">6</span>" in html and "#e85d04" in html
    assert "unicode-bidi:isolate" in html


def test_token_id_chart_has_one_bar_per_token():
    fig = make_token_id_chart(PIECES, [504, 2644, 2643, 30])
    assert isinstance(fig, go.Figure)
    assert list(fig.data[0].y) == [504, 2644, 2643, 30] and len(fig.data[0].x) == 4
