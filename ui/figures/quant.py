"""Pure figure builders for the Quantization page: one stored block, bytes per format, the modes compared.

Plain lists and numpy arrays in, ``go.Figure`` out; nothing here touches the model or Streamlit.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .logits import visible_token

CODE_COLOR, VALUE_COLOR, HELD_COLOR = "#6f42c1", "#1f77b4", "#ff7f0e"


def make_block_figure(codes: Sequence[int], decoded: np.ndarray, held: np.ndarray | None, title: str) -> go.Figure:
    """Top: the 32 stored integer codes. Bottom: the 32 weights they decode to (and what the kernel holds)."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12,
                        subplot_titles=("stored codes (integers)", "the weights they stand for"))
    index = list(range(len(decoded)))
    fig.add_trace(go.Bar(x=index, y=list(codes), marker_color=CODE_COLOR, name="code q",
                         hovertemplate="weight %{x}: code %{y}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Scatter(x=index, y=decoded.tolist(), mode="markers+lines", marker_color=VALUE_COLOR,
                             name="decoded (as the file means it)",
                             hovertemplate="weight %{x}: %{y:.6f}<extra></extra>"), row=2, col=1)
    if held is not None:
        fig.add_trace(go.Scatter(x=index, y=held.tolist(), mode="markers", marker=dict(color=HELD_COLOR, symbol="x"),
                                 name="what the 4-bit kernel holds (bf16 scale and zero)",
                                 hovertemplate="weight %{x}: %{y:.6f}<extra></extra>"), row=2, col=1)
    fig.update_yaxes(title_text="code", row=1, col=1)
    fig.update_yaxes(title_text="weight", row=2, col=1)
    fig.update_xaxes(title_text="position in the block (32 weights)", row=2, col=1)
    fig.update_layout(title=title, height=470, margin=dict(l=50, r=20, t=70, b=40),
                      legend=dict(orientation="h", y=-0.18))
    return fig


def make_bytes_chart(formats: Sequence[str], megabytes_per_token: Sequence[float], ceilings: Sequence[float],
                     bandwidth_gb_s: float) -> go.Figure:
    """Bytes a decode step reads per format (bars, from zero) and the tok/s this machine's memory speed allows."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("MB of weights read per generated token",
                                                        f"ceiling tok/s at {bandwidth_gb_s:.1f} GB/s (measured now)"))
    fig.add_trace(go.Bar(x=list(formats), y=list(megabytes_per_token), marker_color=VALUE_COLOR,
                         text=[f"{v:,.0f}" for v in megabytes_per_token], textposition="outside", cliponaxis=False,
                         hovertemplate="%{x}: %{y:,.1f} MB per token<extra></extra>", showlegend=False), row=1, col=1)
    fig.add_trace(go.Bar(x=list(formats), y=list(ceilings), marker_color=HELD_COLOR,
                         text=[f"{v:,.0f}" for v in ceilings], textposition="outside", cliponaxis=False,
                         hovertemplate="%{x}: at most %{y:,.0f} tok/s<extra></extra>", showlegend=False), row=1, col=2)
    fig.update_yaxes(rangemode="tozero", title_text="MB", row=1, col=1)
    fig.update_yaxes(rangemode="tozero", title_text="tokens per second", row=1, col=2)
    fig.update_layout(height=380, margin=dict(l=50, r=20, t=60, b=40))
    return fig


def make_mode_probabilities(tokens: Sequence[str], labels: Sequence[str], probs: np.ndarray) -> go.Figure:
    """Grouped bars: the next token's probability in each weights mode (probs: (modes, tokens)), from zero."""
    fig = go.Figure()
    for label, row in zip(labels, probs):
        fig.add_trace(go.Bar(x=list(range(len(tokens))), y=row.tolist(), name=label,
                             hovertemplate=f"{label}: %{{y:.4f}}<extra></extra>"))
    fig.update_xaxes(tickmode="array", tickvals=list(range(len(tokens))), ticktext=[visible_token(t) for t in tokens],
                     title_text="the next token (float32's most probable first)")
    fig.update_yaxes(rangemode="tozero", title_text="probability")
    fig.update_layout(barmode="group", title="The same prompt in each weights mode: next-token probabilities",
                      height=400, margin=dict(l=50, r=20, t=50, b=40), legend=dict(orientation="h", y=-0.25))
    return fig


def make_mode_speed(labels: Sequence[str], tok_s: Sequence[float]) -> go.Figure:
    """Measured decode tok/s per weights mode (bars from zero)."""
    fig = go.Figure(go.Bar(x=list(labels), y=list(tok_s), marker_color=CODE_COLOR, text=[f"{v:.1f}" for v in tok_s],
                           textposition="outside", cliponaxis=False,
                           hovertemplate="%{x}: %{y:.1f} tok/s<extra></extra>"))
    fig.update_yaxes(rangemode="tozero", title_text="decode tokens per second (measured now)")
    fig.update_layout(title="What 4 bits buy: measured decode speed", height=360, margin=dict(l=50, r=20, t=50, b=40))
    return fig
