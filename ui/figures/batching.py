"""Pure figure builders for the Batching page.

Plain lists and arrays in, ``go.Figure`` out: the left-padded batch as a grid, one
row's attention mask, the position ids, and the static-vs-continuous timeline of
which request occupies which batch row or cache slot at each step.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .tokens import visible

PAD, IDLE, EMPTY = -1, -2, -3  # timeline cell codes besides request numbers
REQUEST_COLORS = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d"]


def _discrete_scale(colors: Sequence[str]) -> list[list]:
    """A colorscale that maps integer codes 0..n-1 (scaled to [0, 1]) to flat colour bands."""
    n = len(colors)
    scale = []
    for i, color in enumerate(colors):
        scale += [[i / n, color], [(i + 1) / n, color]]
    return scale


def make_padded_batch(rows: Sequence[Sequence[str | None]], title: str = "The left-padded batch") -> go.Figure:
    """Requests (rows) x columns: real tokens coloured by request, padding (None) grey."""
    n_rows, width = len(rows), max((len(r) for r in rows), default=0)
    z = np.array([[0 if cell is None else 1 + (i % len(REQUEST_COLORS)) for cell in row] for i, row in enumerate(rows)])
    text = [["pad" if cell is None else visible(cell) for cell in row] for row in rows]
    colors = ["#e9ecef"] + REQUEST_COLORS
    fig = go.Figure(go.Heatmap(
        z=z, text=text, texttemplate="%{text}", textfont=dict(size=10), x=list(range(width)),
        y=[f"request {i}" for i in range(n_rows)], zmin=-0.5, zmax=len(colors) - 0.5,
        colorscale=_discrete_scale(colors), showscale=False, xgap=2, ygap=2,
        hovertemplate="%{y}, column %{x}: %{text}<extra></extra>",
    ))
    fig.update_layout(title=title, height=80 + 36 * n_rows, margin=dict(l=10, r=10, t=50, b=30),
                      yaxis=dict(autorange="reversed"), xaxis=dict(title="column of the batch tensor", dtick=1))
    return fig


def make_mask_heatmap(mask: np.ndarray, labels: Sequence[str | None], request: int) -> go.Figure:
    """One request's attention mask (queries x keys over the padded columns): 1 = may attend."""
    ticks = [f"{i}: {'pad' if t is None else visible(t)}" for i, t in enumerate(labels)]
    fig = go.Figure(go.Heatmap(z=mask.astype(int), x=ticks, y=ticks, zmin=0, zmax=1, xgap=1, ygap=1,
                               colorscale=[[0, "#f1f3f5"], [1, "#1f77b4"]], showscale=False,
                               hovertemplate="query %{y}<br>key %{x}<br>%{z}<extra></extra>"))
    fig.update_layout(title=f"Request {request}: attention mask (1 = may attend)",
                      height=max(320, 120 + 22 * len(labels)), margin=dict(l=10, r=10, t=50, b=10),
                      yaxis=dict(autorange="reversed", title="query"), xaxis=dict(title="key", tickangle=-45))
    return fig


def make_positions_heatmap(positions: np.ndarray, real: np.ndarray) -> go.Figure:
    """Position ids (requests x columns): cumsum(mask) - 1, so every prompt starts at position 0."""
    text = [[str(p) if r else "pad→0" for p, r in zip(prow, rrow)] for prow, rrow in zip(positions, real)]
    fig = go.Figure(go.Heatmap(z=np.where(real, positions, np.nan), text=text, texttemplate="%{text}",
                               colorscale="Blues", showscale=False, xgap=2, ygap=2,
                               y=[f"request {i}" for i in range(len(positions))],
                               hovertemplate="%{y}, column %{x}: position %{text}<extra></extra>"))
    fig.update_layout(title="Position ids: each row counts its own real tokens from 0",
                      height=80 + 36 * len(positions), margin=dict(l=10, r=10, t=50, b=30),
                      yaxis=dict(autorange="reversed"), xaxis=dict(title="column", dtick=1))
    return fig


def make_batch_timeline(grid: np.ndarray, phases: Sequence[str], title: str, slot_name: str) -> go.Figure:
    """Rows (batch rows or cache slots) x steps: which request is there (its colour and number),
    ``IDLE`` = a finished request still holding its row, ``EMPTY`` = a free slot."""
    n_slots, n_steps = grid.shape
    colors = ["#ffffff", "#adb5bd"] + REQUEST_COLORS  # EMPTY, IDLE, then requests 0..7
    codes = np.where(grid == EMPTY, 0, np.where(grid == IDLE, 1, 2 + grid % len(REQUEST_COLORS)))
    text = [["" if c == EMPTY else ("idle" if c == IDLE else str(int(c))) for c in row] for row in grid]
    fig = go.Figure(go.Heatmap(
        z=codes, text=text, texttemplate="%{text}", textfont=dict(size=10), zmin=-0.5, zmax=len(colors) - 0.5,
        colorscale=_discrete_scale(colors), showscale=False, xgap=1, ygap=2,
        x=[f"{i}{'P' if p == 'prefill' else ''}" for i, p in enumerate(phases)],
        y=[f"{slot_name} {s}" for s in range(n_slots)],
        hovertemplate="step %{x}, %{y}: request %{text}<extra></extra>",
    ))
    fig.update_layout(title=title, height=90 + 34 * n_slots, margin=dict(l=10, r=10, t=50, b=40),
                      yaxis=dict(autorange="reversed"), xaxis=dict(title="step (P = prefill)", type="category"))
    return fig
