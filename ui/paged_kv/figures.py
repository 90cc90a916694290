"""The Paged KV cache page's figures: pure Plotly builders over a replay's plain records, and their CSV tables.

``make_block_grid`` (the physical pool, coloured by owner, shared blocks marked with their reference
count), ``make_block_tables`` (each sequence's logical -> physical table, coloured by reference count),
``make_memory_timeline`` (bytes over the run: paged blocks in use against a slot cache's reservation)
and ``make_memory_at_step`` (reserved against held at one step: the fragmentation of each). Each
``*_table`` is the same numbers as named columns, for the CSV download.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from inference.api import PagingStep, PagingTrace
from ui.common.chart import Chart
from ui.common.traces import discrete_scale

FREE, CACHED = -2, -1  # grid values of a free block, and of a free block that still holds a cached prefix
FREE_COLOUR, CACHED_COLOUR = "#f1f1f1", "#c9c9c9"
OWNER_COLOURS = (
    "#4c78a8",
    "#f58518",
    "#54a24b",
    "#e45756",
    "#72b7b2",
    "#b279a2",
    "#ff9da6",
    "#9d755d",
    "#eeca3b",
    "#bab0ac",
)
SERIES_COLOURS = ("#f58518", "#4c78a8", "#7f7f7f")  # slot reserved, paged in use, positions held
LEGEND_BELOW = dict(orientation="h", y=-0.22, yanchor="top", x=0)


def _memory_layout(fig: go.Figure, unit: str, **layout: Any) -> go.Figure:
    """The frame both memory charts share (``layout`` adds the title and the rest): bytes in ``unit`` from zero,
    the legend below the plot."""
    fig.update_layout(
        **layout,
        yaxis=dict(title=unit, rangemode="tozero"),
        height=380,
        margin=dict(l=10, r=10, t=50, b=90),
        legend=LEGEND_BELOW,
    )
    return fig


GRID_COLUMNS = 16
CELL_PX = 34


def owner_colour(sequence: int) -> str:
    return OWNER_COLOURS[sequence % len(OWNER_COLOURS)]


def holders(step: PagingStep) -> dict[int, list[int]]:
    """Physical block -> the sequences whose tables hold it, in order."""
    held: dict[int, list[int]] = {}
    for sequence, table in enumerate(step.tables):
        for block in table:
            if block >= 0:
                held.setdefault(int(block), []).append(sequence)
    return held


def _grid_values(step: PagingStep) -> np.ndarray:
    """(N,) the owner of each block, CACHED or FREE."""
    values = np.where(step.ref_counts > 0, step.owners, np.where(step.cached, CACHED, FREE))  # (N,)
    return values.astype(np.int64)


def make_block_grid(
    step: PagingStep, labels: tuple[str, ...], block_size: int, columns: int = GRID_COLUMNS
) -> go.Figure:
    """The physical pool after ``step``: one cell per block, coloured by the lowest sequence holding it (grey:
    free; darker grey: free but still keyed by a cached prefix), ×n on a block ``n`` sequences share."""
    n_blocks = len(step.ref_counts)
    columns = min(columns, n_blocks)
    rows = -(-n_blocks // columns)
    values = _grid_values(step)
    colours = [FREE_COLOUR, CACHED_COLOUR] + [owner_colour(s) for s in range(len(labels))]
    z = np.full(rows * columns, np.nan)  # (rows * columns,) cells past the last block stay empty
    z[:n_blocks] = values + 2  # category index: 0 free, 1 cached, 2 + owner
    text = [""] * (rows * columns)
    hover = [""] * (rows * columns)
    held = holders(step)
    for block in range(n_blocks):
        count = int(step.ref_counts[block])
        if count:
            who = ", ".join(labels[s] for s in held.get(block, []))
            text[block] = f"{block}" + (f" ×{count}" if count > 1 else "")
            hover[block] = (
                f"block {block}<br>held by {who}<br>reference count {count}<br>"
                f"{int(step.filled[block])} of {block_size} positions written"
            )
        else:
            text[block] = f"{block}"
            hover[block] = f"block {block}<br>free" + (" (still holds a cached prefix)" if step.cached[block] else "")
    fig = go.Figure(
        go.Heatmap(
            z=z.reshape(rows, columns),  # (rows, columns)
            text=np.array(text, dtype=object).reshape(rows, columns),
            texttemplate="%{text}",
            customdata=np.array(hover, dtype=object).reshape(rows, columns),
            hovertemplate="%{customdata}<extra></extra>",
            colorscale=discrete_scale(colours),
            zmin=-0.5,
            zmax=len(colours) - 0.5,
            showscale=False,
            xgap=2,
            ygap=2,
        )
    )
    outlined = dict(line=dict(width=1, color="#999"))
    legend = [(label, owner_colour(sequence), {}) for sequence, label in enumerate(labels)]  # one entry per owner
    legend += [("free", FREE_COLOUR, outlined), ("free, prefix cached", CACHED_COLOUR, outlined)]
    for name, colour, edge in legend:
        marker = dict(size=12, color=colour, symbol="square", **edge)
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=name, marker=marker))
    fig.update_layout(
        title=f"The pool after step {step.index}: {n_blocks} physical blocks of {block_size} positions",
        height=120 + rows * CELL_PX,
        margin=dict(l=10, r=10, t=50, b=10),
        xaxis=dict(visible=False),
        yaxis=dict(visible=False, autorange="reversed"),
        legend=dict(orientation="h", y=-0.02, yanchor="top"),
        plot_bgcolor="white",
    )
    return fig


def grid_table(step: PagingStep, labels: tuple[str, ...]) -> pd.DataFrame:
    held = holders(step)
    return pd.DataFrame(
        {
            "block": range(len(step.ref_counts)),
            "reference count": step.ref_counts,
            "held by": [" / ".join(labels[s] for s in held.get(b, [])) for b in range(len(step.ref_counts))],
            "positions written": step.filled,
            "free, prefix cached": step.cached,
        }
    )


def make_block_tables(step: PagingStep, labels: tuple[str, ...], status: list[str]) -> go.Figure:
    """Each sequence's block table after ``step``: row = sequence, column = logical block, text = the physical
    block it maps to, colour = that block's reference count (shared blocks darker). ``status`` per sequence."""
    width = max([len(table) for table in step.tables] + [1])
    counts = np.full((len(labels), width), np.nan)  # (S, W)
    text = np.full((len(labels), width), "", dtype=object)  # (S, W)
    for sequence, table in enumerate(step.tables):
        for logical, block in enumerate(table):
            if block >= 0:
                counts[sequence, logical] = step.ref_counts[block]
                text[sequence, logical] = str(int(block))
    top = max(2.0, float(np.nanmax(counts)) if np.isfinite(counts).any() else 2.0)
    rows = [f"{label} ({state})" for label, state in zip(labels, status)]
    fig = go.Figure(
        go.Heatmap(
            z=counts,
            x=[f"L{i}" for i in range(width)],
            y=rows,
            text=text,
            texttemplate="%{text}",
            hovertemplate="%{y}<br>logical block %{x} → physical %{text}<br>reference count %{z}<extra></extra>",
            colorscale="Blues",
            zmin=0,
            zmax=top,
            xgap=2,
            ygap=2,
            colorbar=dict(title="shared by", thickness=12, dtick=1),
        )
    )
    fig.update_layout(
        title="Block tables: logical block → physical block",
        height=110 + len(labels) * 30,
        margin=dict(l=10, r=10, t=50, b=30),
        yaxis=dict(autorange="reversed"),
        plot_bgcolor="white",
    )
    return fig


