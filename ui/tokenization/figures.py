"""Figures for the Tokenization page: token chips as HTML and the token-id chart (with its table)."""

from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go

from ui.common.chart import Chart
from ui.common.token_text import visible

PALETTE = ["#fde2e4", "#e2ece9", "#dfe7fd", "#fff1c1", "#e8dff5", "#d7f2f7", "#fce1c8", "#e2f0cb"]


def chip_html(text: str, colour: str, label: str | None = None, border: str = "1px solid #bbb") -> str:
    """One token as a coloured chip with visible whitespace and an optional small label below (an id, a step).

    The chip isolates its own text direction, so right-to-left scripts stay in token order.
    """
    below = f"<br><span style='font-size:0.7em;color:#555'>{html.escape(label)}</span>" if label is not None else ""
    return (
        f"<span style='display:inline-block;unicode-bidi:isolate;margin:2px;padding:2px 5px;"
        f"background:{colour};border:{border};border-radius:4px;font-family:monospace;"
        f"text-align:center;white-space:pre'>{html.escape(visible(text))}{below}</span>"
    )


def chips_html(chips: list[str], line_height: float = 2.2) -> str:
    """Chips from ``chip_html`` in one left-to-right row that wraps."""
    return f"<div dir='ltr' style='line-height:{line_height}'>" + "".join(chips) + "</div>"


def token_chips_html(pieces: list[str], ids: list[int] | None = None, special: list[bool] | None = None) -> str:
    """Tokens as coloured chips (one colour per token, cycling; special tokens orange), ids below."""
    chips = []
    for i, piece in enumerate(pieces):
        is_special = bool(special and special[i])
        colour = "#ffd6a5" if is_special else PALETTE[i % len(PALETTE)]
        border = "2px solid #e85d04" if is_special else "1px solid #bbb"
        chips.append(chip_html(piece, colour, str(ids[i]) if ids is not None else None, border))
    return chips_html(chips)


def make_token_id_chart(pieces: list[str], ids: list[int]) -> go.Figure:
    """One bar per token at its id: the heights are arbitrary labels, not quantities."""
    labels = [f"{i}: {visible(p)}" for i, p in enumerate(pieces)]
    bars = {
        "type": "bar",
        "x": labels,
        "y": ids,
        "text": [str(i) for i in ids],
        "textposition": "outside",
        "marker": {
            "color": [PALETTE[i % len(PALETTE)] for i in range(len(ids))],
            "line": {"color": "#888", "width": 1},
        },
        "hovertemplate": "position %{x}<br>id %{y}<extra></extra>",
    }
    layout = {  # made with the figure (one validation, no relayouts)
        "title": {"text": "Token ids by position (an id is a row number in the vocabulary, not a quantity)"},
        "xaxis": {"title": {"text": "position: token"}},
        "yaxis": {"title": {"text": "token id"}},
        "height": 360,
        "margin": {"l": 40, "r": 20, "t": 50, "b": 80},
    }
    fig = go.Figure(data=[bars], layout=layout)
    return fig


def token_id_table(pieces: list[str], ids: list[int]) -> pd.DataFrame:
    """The token-id chart's numbers: one row per position, the token as the chart labels it."""
    return pd.DataFrame({"position": range(len(ids)), "token": [visible(p) for p in pieces], "token_id": ids})


token_id_chart = Chart(make_token_id_chart, token_id_table)
