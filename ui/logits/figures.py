"""Pure figure builders for the Logits & temperature page: logits, softmax at two temperatures, the sampler's stages.

Every function takes plain lists/numpy arrays and returns a ``go.Figure`` (or, for the
``*_table`` builders, the same numbers as a ``pandas.DataFrame`` with named columns for the
chart's CSV); nothing here touches the model, the session or Streamlit. Tokens are placed
on integer axes with their text as tick labels, so two tokens that print alike never merge.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ui.common import format as fmt
from ui.common.chart import Chart, plain, ranked_table
from ui.common.token_text import visible_token
from ui.common.traces import share_heatmap

GREEDY_COLOR = "#d62728"
BAR_COLOR = "#1f77b4"
SECOND_COLOR = "#ff7f0e"
CUT_COLOR = "#d9d9d9"
LEGEND_ABOVE = {"orientation": "h", "y": 1.02, "x": 1, "xanchor": "right", "yanchor": "bottom"}  # one row, right


def token_axis(tokens: Sequence[str]) -> dict:
    """An x axis labelled with the tokens' visible texts at positions 0..n-1."""
    return {"tickmode": "array", "tickvals": list(range(len(tokens))), "ticktext": [visible_token(t) for t in tokens]}


def token_bars(
    tokens: Sequence[str], values: Sequence[float], labels: Sequence[str], hovertemplate: str, **bar: Any
) -> go.Bar:
    """Bars from 0 at positions 0..n-1 (the token axis), ``labels`` above them, each token's visible text in the
    hover (``%{hovertext}``); ``bar`` the rest of the trace (its colours)."""
    return go.Bar(
        x=list(range(len(tokens))),
        y=list(values),
        text=list(labels),
        textposition="outside",
        cliponaxis=False,
        hovertext=[visible_token(t) for t in tokens],
        hovertemplate=hovertemplate,
        **bar,
    )


def reference_bars(x: list[int], values: Sequence[float], name: str, **bar: Any) -> go.Bar:
    """Grouped bars' first series, faded blue: the exact distribution the other one is set against."""
    return go.Bar(x=x, y=list(values), name=name, marker_color=BAR_COLOR, opacity=0.55, **bar)


def compared_bars(x: list[int], values: Sequence[float], name: str, labels: Sequence[str], **bar: Any) -> go.Bar:
    """Grouped bars' second series, orange, set against ``reference_bars``: each bar's ``labels`` above it."""
    return go.Bar(
        x=x,
        y=list(values),
        name=name,
        marker_color=SECOND_COLOR,
        text=list(labels),
        textposition="outside",
        cliponaxis=False,
        **bar,
    )


def _greedy_note(index: int, top: float, arrow: int, shift: int) -> dict:
    """The "greedy pick" label above bar ``index`` (its top at ``top``), its arrow ``arrow`` px long."""
    return {
        "x": index,
        "y": top,
        "text": "greedy pick",
        "showarrow": True,
        "arrowhead": 2,
        "ay": -arrow,
        "yshift": shift,
        "font": {"color": GREEDY_COLOR},
    }


def make_logits_bar(
    tokens: Sequence[str],
    logits: Sequence[float],
    greedy_index: int = 0,
    title: str = "Top logits for the next token (bars from 0)",
) -> go.Figure:
    """Bar chart of raw logits (one per token) from 0, so a bar's height is the logit (negative ones hang
    below the line); the greedy pick in red and labelled."""
    colors = [GREEDY_COLOR if i == greedy_index else BAR_COLOR for i in range(len(tokens))]
    labels = [f"{v:.2f}" for v in logits]
    low, high = (min(0.0, min(logits)), max(0.0, max(logits))) if len(logits) else (0.0, 1.0)
    span = max(high - low, 1e-6)  # the axis always holds 0: bars start there, and room for the labels
    layout = {  # made with the figure (one validation, no relayouts)
        "title": {"text": title},
        "margin": {"t": 60, "b": 40},
        "height": 360,
        "xaxis": token_axis(tokens),
        "yaxis": {
            "title": {"text": "logit (raw score, can be negative)"},
            "zeroline": True,
            "zerolinewidth": 2,
            "range": [low - (0.12 * span if low < 0 else 0), high + 0.3 * span],
        },
    }
    if 0 <= greedy_index < len(tokens):
        layout["annotations"] = [_greedy_note(greedy_index, float(logits[greedy_index]), arrow=45, shift=18)]
    bars = token_bars(tokens, logits, labels, "%{hovertext}: logit %{y:.3f}<extra></extra>", marker_color=colors)
    fig = go.Figure(data=[bars], layout=layout)
    return fig


