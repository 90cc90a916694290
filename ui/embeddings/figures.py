"""Figures for the Embeddings page: embedding rows, one vector, neighbours, PCA, position encodings.

Each ``make_*`` builder has a ``*_table`` beside it: the same numbers with named columns,
for the chart's CSV download.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ui.common import format as fmt
from ui.common.chart import Chart, cell_table
from ui.common.conventions import flat_note, spread_out
from ui.common.subplots import subplots
from ui.common.token_text import visible

# The PCA map's label placement assumes a plot area at least this large (px) and labels this tall:
# the page is wider than this at 1280 px and up, and presenter mode's larger text stays within it.
MAP_PLOT_PX = (600, 380)
MAP_LABEL_PX = 17
_PLACES = (
    "top center",
    "bottom center",
    "middle right",
    "middle left",
    "top right",
    "top left",
    "bottom right",
    "bottom left",
)


def make_embedding_heatmap(rows: np.ndarray, pieces: list[str], matrix_shape: tuple[int, int]) -> go.Figure:
    """Tokens (rows) × model dimensions (columns) of the real embedding values."""
    labels = [f"{i}: {visible(p)}" for i, p in enumerate(pieces)]
    limit = float(np.abs(rows).max()) if rows.size else 1.0
    fig = go.Figure(
        go.Heatmap(
            z=rows,
            y=labels,
            x=list(range(rows.shape[1])),
            colorscale="RdBu",
            zmid=0,
            zmin=-limit,
            zmax=limit,
            colorbar=dict(title="value"),
            hovertemplate="token %{y}<br>dim %{x}<br>value %{z:.4f}<extra></extra>",
        )
    )
    vocab, width = matrix_shape
    fig.update_layout(
        title=f"{fmt.count(rows.shape[0], 'row')} of the {vocab:,} × {width} embedding matrix",
        xaxis_title="dimension",
        yaxis=dict(autorange="reversed", type="category"),
        height=max(260, 60 + 22 * rows.shape[0]),
        margin=dict(l=10, r=10, t=50, b=40),
    )
    return fig


def make_vector_chart(vector: np.ndarray, label: str) -> go.Figure:
    """One token's embedding: value per dimension."""
    fig = go.Figure(
        go.Bar(
            x=list(range(len(vector))),
            y=vector,
            marker_color="#4c78a8",
            hovertemplate="dim %{x}<br>%{y:.4f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"The embedding of {visible(label)!r}: {len(vector)} numbers",
        xaxis_title="dimension",
        yaxis_title="value",
        height=280,
        margin=dict(l=40, r=10, t=50, b=40),
        bargap=0,
    )
    return fig


def make_neighbour_chart(neighbours: list[tuple[int, str, float]], label: str) -> go.Figure:
    """Horizontal bars: cosine similarity of the nearest vocabulary rows, closest on top."""
    names = [f"{visible(piece)} ({token_id})" for token_id, piece, _ in neighbours]
    fig = go.Figure(
        go.Bar(
            x=[c for _, _, c in neighbours],
            y=names,
            orientation="h",
            marker_color="#59a14f",
            hovertemplate="%{y}<br>cosine %{x:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"Nearest rows to {visible(label)!r} by cosine similarity",
        xaxis_title="cosine similarity",
        yaxis=dict(autorange="reversed", type="category"),
        height=80 + 26 * len(neighbours),
        margin=dict(l=10, r=10, t=50, b=40),
    )
    return fig


def label_places(
    points: np.ndarray,
    labels: Sequence[str],
    ranges: tuple[tuple[float, float], tuple[float, float]],
    plot_px: tuple[int, int] = MAP_PLOT_PX,
    label_px: int = MAP_LABEL_PX,
) -> list[str | None]:
    """For each point, in order (earlier points first), a Plotly ``textposition`` whose label box overlaps no
    label placed before it and no marker, or None: that label is left to the hover.

    Boxes are estimated in pixels from the axis ranges (a character is ~0.6 of the font size wide).
    """
    (x0, x1), (y0, y1) = ranges
    sx, sy = plot_px[0] / max(x1 - x0, 1e-12), plot_px[1] / max(y1 - y0, 1e-12)
    centres = [((x - x0) * sx, (y - y0) * sy) for x, y in np.asarray(points, dtype=float)]
    marker = 6.0  # px half-size of a marker
    boxes: list[tuple[float, float, float, float]] = [
        (cx - marker, cy - marker, cx + marker, cy + marker) for cx, cy in centres
    ]
    placed: list[str | None] = []
    for (cx, cy), label in zip(centres, labels):
        width, height = 0.6 * label_px * max(len(label), 1), 1.2 * label_px
        choice = None
        for place in _PLACES:
            vertical, horizontal = place.split()
            left = {"center": cx - width / 2, "right": cx + marker, "left": cx - marker - width}[horizontal]
            bottom = {"middle": cy - height / 2, "top": cy + marker, "bottom": cy - marker - height}[vertical]
            box = (left, bottom, left + width, bottom + height)
            inside = 0 <= box[0] and box[2] <= plot_px[0] and 0 <= box[1] and box[3] <= plot_px[1]
            own = (cx - marker, cy - marker, cx + marker, cy + marker)
            if inside and not any(_overlap(box, other) for other in boxes if other != own):
                choice = place
                boxes.append(box)
                break
        placed.append(choice)
    return placed


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def map_ranges(points: np.ndarray) -> tuple[tuple[float, float], tuple[float, float]]:
    """Axis ranges of the PCA map: the points plus a margin for labels at the edges."""
    points = np.asarray(points, dtype=float).reshape(-1, 2)
    out = []
    for axis in (0, 1):
        low, high = (float(points[:, axis].min()), float(points[:, axis].max())) if len(points) else (-1.0, 1.0)
        pad = 0.18 * max(high - low, 1e-6)
        out.append((low - pad, high + pad))
    return out[0], out[1]


def make_projection_scatter(
    points: np.ndarray, labels: list[str], groups: list[str], explained: tuple[float, float]
) -> go.Figure:
    """2-D PCA scatter, one trace per group: a label beside every point whose label does not overlap
    another (prompt tokens placed first), the rest on hover only."""
    ranges = map_ranges(points)
    order = [i for g in ("prompt", "word set") for i, group in enumerate(groups) if group == g]
    places_in_order = label_places(np.asarray(points)[order], [visible(labels[i]) for i in order], ranges)
    places = dict(zip(order, places_in_order))
    fig = go.Figure()
    for group, colour in (("prompt", "#e15759"), ("word set", "#4c78a8")):
        idx = [i for i, g in enumerate(groups) if g == group]
        if idx:
            fig.add_trace(
                go.Scatter(
                    x=points[idx, 0],
                    y=points[idx, 1],
                    mode="markers+text",
                    name=group,
                    text=[visible(labels[i]) if places[i] else "" for i in idx],
                    textposition=[places[i] or "top center" for i in idx],
                    marker=dict(size=10, color=colour),
                    customdata=[visible(labels[i]) for i in idx],
                    hovertemplate="%{customdata}<br>(%{x:.3f}, %{y:.3f})<extra></extra>",
                )
            )
    (first, second), _ = fmt.parts_pct(explained)  # the caption's total is their sum
    fig.update_layout(
        title="Embedding rows projected to 2-D (PCA of the rows shown)",
        xaxis=dict(title=f"PC1 ({first} of the variance)", range=list(ranges[0])),
        yaxis=dict(title=f"PC2 ({second})", range=list(ranges[1])),
        height=480,
        margin=dict(l=40, r=10, t=50, b=40),
    )
    return fig


def unlabelled_points(fig: go.Figure) -> int:
    """How many points of a PCA map have their label on hover only."""
    return sum(1 for trace in fig.data for text in trace.text if text == "")


def projection_table(points: np.ndarray, labels: list[str], groups: list[str]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "label": [visible(l) for l in labels],
            "group": list(groups),
            "pc1": np.asarray(points)[:, 0],
            "pc2": np.asarray(points)[:, 1],
        }
    )


projection_scatter = Chart(make_projection_scatter, projection_table)


LABEL_GAP_RAD = 0.45  # labels of arrows closer than this (radians) on a circle would overlap: the later one goes


def make_rope_rotation(angles: np.ndarray, pairs: list[int], wavelengths: np.ndarray) -> go.Figure:
    """For a few frequency pairs, where the unit vector (1, 0) ends up at each position: arrows on a circle."""
    fig = subplots(
        rows=1,
        cols=len(pairs),
        subplot_titles=[f"pair {p}: a turn every<br>{wavelengths[p]:,.0f} positions" for p in pairs],
    )
    circle = np.linspace(0, 2 * np.pi, 100)
    for col, pair in enumerate(pairs, start=1):
        labelled = spread_out(angles[:, pair].tolist(), LABEL_GAP_RAD, period=2 * np.pi)  # no pile of labels
        fig.add_trace(
            go.Scatter(
                x=np.cos(circle),
                y=np.sin(circle),
                mode="lines",
                line=dict(color="#ddd"),
                showlegend=False,
                hoverinfo="skip",
            ),
            row=1,
            col=col,
        )
        for pos in range(angles.shape[0]):
            x, y = float(np.cos(angles[pos, pair])), float(np.sin(angles[pos, pair]))
            shade = f"rgba(76,120,168,{0.25 + 0.75 * (1 - pos / max(angles.shape[0] - 1, 1))})"
            fig.add_trace(
                go.Scatter(
                    x=[0, x],
                    y=[0, y],
                    mode="lines+markers+text",
                    text=["", str(pos) if labelled[pos] else ""],
                    textposition="top center",
                    line=dict(color=shade),
                    marker=dict(size=[0, 6]),
                    showlegend=False,
                    hovertemplate=f"position {pos}<br>angle {angles[pos, pair]:.3f} rad<extra></extra>",
                ),
                row=1,
                col=col,
            )
        fig.update_xaxes(
            range=[-1.25, 1.25], scaleanchor=f"y{col if col > 1 else ''}", showticklabels=False, row=1, col=col
        )
        fig.update_yaxes(range=[-1.25, 1.25], showticklabels=False, row=1, col=col)
    fig.update_layout(
        title="RoPE: the same query/key pair rotated by its position (labels = position; where "
        "arrows crowd, the hover has the rest)",
        height=400,
        margin=dict(l=10, r=10, t=100, b=10),
    )
    return fig


def make_position_heatmap(values: np.ndarray, title: str, x_title: str, colorbar: str) -> go.Figure:
    """Positions (rows) × columns heatmap, for RoPE angles or learned position rows."""
    fig = go.Figure(
        go.Heatmap(
            z=values,
            colorscale="RdBu",
            zmid=0,
            colorbar=dict(title=colorbar),
            hovertemplate="position %{y}<br>" + x_title + " %{x}<br>%{z:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=title,
        xaxis_title=x_title,
        yaxis_title="position",
        yaxis=dict(autorange="reversed"),
        height=380,
        margin=dict(l=40, r=10, t=50, b=40),
    )
    return fig


def make_distance_scores(
    distances: np.ndarray, scores: np.ndarray, actual: int, recorded: float, query_label: str, key_label: str
) -> go.Figure:
    """Score of one real query/key pair as a function of how far apart RoPE places them. A line that barely moves
    (``conventions.flat_note``) says so on the chart: its axis is zoomed in."""
    fig = go.Figure(
        go.Scatter(
            x=distances,
            y=scores,
            mode="lines+markers",
            name="same vectors, other distance",
            marker=dict(size=4),
            hovertemplate="distance %{x}<br>score %{y:.3f}<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[actual],
            y=[recorded],
            mode="markers",
            name="recorded in the forward pass",
            marker=dict(size=13, color="#e15759", symbol="diamond"),
            hovertemplate="actual distance %{x}<br>score %{y:.4f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"q({visible(query_label)}) · k({visible(key_label)}) / √d if the key sat d positions before the query",
        xaxis_title="distance d (positions)",
        yaxis_title="scaled score",
        height=340,
        margin=dict(l=40, r=10, t=50, b=40),
        legend=dict(orientation="h", y=-0.25),
    )
    note = flat_note(list(scores) + [recorded], "the score")
    if note:
        fig.add_annotation(
            x=0.5,
            y=1.0,
            xref="paper",
            yref="paper",
            yanchor="bottom",
            showarrow=False,
            text=note,
            font={"color": "#b35900"},
        )
        fig.update_layout(margin=dict(l=40, r=10, t=80, b=40))
    return fig


# -- the tables behind the charts' CSVs ---------------------------------------------------------
def embedding_rows_table(rows: np.ndarray, pieces: list[str]) -> pd.DataFrame:
    """One row per (position, dimension): the embedding value the heatmap colours."""
    return cell_table(rows, "position", "dimension", "value", row_labels=("token", [visible(p) for p in pieces]))


embedding_heatmap = Chart(make_embedding_heatmap, embedding_rows_table)


def vector_table(vector: np.ndarray, label: str) -> pd.DataFrame:
    return pd.DataFrame({"token": visible(label), "dimension": np.arange(len(vector)), "value": vector})


vector_chart = Chart(make_vector_chart, vector_table)


def neighbour_table(neighbours: list[tuple[int, str, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "rank": range(1, len(neighbours) + 1),
            "token_id": [i for i, _, _ in neighbours],
            "token": [visible(p) for _, p, _ in neighbours],
            "cosine_similarity": [c for _, _, c in neighbours],
        }
    )


neighbour_chart = Chart(make_neighbour_chart, neighbour_table)


def rope_rotation_table(angles: np.ndarray, pairs: list[int], wavelengths: np.ndarray) -> pd.DataFrame:
    rows = [
        {
            "pair": pair,
            "positions_per_turn": float(wavelengths[pair]),
            "position": pos,
            "angle_rad": float(angles[pos, pair]),
            "x": float(np.cos(angles[pos, pair])),
            "y": float(np.sin(angles[pos, pair])),
        }
        for pair in pairs
        for pos in range(angles.shape[0])
    ]
    return pd.DataFrame(rows)


rope_rotation = Chart(make_rope_rotation, rope_rotation_table)


def distance_table(distances: np.ndarray, scores: np.ndarray, actual: int, recorded: float) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "distance": distances,
            "scaled_score": scores,
            "actual_distance": distances == actual,
            "recorded_in_forward": np.where(distances == actual, recorded, np.nan),
        }
    )


distance_scores = Chart(make_distance_scores, distance_table)


def position_table(values: np.ndarray, x_title: str, colorbar: str) -> pd.DataFrame:
    return cell_table(values, "position", x_title.replace(" ", "_"), colorbar)


position_heatmap = Chart(make_position_heatmap, position_table)
