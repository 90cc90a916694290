"""Pure figure builders for the Quantization page: one stored block, bytes per format, the modes compared.

Plain lists and numpy arrays in, ``go.Figure`` out (each with a ``*_table`` beside it: its numbers
under named columns, for the chart's CSV); nothing here touches the model or Streamlit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ui.common import format as fmt
from ui.common.chart import Chart
from ui.common.subplots import subplots
from ui.common.token_text import visible_token

CODE_COLOR, VALUE_COLOR, HELD_COLOR = "#6f42c1", "#1f77b4", "#ff7f0e"
GROUP_COLORS = ("#6f42c1", "#b07cd8")  # neighbouring scale groups of a K type's super-block, told apart


def make_block_layout(
    codes: Sequence[int],
    decoded: np.ndarray,
    group_size: int,
    code_range: tuple[int, int],
    held: np.ndarray | None,
    title: str,
    zero_code: float | None = None,
) -> go.Figure:
    """Top: the stored integer codes (bars from zero, the axis spanning every value a code can take), neighbouring
    scale groups in two shades, and the code that stands for a weight of 0 (``zero_code``, e.g. 16 for Q5_0)
    dashed. Bottom: the weights they decode to (and what the 4-bit kernel holds)."""
    n = len(decoded)
    groups = n // group_size
    zero_drawn = zero_code is not None and code_range[0] <= zero_code <= code_range[1]
    fig = subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.12,
        subplot_titles=(
            f"stored codes (integers {code_range[0]}…{code_range[1]})"
            + (f", {groups} groups of {group_size} with their own scale" if groups > 1 else "")
            + (f"; dashed: q = {zero_code:.3g}, which decodes to w = 0" if zero_drawn else ""),
            "the weights they stand for",
        ),
    )
    index = list(range(n))
    colours = [GROUP_COLORS[(i // group_size) % 2] for i in index]
    fig.add_trace(
        go.Bar(
            x=index,
            y=list(codes),
            marker_color=colours,
            name="code q",
            customdata=[i // group_size for i in index],
            hovertemplate="weight %{x} (group %{customdata}): code %{y}<extra></extra>",
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=index,
            y=np.asarray(decoded).tolist(),
            mode="markers+lines",
            marker_color=VALUE_COLOR,
            marker_size=4 if n > 64 else 6,
            name="decoded (as the file means it)",
            hovertemplate="weight %{x}: %{y:.6f}<extra></extra>",
        ),
        row=2,
        col=1,
    )
    if held is not None:
        fig.add_trace(
            go.Scatter(
                x=index,
                y=np.asarray(held).tolist(),
                mode="markers",
                marker=dict(color=HELD_COLOR, symbol="x", size=5 if n > 64 else 7),
                name="what the 4-bit kernel holds (bf16 scale and zero)",
                hovertemplate="weight %{x}: %{y:.6f}<extra></extra>",
            ),
            row=2,
            col=1,
        )
    if zero_drawn:  # named in the subplot's title: a label on the line would sit on the bars
        fig.add_shape(
            type="line",
            xref="x",
            yref="y",
            x0=-0.5,
            x1=n - 0.5,
            y0=zero_code,
            y1=zero_code,
            line=dict(color="#444", dash="dash", width=1.5),
        )
    low, high = min(code_range[0], 0), max(code_range[1], 0)
    fig.update_yaxes(title_text="code", range=[low - 0.04 * (high - low), high * 1.04], row=1, col=1)
    fig.update_yaxes(title_text="weight", row=2, col=1)
    fig.update_xaxes(title_text=f"position in the block ({n} weights)", row=2, col=1)
    fig.update_layout(
        title=title,
        height=470,
        margin=dict(l=50, r=20, t=80, b=40),
        bargap=0.1 if n > 64 else 0.2,
        legend=dict(orientation="h", y=-0.18),
    )
    return fig


def block_layout_table(
    codes: Sequence[int],
    decoded: np.ndarray,
    group_size: int,
    scales: Sequence[float],
    offsets: Sequence[float],
    reference: np.ndarray,
    held: np.ndarray | None,
) -> pd.DataFrame:
    """One row per weight of the block: its group, code, the group's scale and offset, the weight, gguf's own."""
    n = len(decoded)
    group = np.arange(n) // group_size
    table = pd.DataFrame(
        {
            "position_in_block": range(n),
            "group": group,
            "code": list(codes),
            "group_scale": np.asarray(scales, dtype=float)[group],
            "group_offset": np.asarray(offsets, dtype=float)[group],
            "weight": np.asarray(decoded, dtype=float),
            "weight_by_gguf_package": np.asarray(reference, dtype=float),
        }
    )
    if held is not None:
        table["weight_as_kernel_holds_it"] = np.asarray(held, dtype=float)
    return table


block_layout = Chart(
    make_block_layout, block_layout_table
)  # the table also takes scales=, offsets=, reference= (by name)


def make_bytes_chart(
    formats: Sequence[str], megabytes_per_token: Sequence[float], ceilings: Sequence[float], bandwidth_gb_s: float
) -> go.Figure:
    """Bytes a decode step reads per format (bars, from zero) and the tok/s this machine's memory speed allows."""
    fig = subplots(
        rows=1,
        cols=2,
        subplot_titles=(
            "MB of weights read per generated token",
            f"ceiling tok/s at {bandwidth_gb_s:.1f} GB/s (measured now)",
        ),
    )
    panels = (  # (values, colour, hover): what is read, then what that allows
        (megabytes_per_token, VALUE_COLOR, "%{x}: %{y:,.1f} MB per token<extra></extra>"),
        (ceilings, HELD_COLOR, "%{x}: at most %{y:,.0f} tok/s<extra></extra>"),
    )
    for col, (values, color, hover) in enumerate(panels, 1):
        fig.add_trace(_labelled_bars(formats, values, color, ",.0f", hover, showlegend=False), row=1, col=col)
    fig.update_yaxes(rangemode="tozero", title_text="MB", row=1, col=1)
    fig.update_yaxes(rangemode="tozero", title_text="tokens per second", row=1, col=2)
    fig.update_layout(height=380, margin=dict(l=50, r=20, t=60, b=40))
    return fig


