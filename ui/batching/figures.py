"""Pure figure builders for the Batching page.

Plain lists and arrays in, ``go.Figure`` out: the left-padded batch as a grid, one
row's attention mask, the position ids, the static-vs-continuous timeline of which
request occupies which batch row or cache slot at each step, each request's latency,
the KV cache reserved against used, and throughput against batch size. Requests are
named by their row in the page's table (``labels``), so a left-out row keeps the
others' numbers. Each figure has a ``*_table`` beside it for its CSV.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ui.common.chart import Chart
from ui.common.conventions import fit_cells
from ui.common.subplots import subplots
from ui.common.token_text import visible
from ui.common.traces import discrete_scale

PAD, IDLE, EMPTY, PAUSED = -1, -2, -3, -4  # timeline cell codes besides request numbers
# PAUSED: a request that holds its slot but is not in this step's forward (a prefill of others is running)
REQUEST_COLORS = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d"]


def _names(n: int, labels: Sequence[int] | None) -> list[int]:
    return list(labels) if labels is not None else list(range(n))


def _request_rows_layout(fig: go.Figure, title: str, n_rows: int, column_title: str) -> go.Figure:
    """The frame of the two requests-by-columns grids (the padded batch, its position ids): one row per request,
    the first on top, one tick per column."""
    fig.update_layout(
        title=title,
        height=80 + 36 * n_rows,
        margin=dict(l=10, r=10, t=50, b=30),
        yaxis=dict(autorange="reversed"),
        xaxis=dict(title=column_title, dtick=1),
    )
    return fig


def make_padded_batch(
    rows: Sequence[Sequence[str | None]], title: str = "The left-padded batch", labels: Sequence[int] | None = None
) -> go.Figure:
    """Requests (rows) x columns: real tokens coloured by request, padding (None) grey."""
    n_rows, width = len(rows), max((len(r) for r in rows), default=0)
    names = _names(n_rows, labels)
    z = np.array([[0 if cell is None else 1 + (i % len(REQUEST_COLORS)) for cell in row] for i, row in enumerate(rows)])
    size, drawn = fit_cells(["pad"] + [visible(cell) for row in rows for cell in row if cell is not None], width, 12)
    text = [["pad" if cell is None else drawn[visible(cell)] for cell in row] for row in rows]
    hover = [["pad" if cell is None else visible(cell) for cell in row] for row in rows]
    colors = ["#e9ecef"] + REQUEST_COLORS
    fig = go.Figure(
        go.Heatmap(
            z=z,
            text=text,
            texttemplate="%{text}",
            textfont=dict(size=size),
            x=list(range(width)),
            customdata=hover,
            y=[f"request {names[i]}" for i in range(n_rows)],
            zmin=-0.5,
            zmax=len(colors) - 0.5,
            colorscale=discrete_scale(colors),
            showscale=False,
            xgap=2,
            ygap=2,
            hovertemplate="%{y}, column %{x}: %{customdata}<extra></extra>",
        )
    )
    return _request_rows_layout(fig, title, n_rows, "column of the batch tensor")


def make_mask_heatmap(mask: np.ndarray, labels: Sequence[str | None], request: int) -> go.Figure:
    """One request's attention mask (queries x keys over the padded columns): 1 = may attend."""
    ticks = [f"{i}: {'pad' if t is None else visible(t)}" for i, t in enumerate(labels)]
    fig = go.Figure(
        go.Heatmap(
            z=mask.astype(int),
            x=ticks,
            y=ticks,
            zmin=0,
            zmax=1,
            xgap=1,
            ygap=1,
            colorscale=[[0, "#f1f3f5"], [1, "#1f77b4"]],
            showscale=False,
            hovertemplate="query %{y}<br>key %{x}<br>%{z}<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"Request {request}: attention mask (blue = may attend)",
        height=max(320, 120 + 22 * len(labels)),
        margin=dict(l=10, r=10, t=50, b=10),
        yaxis=dict(autorange="reversed", title="query"),
        xaxis=dict(title="key", tickangle=-45),
    )
    return fig


def make_positions_heatmap(positions: np.ndarray, real: np.ndarray, labels: Sequence[int] | None = None) -> go.Figure:
    """Position ids (requests x columns): cumsum(mask) - 1, so every prompt starts at position 0."""
    names = _names(len(positions), labels)
    text = [[str(p) if r else f"pad→{p}" for p, r in zip(prow, rrow)] for prow, rrow in zip(positions, real)]
    fig = go.Figure(
        go.Heatmap(
            z=np.where(real, positions, np.nan),
            text=text,
            texttemplate="%{text}",
            textfont=dict(size=12),
            colorscale="Blues",
            showscale=False,
            xgap=2,
            ygap=2,
            y=[f"request {names[i]}" for i in range(len(positions))],
            hovertemplate="%{y}, column %{x}: position %{text}<extra></extra>",
        )
    )
    return _request_rows_layout(
        fig, "Position ids: each row counts its own real tokens from 0", len(positions), "column"
    )


def make_batch_timeline(
    grid: np.ndarray,
    phases: Sequence[str],
    title: str,
    slot_name: str,
    labels: Sequence[int] | None = None,
    n_columns: int | None = None,
) -> go.Figure:
    """Rows (batch rows or cache slots) x steps: which request is there (its colour and number),
    ``IDLE`` = a finished request still holding its row, ``PAUSED`` = a request waiting out another's
    prefill in its slot, ``EMPTY`` = a free slot. ``n_columns``: the step axis's length, shared with the other
    mode's timeline drawn above or below this one (so a run that took more steps is drawn longer)."""
    n_slots, n_steps = grid.shape
    names = _names(int(grid.max(initial=-1)) + 1, labels)
    colors = ["#ffffff", "#adb5bd", "#fff3bf"] + REQUEST_COLORS  # EMPTY, IDLE, PAUSED, then requests 0..7
    codes = np.where(
        grid == EMPTY, 0, np.where(grid == IDLE, 1, np.where(grid == PAUSED, 2, 3 + grid % len(REQUEST_COLORS)))
    )
    text = [
        ["" if c == EMPTY else ("idle" if c == IDLE else ("wait" if c == PAUSED else str(names[int(c)]))) for c in row]
        for row in grid
    ]
    fig = go.Figure(
        go.Heatmap(
            z=codes,
            text=text,
            texttemplate="%{text}",
            textfont=dict(size=12),
            zmin=-0.5,
            zmax=len(colors) - 0.5,
            colorscale=discrete_scale(colors),
            showscale=False,
            xgap=1,
            ygap=2,
            x=[f"{i}{'P' if p == 'prefill' else ''}" for i, p in enumerate(phases)],
            y=[f"{slot_name} {s}" for s in range(n_slots)],
            hovertemplate="step %{x}, %{y}: request %{text}<extra></extra>",
        )
    )
    xaxis = dict(title="step (P = prefill)", type="category")
    if n_columns is not None:
        xaxis["range"] = [-0.5, max(n_columns, n_steps) - 0.5]
    fig.update_layout(
        title=title,
        height=90 + 34 * n_slots,
        margin=dict(l=10, r=10, t=50, b=40),
        yaxis=dict(autorange="reversed"),
        xaxis=xaxis,
    )
    return fig


def make_request_latency(
    labels: Sequence[int],
    static_ttft: Sequence[float],
    continuous_ttft: Sequence[float],
    static_tpot: Sequence[float | None],
    continuous_tpot: Sequence[float | None],
) -> go.Figure:
    """Per request, both modes side by side: time to first token and time per output token (bars from 0)."""
    names = [f"request {r}" for r in labels]
    fig = subplots(
        rows=1,
        cols=2,
        subplot_titles=["time to first token (ms)", "time per output token (ms)"],
        horizontal_spacing=0.1,
    )
    for col, (static, continuous) in enumerate(((static_ttft, continuous_ttft), (static_tpot, continuous_tpot)), 1):
        for mode, values, color in (("static", static, "#6c757d"), ("continuous", continuous, "#4c78a8")):
            fig.add_trace(
                go.Bar(
                    x=names,
                    y=[np.nan if v is None else v for v in values],
                    name=mode,
                    marker_color=color,
                    showlegend=col == 1,
                    legendgroup=mode,
                    hovertemplate="%{x}: %{y:.0f} ms<extra>" + mode + "</extra>",
                ),
                row=1,
                col=col,
            )
    fig.update_yaxes(rangemode="tozero")
    fig.update_layout(
        title="Each request's latency, measured in both runs",
        barmode="group",
        height=370,
        margin=dict(l=10, r=10, t=80, b=80),
        legend=dict(orientation="h", y=-0.18, x=0),
    )
    return fig


def make_memory_chart(
    static_reserved: Sequence[int],
    static_used: Sequence[int],
    continuous_reserved: Sequence[int],
    continuous_used: Sequence[int],
) -> go.Figure:
    """KV cache reserved for the rows/slots in use against the part holding real tokens, step by step (MiB)."""
    fig = subplots(
        rows=1, cols=2, subplot_titles=["static batch", "continuous slots"], shared_yaxes=True, horizontal_spacing=0.05
    )
    for col, (reserved, used) in enumerate(((static_reserved, static_used), (continuous_reserved, continuous_used)), 1):
        steps = list(range(len(reserved)))
        for values, name, color, group in (
            (reserved, "reserved", "#adb5bd", "reserved"),
            (used, "used by real tokens", "#4c78a8", "used"),
        ):
            fig.add_trace(
                go.Scatter(
                    x=steps,
                    y=[b / 2**20 for b in values],
                    name=name,
                    mode="lines",
                    line=dict(color=color, shape="hv"),
                    fill="tozeroy",
                    showlegend=col == 1,
                    legendgroup=group,
                ),
                row=1,
                col=col,
            )
        fig.update_xaxes(title_text="step", row=1, col=col)
    fig.update_yaxes(title_text="KV cache (MiB)", rangemode="tozero", row=1, col=1)
    fig.update_layout(
        title="KV cache: reserved for the rows/slots in use vs holding real tokens",
        height=360,
        margin=dict(l=10, r=10, t=80, b=80),
        legend=dict(orientation="h", y=-0.3, x=0),
    )
    return fig


def make_throughput_curve(
    batch_sizes: Sequence[int], tokens_per_second: Sequence[float], step_ms: Sequence[float]
) -> go.Figure:
    """Measured decode throughput (tokens/s, from 0) and step time against the batch size."""
    fig = subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(
        go.Scatter(
            x=list(batch_sizes),
            y=list(tokens_per_second),
            mode="lines+markers",
            name="tokens per second",
            line=dict(color="#4c78a8"),
        ),
        secondary_y=False,
    )
    fig.add_trace(
        go.Scatter(
            x=list(batch_sizes),
            y=list(step_ms),
            mode="lines+markers",
            name="ms per decode step",
            line=dict(color="#e45756", dash="dot"),
        ),
        secondary_y=True,
    )
    fig.update_xaxes(title_text="requests in the batch", tickvals=list(batch_sizes))
    fig.update_yaxes(title_text="tokens per second", rangemode="tozero", secondary_y=False)
    fig.update_yaxes(
        title_text="ms per decode step", rangemode="tozero", showgrid=False, tickformat=".0f", secondary_y=True
    )
    fig.update_layout(
        title="Decode throughput against batch size (measured now)",
        height=340,
        margin=dict(l=10, r=10, t=60, b=40),
        legend=dict(orientation="h", y=-0.25),
    )
    return fig


# -- the tables behind the charts' CSVs ---------------------------------------------------------
def padded_table(rows: Sequence[Sequence[str | None]], labels: Sequence[int] | None = None) -> pd.DataFrame:
    names = _names(len(rows), labels)
    return pd.DataFrame(
        [
            {"request": names[i], "column": j, "token": "" if cell is None else visible(cell), "padding": cell is None}
            for i, row in enumerate(rows)
            for j, cell in enumerate(row)
        ]
    )


padded_batch = Chart(make_padded_batch, padded_table)


def mask_table(mask: np.ndarray, labels: Sequence[str | None], request: int) -> pd.DataFrame:
    label = ["pad" if t is None else visible(t) for t in labels]
    n = mask.shape[0]
    return pd.DataFrame(
        {
            "request": request,
            "query_column": np.repeat(np.arange(n), n),
            "query_token": np.repeat(label, n),
            "key_column": np.tile(np.arange(n), n),
            "key_token": np.tile(label, n),
            "may_attend": mask.reshape(-1).astype(bool),
        }
    )


mask_heatmap = Chart(make_mask_heatmap, mask_table)


def positions_table(positions: np.ndarray, real: np.ndarray, labels: Sequence[int] | None = None) -> pd.DataFrame:
    names = _names(len(positions), labels)
    return pd.DataFrame(
        [
            {"request": names[i], "column": j, "position": int(p), "padding": not bool(r)}
            for i, (prow, rrow) in enumerate(zip(positions, real))
            for j, (p, r) in enumerate(zip(prow, rrow))
        ]
    )


positions_heatmap = Chart(make_positions_heatmap, positions_table)


def timeline_table(
    grid: np.ndarray,
    phases: Sequence[str],
    step_ms: Sequence[float],
    slot_name: str,
    labels: Sequence[int] | None = None,
) -> pd.DataFrame:
    names = _names(int(grid.max(initial=-1)) + 1, labels)
    rows = []
    for step, phase in enumerate(phases):
        for slot in range(grid.shape[0]):
            code = int(grid[slot, step])
            state = {
                EMPTY: "free",
                IDLE: "idle (finished, still computed)",
                PAUSED: "paused (holds its slot while others prefill)",
            }.get(code, "running")
            rows.append(
                {
                    "step": step,
                    "phase": phase,
                    "step_ms": step_ms[step],
                    slot_name: slot,
                    "request": names[code] if code >= 0 else None,
                    "state": state,
                }
            )
    return pd.DataFrame(rows)


batch_timeline = Chart(make_batch_timeline, timeline_table)  # the table also takes step_ms= (by name)


def latency_table(
    labels: Sequence[int],
    static_ttft: Sequence[float],
    continuous_ttft: Sequence[float],
    static_tpot: Sequence[float | None],
    continuous_tpot: Sequence[float | None],
) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "request": list(labels),
            "static_ttft_ms": list(static_ttft),
            "continuous_ttft_ms": list(continuous_ttft),
            "static_tpot_ms": list(static_tpot),
            "continuous_tpot_ms": list(continuous_tpot),
        }
    )


request_latency = Chart(make_request_latency, latency_table)


def memory_table(
    static_reserved: Sequence[int],
    static_used: Sequence[int],
    continuous_reserved: Sequence[int],
    continuous_used: Sequence[int],
) -> pd.DataFrame:
    rows = [
        {"mode": mode, "step": i, "reserved_bytes": r, "used_bytes": u}
        for mode, reserved, used in (
            ("static", static_reserved, static_used),
            ("continuous", continuous_reserved, continuous_used),
        )
        for i, (r, u) in enumerate(zip(reserved, used))
    ]
    return pd.DataFrame(rows)


memory_chart = Chart(make_memory_chart, memory_table)


def curve_table(
    batch_sizes: Sequence[int], tokens_per_second: Sequence[float], step_ms: Sequence[float]
) -> pd.DataFrame:
    return pd.DataFrame(
        {"batch_size": list(batch_sizes), "decode_step_ms": list(step_ms), "tokens_per_second": list(tokens_per_second)}
    )


throughput_curve = Chart(make_throughput_curve, curve_table)
