"""Plotly traces that several chapters draw alike, so that a convention is written once.

``share_heatmap``: cells holding probabilities or shares, one column per position or token, on a colour scale
pinned to [0, 1] (a cell's colour means the same value on every such chart, whatever the largest value drawn).
``discrete_scale``: a colour scale of flat bands, one per category, for a heatmap of category codes.
Pure: plain numbers in, a trace out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go


def share_heatmap(
    z: np.ndarray, rows: Sequence, colorscale: str, gap: int, colorbar_title: str, **heatmap: Any
) -> go.Heatmap:
    """A (rows, columns) heatmap of values in [0, 1] at columns 0..n-1, cells ``gap`` px apart; ``heatmap`` the
    rest of the trace (its text, hover)."""
    return go.Heatmap(
        z=z,
        x=list(range(np.shape(z)[1])),
        y=list(rows),
        colorscale=colorscale,
        zmin=0,
        zmax=1,
        xgap=gap,
        ygap=gap,
        colorbar={"title": colorbar_title},
        **heatmap,
    )


def discrete_scale(colors: Sequence[str]) -> list[list]:
    """A colour scale with one flat band per category: codes 0..n-1 drawn with zmin -0.5 and zmax n - 0.5 each get
    their own colour."""
    n = len(colors)
    scale = []
    for i, color in enumerate(colors):
        scale += [[i / n, color], [(i + 1) / n, color]]
    return scale