def make_mode_probabilities(tokens: Sequence[str], labels: Sequence[str], probs: np.ndarray) -> go.Figure:
    """Grouped bars: the next token's probability in each weights mode (probs: (modes, tokens)), from zero."""
    fig = go.Figure()
    for label, row in zip(labels, probs):
        fig.add_trace(
            go.Bar(
                x=list(range(len(tokens))),
                y=row.tolist(),
                name=label,
                customdata=[fmt.prob(p, 4) for p in row],
                hovertemplate=f"{label}: %{{customdata}}<extra></extra>",
            )
        )
    fig.update_xaxes(
        tickmode="array",
        tickvals=list(range(len(tokens))),
        ticktext=[visible_token(t) for t in tokens],
        title_text="the next token (float32's most probable first)",
    )
    fig.update_yaxes(rangemode="tozero", title_text="probability")
    fig.update_layout(
        barmode="group",
        title="The same prompt in each weights mode: next-token probabilities",
        height=400,
        margin=dict(l=50, r=20, t=50, b=40),
        legend=dict(orientation="h", y=-0.25),
    )
    return fig


def _labelled_bars(
    x: Sequence[str], values: Sequence[float], color: str, label_format: str, hover: str, **bar: Any
) -> go.Bar:
    """Bars from zero with each value written above its bar (``label_format``: a format spec such as ``".1f"``)."""
    return go.Bar(
        x=list(x),
        y=list(values),
        marker_color=color,
        text=[format(v, label_format) for v in values],
        textposition="outside",
        cliponaxis=False,
        hovertemplate=hover,
        **bar,
    )


def make_mode_speed(labels: Sequence[str], tok_s: Sequence[float]) -> go.Figure:
    """Measured decode tok/s per weights mode (bars from zero)."""
    fig = go.Figure(_labelled_bars(labels, tok_s, CODE_COLOR, ".1f", "%{x}: %{y:.1f} tok/s<extra></extra>"))
    fig.update_yaxes(rangemode="tozero", title_text="decode tokens per second (measured now)")
    fig.update_layout(title="What 4 bits buy: measured decode speed", height=360, margin=dict(l=50, r=20, t=50, b=40))
    return fig


# -- the tables behind the charts' CSVs ---------------------------------------------------------


def bytes_table(
    formats: Sequence[str], megabytes_per_token: Sequence[float], ceilings: Sequence[float], bandwidth_gb_s: float
) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "format": list(formats),
            "mb_read_per_token": list(megabytes_per_token),
            "ceiling_tokens_per_second": list(ceilings),
            "memory_gb_per_s": bandwidth_gb_s,
        }
    )


bytes_chart = Chart(make_bytes_chart, bytes_table)


def mode_probabilities_table(tokens: Sequence[str], labels: Sequence[str], probs: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"weights": label, "rank_in_float32": i + 1, "token": visible_token(token), "probability": float(row[i])}
            for label, row in zip(labels, probs)
            for i, token in enumerate(tokens)
        ]
    )


mode_probabilities = Chart(make_mode_probabilities, mode_probabilities_table)


def mode_speed_table(labels: Sequence[str], tok_s: Sequence[float]) -> pd.DataFrame:
    return pd.DataFrame({"weights": list(labels), "decode_tokens_per_second": list(tok_s)})


mode_speed = Chart(make_mode_speed, mode_speed_table)
