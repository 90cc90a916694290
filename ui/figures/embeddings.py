"""Figures for the Embeddings page: embedding rows, one vector, neighbours, PCA, position encodings."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .tokens import visible


def make_embedding_heatmap(rows: np.ndarray, pieces: list[str], matrix_shape: tuple[int, int]) -> go.Figure:
    """Tokens (rows) × model dimensions (columns) of the real embedding values."""
    labels = [f"{i}: {visible(p)}" for i, p in enumerate(pieces)]
    limit = float(np.abs(rows).max()) if rows.size else 1.0
    fig = go.Figure(
        go.Heatmap(
            z=rows, y=labels, x=list(range(rows.shape[1])), colorscale="RdBu", zmid=0, zmin=-limit, zmax=limit,
            colorbar=dict(title="value"), hovertemplate="token %{y}<br>dim %{x}<br>value %{z:.4f}<extra></extra>",
        )
    )
    vocab, width = matrix_shape
    fig.update_layout(
        title=f"{rows.shape[0]} rows of the {vocab:,} × {width} embedding matrix",
        xaxis_title="dimension", yaxis=dict(autorange="reversed", type="category"),
        height=max(260, 60 + 22 * rows.shape[0]), margin=dict(l=10, r=10, t=50, b=40),
    )
    return fig


def make_vector_chart(vector: np.ndarray, label: str) -> go.Figure:
    """One token's embedding: value per dimension."""
    fig = go.Figure(go.Bar(x=list(range(len(vector))), y=vector, marker_color="#4c78a8",
                           hovertemplate="dim %{x}<br>%{y:.4f}<extra></extra>"))
    fig.update_layout(title=f"The embedding of {visible(label)!r}: {len(vector)} numbers", xaxis_title="dimension",
                      yaxis_title="value", height=280, margin=dict(l=40, r=10, t=50, b=40), bargap=0)
    return fig


def make_neighbour_chart(neighbours: list[tuple[int, str, float]], label: str) -> go.Figure:
    """Horizontal bars: cosine similarity of the nearest vocabulary rows, closest on top."""
    names = [f"{visible(piece)} ({token_id})" for token_id, piece, _ in neighbours]
    fig = go.Figure(go.Bar(x=[c for _, _, c in neighbours], y=names, orientation="h", marker_color="#59a14f",
                           hovertemplate="%{y}<br>cosine %{x:.3f}<extra></extra>"))
    fig.update_layout(title=f"Nearest rows to {visible(label)!r} by cosine similarity", xaxis_title="cosine similarity",
                      yaxis=dict(autorange="reversed", type="category"), height=80 + 26 * len(neighbours),
                      margin=dict(l=10, r=10, t=50, b=40))
    return fig


def make_projection_scatter(points: np.ndarray, labels: list[str], groups: list[str],
                            explained: tuple[float, float]) -> go.Figure:
    """2-D PCA scatter, one trace per group, every point labelled."""
    fig = go.Figure()
    for group, colour in (("prompt", "#e15759"), ("word set", "#4c78a8")):
        idx = [i for i, g in enumerate(groups) if g == group]
        if idx:
            fig.add_trace(go.Scatter(
                x=points[idx, 0], y=points[idx, 1], mode="markers+text", name=group,
                text=[visible(labels[i]) for i in idx], textposition="top center", marker=dict(size=10, color=colour),
                hovertemplate="%{text}<br>(%{x:.3f}, %{y:.3f})<extra></extra>",
            ))
    fig.update_layout(
        title="Embedding rows projected to 2-D (PCA of the rows shown)",
        xaxis_title=f"PC1 ({explained[0]:.0%} of the variance)", yaxis_title=f"PC2 ({explained[1]:.0%})",
        height=480, margin=dict(l=40, r=10, t=50, b=40),
    )
    return fig


def make_rope_rotation(angles: np.ndarray, pairs: list[int], wavelengths: np.ndarray) -> go.Figure:
    """For a few frequency pairs, where the unit vector (1, 0) ends up at each position: arrows on a circle."""
    fig = make_subplots(rows=1, cols=len(pairs), subplot_titles=[
        f"pair {p}: turn = {wavelengths[p]:,.0f} pos." for p in pairs])
    circle = np.linspace(0, 2 * np.pi, 100)
    for col, pair in enumerate(pairs, start=1):
        fig.add_trace(go.Scatter(x=np.cos(circle), y=np.sin(circle), mode="lines", line=dict(color="#ddd"),
                                 showlegend=False, hoverinfo="skip"), row=1, col=col)
        for pos in range(angles.shape[0]):
            x, y = float(np.cos(angles[pos, pair])), float(np.sin(angles[pos, pair]))
            shade = f"rgba(76,120,168,{0.25 + 0.75 * (1 - pos / max(angles.shape[0] - 1, 1))})"
            fig.add_trace(go.Scatter(x=[0, x], y=[0, y], mode="lines+markers+text", text=["", str(pos)],
                                     textposition="top center", line=dict(color=shade), marker=dict(size=[0, 6]),
                                     showlegend=False, hovertemplate=f"position {pos}<br>angle {angles[pos, pair]:.3f} rad<extra></extra>"),
                          row=1, col=col)
        fig.update_xaxes(range=[-1.25, 1.25], scaleanchor=f"y{col if col > 1 else ''}", showticklabels=False, row=1, col=col)
        fig.update_yaxes(range=[-1.25, 1.25], showticklabels=False, row=1, col=col)
    fig.update_layout(title="RoPE: the same query/key pair rotated by its position (labels = position)",
                      height=380, margin=dict(l=10, r=10, t=80, b=10))
    return fig


def make_position_heatmap(values: np.ndarray, title: str, x_title: str, colorbar: str) -> go.Figure:
    """Positions (rows) × columns heatmap, for RoPE angles or learned position rows."""
    fig = go.Figure(go.Heatmap(z=values, colorscale="RdBu", zmid=0, colorbar=dict(title=colorbar),
                               hovertemplate="position %{y}<br>" + x_title + " %{x}<br>%{z:.3f}<extra></extra>"))
    fig.update_layout(title=title, xaxis_title=x_title, yaxis_title="position", yaxis=dict(autorange="reversed"),
                      height=380, margin=dict(l=40, r=10, t=50, b=40))
    return fig


def make_distance_scores(distances: np.ndarray, scores: np.ndarray, actual: int, recorded: float,
                         query_label: str, key_label: str) -> go.Figure:
    """Score of one real query/key pair as a function of how far apart RoPE places them."""
    fig = go.Figure(go.Scatter(x=distances, y=scores, mode="lines+markers", name="same vectors, other distance",
                               marker=dict(size=4), hovertemplate="distance %{x}<br>score %{y:.3f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=[actual], y=[recorded], mode="markers", name="recorded in the forward pass",
                             marker=dict(size=13, color="#e15759", symbol="diamond"),
                             hovertemplate="actual distance %{x}<br>score %{y:.4f}<extra></extra>"))
    fig.update_layout(
        title=f"q({visible(query_label)}) · k({visible(key_label)}) / √d if the key sat d positions before the query",
        xaxis_title="distance d (positions)", yaxis_title="scaled score", height=340,
        margin=dict(l=40, r=10, t=50, b=40), legend=dict(orientation="h", y=-0.25),
    )
    return fig