def make_probability_overlay(
    tokens: Sequence[str],
    probs_a: Sequence[float],
    probs_b: Sequence[float],
    label_a: str,
    label_b: str,
    greedy_index: int = 0,
) -> go.Figure:
    """Two softmax distributions over the same tokens as grouped bars (e.g. T = 1 against the chosen T)."""
    x = list(range(len(tokens)))
    bars = [
        reference_bars(
            x,
            probs_a,
            label_a,
            customdata=[fmt.prob(p, 4) for p in probs_a],
            hovertemplate="%{customdata}<extra>" + label_a + "</extra>",
        ),
        compared_bars(
            x,
            probs_b,
            label_b,
            [fmt.prob(p, 2, 2) for p in probs_b],
            customdata=[fmt.prob(p, 4) for p in probs_b],
            hovertemplate="%{customdata}<extra>" + label_b + "</extra>",
        ),
    ]
    top = max([*probs_a, *probs_b, 0.05])
    layout = {  # made with the figure (one validation, no relayouts)
        "barmode": "group",
        "title": {"text": "Probabilities after softmax: two temperatures"},
        "xaxis": token_axis(tokens),
        "yaxis": {"title": {"text": "probability"}, "range": [0, min(1.0, top) * 1.3]},
        "height": 360,
        "legend": LEGEND_ABOVE,
        "margin": {"t": 70, "b": 40},
    }
    if 0 <= greedy_index < len(tokens):
        top_there = max(float(probs_a[greedy_index]), float(probs_b[greedy_index]))
        layout["annotations"] = [_greedy_note(greedy_index, top_there, arrow=30, shift=16)]
    fig = go.Figure(data=bars, layout=layout)
    return fig


def make_temperature_sweep(
    temperatures: Sequence[float], entropy_bits: Sequence[float], top_probability: Sequence[float], current: float
) -> go.Figure:
    """Entropy (bits) and the top token's probability as T varies; T < 1 sharpens, T > 1 flattens.

    Marks T = 1 and ``current`` with vertical lines and shades the two regimes (shapes are
    written into the layout directly: ``add_vline``/``add_vrect`` validate the whole figure on every call,
    which made them most of this builder's time; docs/pages-predicting.md has the measurement).
    """
    low, high = min(temperatures), max(temperatures)
    shapes = [
        _band(low, 1.0, GREEDY_COLOR),
        _band(1.0, high, BAR_COLOR),
        _vertical(1.0, "grey", "dot"),
        _vertical(current, SECOND_COLOR, "solid"),
    ]
    annotations = [
        _label(1.0, "T = 1 (the model's own)", "grey", "right" if current >= 1.0 else "left", 1.07),
        _label(current, f"your T = {current:g}", SECOND_COLOR, "left" if current >= 1.0 else "right", 0.93),
        _label(low, "sharper", GREEDY_COLOR, "left", 0.02),
        _label(high, "flatter", BAR_COLOR, "right", 0.02),
    ]
    lines = (  # (values, name, colour, value axis: None is the left one)
        (entropy_bits, "entropy (bits)", BAR_COLOR, None),
        (top_probability, "top token's probability", GREEDY_COLOR, "y2"),
    )
    return go.Figure(
        data=[
            go.Scatter(
                x=list(temperatures), y=list(values), name=name, mode="lines", line={"color": colour}, yaxis=axis
            )
            for values, name, colour, axis in lines
        ],
        layout={
            "title": {"text": "Temperature: entropy and the top probability"},
            "height": 360,
            "xaxis": {"title": {"text": "temperature T"}, "range": [low, high]},
            "yaxis": {"title": {"text": "entropy (bits)"}, "rangemode": "tozero"},
            "yaxis2": {
                "title": {"text": "top probability"},
                "overlaying": "y",
                "side": "right",
                "range": [0, 1.05],
                "dtick": 0.25,
                "showgrid": False,
            },
            "shapes": shapes,
            "annotations": annotations,
            "legend": {"orientation": "h", "y": -0.25},
            "margin": {"t": 80, "b": 40},
        },
    )


def _full_height(kind: str, x0: float, x1: float, **style: Any) -> dict:
    """A layout shape from x0 to x1 over the plot's whole height."""
    return {"type": kind, "xref": "x", "yref": "paper", "x0": x0, "x1": x1, "y0": 0, "y1": 1, **style}


def _vertical(x: float, color: str, dash: str) -> dict:
    return _full_height("line", x, x, line={"color": color, "dash": dash, "width": 2})


