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


__all__ = ["subplots"]
