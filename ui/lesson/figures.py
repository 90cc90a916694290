"""Pure figure builders for a lesson's reveal: the model's numbers with the learner's answer marked on them.

``make_token_reveal``: next-token probabilities, the model's pick in red, the learner's token outlined and labelled.
``make_bars_reveal``: bars (probabilities, attention) with the bar asked about coloured and the estimate as a
horizontal line. ``make_curve_reveal``: a curve (entropy over T, KV bytes over length, cumulative probability over
rank) with the true point marked and the estimate as a line. ``make_number_line``: one count, its tolerance band
and the estimate. ``make_direction_reveal``: a quantity over a setting, the two settings marked with an arrow.
Plain numbers in, a ``go.Figure`` out; nothing here touches the model, the session or Streamlit.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from ui.common.chart import Chart
from ui.common.token_text import visible_token
from ui.logits.figures import token_axis, token_bars

MODEL_COLOR = "#d62728"  # the model's answer (as the greedy pick on the Logits page)
BAR_COLOR = "#1f77b4"
YOURS_COLOR = "#2ca02c"  # the learner's answer
HEIGHT = 380


def _token_axis(fig: go.Figure, labels: Sequence[str]) -> None:
    fig.update_xaxes(**token_axis(labels), tickangle=-35)


def _room_for_title(fig: go.Figure, title: str) -> None:
    """A top margin that holds a title on two or three lines (``<br>``)."""
    fig.update_layout(margin={"t": 60 + 22 * title.count("<br>")})


def _curve_layout(fig: go.Figure, title: str, x_title: str, y_title: str) -> None:
    """A quantity over a setting: its axes titled, the y axis from 0, no legend."""
    fig.update_layout(
        title=title,
        height=HEIGHT,
        xaxis_title=x_title,
        yaxis={"title": y_title, "rangemode": "tozero"},
        showlegend=False,
    )


def make_token_reveal(
    texts: Sequence[str], probs: Sequence[float], right_index: int, yours_index: int | None, title: str
) -> go.Figure:
    """Next-token probabilities (bars from 0): the model's most probable in red, the learner's token outlined."""
    colors = [MODEL_COLOR if i == right_index else BAR_COLOR for i in range(len(texts))]
    widths = [4 if i == yours_index else 0 for i in range(len(texts))]
    marker = {"color": colors, "line": {"color": YOURS_COLOR, "width": widths}}
    labels = [f"{p:.1%}" for p in probs]
    fig = go.Figure(token_bars(texts, probs, labels, "%{hovertext}: %{y:.2%}<extra></extra>", marker=marker))
    fig.add_annotation(
        x=right_index, y=float(probs[right_index]), text="the model's pick", ay=-40, yshift=16, font_color=MODEL_COLOR
    )
    if yours_index is not None and yours_index != right_index:
        fig.add_annotation(
            x=yours_index, y=float(probs[yours_index]), text="yours", ay=-40, yshift=16, font_color=YOURS_COLOR
        )
    _token_axis(fig, texts)
    top = max(probs, default=0.0)
    fig.update_layout(
        title=title,
        height=HEIGHT,
        yaxis={"title": "probability", "range": [0, max(top, 0.01) * 1.3], "tickformat": ".0%"},
    )
    return fig


def make_bars_reveal(
    labels: Sequence[str], values: Sequence[float], marked: int, estimate: float, title: str, y_title: str
) -> go.Figure:
    """Bars from 0, the one asked about in red; the learner's estimate as a horizontal line across them."""
    colors = [MODEL_COLOR if i == marked else BAR_COLOR for i in range(len(labels))]
    texts = [f"{v:.3f}" for v in values]
    fig = go.Figure(token_bars(labels, values, texts, "%{hovertext}: %{y:.4f}<extra></extra>", marker_color=colors))
    fig.add_hline(
        y=estimate,
        line={"color": YOURS_COLOR, "dash": "dash", "width": 3},
        annotation_text=f"your estimate {estimate:g}",
    )
    _token_axis(fig, labels)
    top = max([*values, estimate], default=0.0)
    fig.update_layout(title=title, height=HEIGHT, yaxis={"title": y_title, "range": [0, max(top, 0.01) * 1.25]})
    _room_for_title(fig, title)
    return fig


def make_curve_reveal(
    xs: Sequence[float],
    ys: Sequence[float],
    truth_x: float,
    truth_y: float,
    estimate: float,
    estimate_on_x: bool,
    title: str,
    x_title: str,
    y_title: str,
    guide: tuple[float, str] | None = None,
) -> go.Figure:
    """A curve with the true point in red; the estimate a line: vertical when it is an x value (a count of
    tokens on a cumulative curve), horizontal when it is a y value (bits, bytes); ``guide`` a grey horizontal line
    that explains the answer (top-p's p on the cumulative curve)."""
    fig = go.Figure(go.Scatter(x=list(xs), y=list(ys), mode="lines", line_color=BAR_COLOR, name="the model"))
    fig.add_trace(
        go.Scatter(
            x=[truth_x], y=[truth_y], mode="markers", marker={"color": MODEL_COLOR, "size": 12}, name="the answer"
        )
    )
    if guide is not None:
        fig.add_hline(y=guide[0], line={"color": "#7f7f7f", "dash": "dot"}, annotation_text=guide[1])
    line = {"color": YOURS_COLOR, "dash": "dash", "width": 3}
    if estimate_on_x:
        fig.add_vline(x=estimate, line=line, annotation_text=f"your estimate {estimate:g}")
    else:
        fig.add_hline(y=estimate, line=line, annotation_text=f"your estimate {estimate:g}")
    _curve_layout(fig, title, x_title, y_title)
    _room_for_title(fig, title)
    return fig