def _band(x0: float, x1: float, color: str) -> dict:
    return _full_height("rect", x0, x1, fillcolor=color, opacity=0.05, line={"width": 0}, layer="below")


def _label(x: float, text: str, color: str, side: str, y: float) -> dict:
    return {
        "x": x,
        "y": y,
        "xref": "x",
        "yref": "paper",
        "text": text,
        "showarrow": False,
        "font": {"color": color},
        "xanchor": side,
        "xshift": 4 if side == "left" else -4,
    }


def make_stage_figure(
    tokens: Sequence[str], stage_labels: Sequence[str], stage_probs: np.ndarray, survivors: Sequence[int | str]
) -> go.Figure:
    """Heatmap of the sampler's stages (rows, in order) × tokens: probability in each cell, cut tokens grey.

    ``stage_probs`` is (S, N); a 0 means the token did not survive that stage. Row labels carry
    what each stage did over the whole vocabulary: a count of tokens left, or the stage's own
    words (``ui.logits.claims.stage_counts``: "nothing removed, 121 round to 0"). Cells are
    written by the one probability rule (``format.prob``: never "0.000" for a token still there).
    """
    probs = np.asarray(stage_probs, dtype=np.float64)
    shown = np.where(probs > 0, probs, np.nan)  # NaN cells are left blank, on a grey background
    text = np.array([[fmt.prob(p, 3, 2) if p > 0 else "cut" for p in row] for row in probs], dtype=object)
    rows = [
        f"{label} · {count:,} left" if isinstance(count, int) else f"{label} · {count}"
        for label, count in zip(stage_labels, survivors)
    ]
    stages = share_heatmap(
        shown,
        rows,
        "Blues",
        2,
        "p",
        text=text,
        texttemplate="%{text}",
        textfont={"size": 13},
        hovertemplate="%{y}<br>%{text}<extra></extra>",
    )
    layout = {  # made with the figure (one validation, no relayouts)
        "title": {"text": "Which tokens survive each stage (engine order, top to bottom)"},
        "xaxis": token_axis(tokens),
        "yaxis": {"autorange": "reversed"},
        "plot_bgcolor": CUT_COLOR,
        "height": 120 + 48 * len(rows),
        "margin": {"t": 60, "b": 40, "l": 10},
    }
    fig = go.Figure(data=[stages], layout=layout)
    return fig


# -- the tables behind the charts' CSVs ---------------------------------------------------------
def logits_table(
    token_ids: Sequence[int], tokens: Sequence[str], logits: Sequence[float], greedy_index: int = 0
) -> pd.DataFrame:
    texts = [visible_token(t) for t in tokens]
    picked = [i == greedy_index for i in range(len(tokens))]
    return ranked_table(texts, {"logit": plain(logits), "greedy_pick": picked}, token_ids)


logits_bar = Chart(make_logits_bar, logits_table)  # the table also takes token_ids= (by name)


def overlay_table(
    tokens: Sequence[str], probs_a: Sequence[float], probs_b: Sequence[float], label_a: str, label_b: str
) -> pd.DataFrame:
    columns = {f"probability at {label_a}": plain(probs_a), f"probability at {label_b}": plain(probs_b)}
    return ranked_table([visible_token(t) for t in tokens], columns)


probability_overlay = Chart(make_probability_overlay, overlay_table)


def sweep_table(
    temperatures: Sequence[float], entropy_bits: Sequence[float], top_probability: Sequence[float]
) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "temperature": plain(temperatures),
            "entropy_bits": plain(entropy_bits),
            "top_token_probability": plain(top_probability),
        }
    )


temperature_sweep = Chart(make_temperature_sweep, sweep_table)


def stage_table(
    token_ids: Sequence[int],
    tokens: Sequence[str],
    stage_labels: Sequence[str],
    stage_probs: np.ndarray,
    survivor_counts: Sequence[int],
) -> pd.DataFrame:
    """One row per (stage, token): its probability after the stage, 0 where the stage cut it."""
    rows = [
        {
            "stage": label,
            "survivors_in_vocabulary": count,
            "rank": rank + 1,
            "token_id": token_ids[rank],
            "token": visible_token(tokens[rank]),
            "probability": float(stage_probs[s, rank]),
            "kept": bool(stage_probs[s, rank] > 0),
        }
        for s, (label, count) in enumerate(zip(stage_labels, survivor_counts))
        for rank in range(len(tokens))
    ]
    return pd.DataFrame(rows)


stage_chart = Chart(make_stage_figure, stage_table)  # the table also takes token_ids=, survivor_counts= (by name)