def tables_table(step: PagingStep, labels: tuple[str, ...]) -> pd.DataFrame:
    rows = [
        {
            "sequence": labels[s],
            "logical block": logical,
            "physical block": int(block),
            "reference count": int(step.ref_counts[block]),
        }
        for s, table in enumerate(step.tables)
        for logical, block in enumerate(table)
        if block >= 0
    ]
    return pd.DataFrame(rows, columns=["sequence", "logical block", "physical block", "reference count"])


def byte_unit(largest: float) -> tuple[str, float]:
    """("MiB", 2**20) or ("KiB", 1024): the unit that keeps ``largest`` readable."""
    return ("MiB", 2**20) if largest >= 2**20 else ("KiB", 1024.0)


def make_memory_timeline(trace: PagingTrace, current: int) -> go.Figure:
    """K/V bytes after every step: the blocks in use, the slot cache's reservation for the same resident
    sequences, and the positions held (once per sequence: what slots store); a line marks step ``current``."""
    steps = [step.index for step in trace.steps]
    series = {
        "slot cache: reserved": [s.slot_bytes for s in trace.steps],
        "paged: blocks in use": [s.paged_bytes for s in trace.steps],
        "positions held, each sequence's own": [s.used_bytes for s in trace.steps],
    }
    unit, scale = byte_unit(max(max(v) for v in series.values()))
    fig = go.Figure()
    for (name, values), colour, dash in zip(series.items(), SERIES_COLOURS, ("solid", "solid", "dot")):
        fig.add_trace(
            go.Scatter(
                x=steps,
                y=[v / scale for v in values],
                name=name,
                mode="lines+markers",
                line=dict(color=colour, dash=dash),
                marker=dict(size=4),
            )
        )
    fig.add_vline(x=current, line_width=1, line_color="#888")
    return _memory_layout(fig, unit, title="KV cache memory over the run", xaxis_title="scheduler step")


