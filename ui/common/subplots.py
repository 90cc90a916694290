"""``subplots``: Plotly's ``make_subplots`` grid without its cost on every figure.

``make_subplots`` builds its figure by copying a layout that holds the default template written out (~7,000
characters), and validating that copy is most of its 12-23 ms: a figure of one page run paid it every time, and in a
class the server's one interpreter lock pays it for every tab. ``subplots`` asks ``make_subplots`` once per distinct
arguments, keeps its layout without the template and its grid (which subplot is which axes), and builds each new
figure from those: the default template is then set the way ``go.Figure()`` sets it, unvalidated. The figure is the
same (``tests/test_subplots.py`` compares the two on the grids the chapters ask for); ``add_trace(row=, col=)``
and ``update_xaxes(row=, col=)`` address the same axes.

Pure: no Streamlit, so a chapter's figure builders stay pure functions.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots


@lru_cache(maxsize=128)
def _grid(arguments: str) -> tuple[dict[str, Any], Any, Any]:
    """``make_subplots``'s layout without the template, and its grid (``_grid_str``, ``_grid_ref``)."""
    figure = make_subplots(**json.loads(arguments))
    layout = figure.to_plotly_json()["layout"]
    layout.pop("template", None)
    return layout, figure._grid_str, figure._grid_ref  # noqa: SLF001  (what plotly itself copies between figures)


def subplots(**arguments: Any) -> go.Figure:
    """``make_subplots(**arguments)``: the same figure, its grid built once per distinct arguments (JSON values:
    another is a ``TypeError``, as ``make_subplots`` refuses a numpy count)."""
    layout, grid_str, grid_ref = _grid(json.dumps(arguments, sort_keys=True))
    return go.Figure({"layout": copy.deepcopy(layout), "_grid_str": grid_str, "_grid_ref": grid_ref})


def _merge(into: dict, more: Mapping[str, Any]) -> dict:
    """``more`` written into ``into``, nested settings merged key by key (as ``update_layout`` merges them); a
    nested mapping is copied, so a later merge never writes into the caller's own dicts."""
    for key, value in more.items():
        if isinstance(value, Mapping):
            if not isinstance(into.get(key), dict):
                into[key] = {}
            _merge(into[key], value)
        else:
            into[key] = value
    return into


def grid_figure(
    grid: Mapping[str, Any],
    traces: Sequence[tuple[Mapping[str, Any], int, int]],
    axes: Mapping[tuple[int, int], tuple[Mapping[str, Any], Mapping[str, Any]]] | None = None,
    layout: Mapping[str, Any] | None = None,
) -> go.Figure:
    """``subplots(**grid)`` with its traces, axis settings and layout, made in one construction from plain dicts:
    ``traces`` are (trace, row, col), each placed on its cell's axes as ``add_trace(row=, col=)`` places it;
    ``axes[(row, col)]`` is (x axis settings, y axis settings) of that cell, as ``update_xaxes(row=, col=)`` and
    ``update_yaxes`` set them; ``layout`` the rest. The same figure as those calls (``tests/test_subplots.py``), with
    each property validated once: a figure of several traces and axis updates took 3-4x the Python the other way."""
    base, grid_str, grid_ref = _grid(json.dumps(dict(grid), sort_keys=True))
    full = copy.deepcopy(base)
    for (row, col), (x, y) in (axes or {}).items():
        x_key, y_key = grid_ref[row - 1][col - 1][0].layout_keys
        _merge(full.setdefault(x_key, {}), x)
        _merge(full.setdefault(y_key, {}), y)
    _merge(full, layout or {})
    data = [{**trace, **grid_ref[row - 1][col - 1][0].trace_kwargs} for trace, row, col in traces]
    return go.Figure({"data": data, "layout": full, "_grid_str": grid_str, "_grid_ref": grid_ref})


__all__ = ["grid_figure", "subplots"]