def make_number_line(value: float, tolerance: float, estimate: float, title: str, unit: str) -> go.Figure:
    """One number on a line: the answer in red, the band that counts as right shaded, the estimate a line."""
    low, high = min(value - tolerance, estimate) - 1, max(value + tolerance, estimate) + 1
    fig = go.Figure(
        go.Scatter(
            x=[value], y=[0], mode="markers+text", marker={"color": MODEL_COLOR, "size": 16}, text=[f"{value:g}"]
        )
    )
    fig.update_traces(textposition="top center")
    fig.add_vrect(x0=value - tolerance, x1=value + tolerance, fillcolor=MODEL_COLOR, opacity=0.12, line_width=0)
    fig.add_vline(
        x=estimate,
        line={"color": YOURS_COLOR, "dash": "dash", "width": 3},
        annotation_text=f"your estimate {estimate:g}",
    )
    fig.update_layout(
        title=title,
        height=220,
        xaxis={"title": unit, "range": [low, high]},
        yaxis={"visible": False, "range": [-1, 1]},
        showlegend=False,
    )
    _room_for_title(fig, title)
    return fig


def make_direction_reveal(
    xs: Sequence[float],
    ys: Sequence[float],
    start: float,
    to: float,
    before: float,
    after: float,
    title: str,
    x_title: str,
    y_title: str,
) -> go.Figure:
    """The quantity over the setting's range, the step's setting and the new one marked, an arrow between them."""
    fig = go.Figure(go.Scatter(x=list(xs), y=list(ys), mode="lines", line_color=BAR_COLOR))
    fig.add_trace(
        go.Scatter(
            x=[start, to],
            y=[before, after],
            mode="markers+text",
            marker={"color": MODEL_COLOR, "size": 12},
            text=[f"{before:.3g}", f"{after:.3g}"],
            textposition="top center",
        )
    )
    fig.add_annotation(x=to, y=after, ax=start, ay=before, axref="x", ayref="y", arrowhead=3, arrowcolor=MODEL_COLOR)
    _curve_layout(fig, title, x_title, y_title)
    return fig


def make_estimates_histogram(estimates: Sequence[float], value: float, tolerance: float, unit: str) -> go.Figure:
    """The class's estimates as a histogram; the model's value a red line, the band that counts as right shaded."""
    fig = go.Figure(go.Histogram(x=list(estimates), marker_color=YOURS_COLOR, name="the class"))
    fig.add_vrect(x0=value - tolerance, x1=value + tolerance, fillcolor=MODEL_COLOR, opacity=0.12, line_width=0)
    fig.add_vline(x=value, line={"color": MODEL_COLOR, "width": 3}, annotation_text=f"the model: {value:g}")
    fig.update_layout(
        title="The class's estimates and the model's value",
        height=HEIGHT,
        xaxis_title=unit or "value",
        yaxis_title="students",
        showlegend=False,
    )
    return fig


def token_reveal_table(texts: Sequence[str], probs: Sequence[float]) -> pd.DataFrame:
    return pd.DataFrame({"token": [visible_token(t) for t in texts], "probability": list(probs)})


def bars_reveal_table(labels: Sequence[str], values: Sequence[float], estimate: float) -> pd.DataFrame:
    return pd.DataFrame({"x": [str(label) for label in labels], "value": list(values), "your_estimate": estimate})


def curve_reveal_table(
    xs: Sequence[float], ys: Sequence[float], truth_x: float, truth_y: float, estimate: float
) -> pd.DataFrame:
    return pd.DataFrame(
        {"x": list(xs), "y": list(ys), "answer_x": truth_x, "answer_y": truth_y, "your_estimate": estimate}
    )


def number_line_table(value: float, tolerance: float, estimate: float, unit: str) -> pd.DataFrame:
    return pd.DataFrame([{"answer": value, "tolerance": tolerance, "your_estimate": estimate, "unit": unit}])


def direction_reveal_table(xs: Sequence[float], ys: Sequence[float], x_title: str, y_title: str) -> pd.DataFrame:
    return pd.DataFrame({x_title: list(xs), y_title: list(ys)})


def estimates_table(estimates: Sequence[float], value: float, tolerance: float) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "estimate": list(estimates),
            "answer": value,
            "within_tolerance": [abs(e - value) <= tolerance for e in estimates],
        }
    )


token_reveal = Chart(make_token_reveal, token_reveal_table)
bars_reveal = Chart(make_bars_reveal, bars_reveal_table)
curve_reveal = Chart(make_curve_reveal, curve_reveal_table)
number_line = Chart(make_number_line, number_line_table)
direction_reveal = Chart(make_direction_reveal, direction_reveal_table)
estimates_histogram = Chart(make_estimates_histogram, estimates_table)