def memory_table(trace: PagingTrace) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "step": [s.index for s in trace.steps],
            "phase": [s.phase for s in trace.steps],
            "resident sequences": [s.resident for s in trace.steps],
            "slot reserved bytes": [s.slot_bytes for s in trace.steps],
            "paged bytes in use": [s.paged_bytes for s in trace.steps],
            "held bytes, per sequence": [s.used_bytes for s in trace.steps],
            "held bytes, shared blocks once": [s.distinct_bytes for s in trace.steps],
        }
    )


def make_memory_at_step(step: PagingStep) -> go.Figure:
    """Reserved against held at one step, as stacked bars: what each layout holds K/V in, and what it reserves
    for nothing (slots: the unwritten rest of each slot; paged: the unwritten rest of each last block)."""
    unit, scale = byte_unit(max(step.slot_bytes, step.paged_bytes, 1))
    held = [step.used_bytes / scale, step.distinct_bytes / scale]
    empty = [(step.slot_bytes - step.used_bytes) / scale, (step.paged_bytes - step.distinct_bytes) / scale]
    names = ["slot cache", "paged blocks"]
    fig = go.Figure(
        [
            go.Bar(x=names, y=held, name="holding K/V", marker_color="#4c78a8"),
            go.Bar(x=names, y=empty, name="reserved, not written (fragmentation)", marker_color="#e45756"),
        ]
    )
    return _memory_layout(fig, unit, barmode="stack", title=f"At step {step.index}: reserved vs written")


def memory_at_step_table(step: PagingStep) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "layout": ["slot cache", "paged blocks"],
            "reserved bytes": [step.slot_bytes, step.paged_bytes],
            "written bytes": [step.used_bytes, step.distinct_bytes],
            "fragmentation bytes": [step.slot_bytes - step.used_bytes, step.paged_bytes - step.distinct_bytes],
        }
    )


block_grid = Chart(make_block_grid, grid_table)
block_tables = Chart(make_block_tables, tables_table)
memory_timeline = Chart(make_memory_timeline, memory_table)
memory_at_step = Chart(make_memory_at_step, memory_at_step_table)
