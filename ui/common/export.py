"""The numbers drawn in a Plotly figure as a tidy CSV: one row per plotted point or heatmap cell.

Pure (no Streamlit): ``figure_csv(fig)`` reads the traces of any figure built by
the chapters' ``figures.py`` (bars, scatters, heatmaps, subplots) and writes what they draw. It does
not read layout shapes or annotations, and it leaves out heatmap cells that draw
nothing (None/NaN and no text, such as masked future keys); a masked cell that shows a
text ("cut", "pad") is kept, with an empty z. Arrays may be lists, numpy
arrays or Plotly's typed arrays (``{"dtype", "bdata", "shape"}``, as in a figure
parsed from JSON).

Columns, in this order; one that is empty on every row is left out (``trace``,
``type``, ``x`` and ``y`` never are):

- ``trace``: the trace's name (``trace <i>``, Plotly's own default, when unnamed)
- ``type``: ``bar``, ``scatter``, ``heatmap``, ...
- ``subplot``: the trace's axes (``xy``, ``x2y2``), when the figure uses more than one pair
- ``row``, ``col``: a heatmap cell's index in the z matrix
- ``x``, ``y``, ``z``: the coordinates and value, as drawn (a heatmap cell's x/y labels)
- ``x_label``, ``y_label``: the tick label at x or y when the axis names its ticks
  (tokens on an integer axis, say)
- ``base``: where a bar starts, when it does not start at 0
- ``text``: the text drawn on the point or cell
"""

from __future__ import annotations

import base64
import csv
import io
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import plotly.graph_objects as go

COLUMNS = ["trace", "type", "subplot", "row", "col", "x", "x_label", "y", "y_label", "z", "base", "text"]
_ALWAYS = {"trace", "type", "x", "y"}


def figure_csv(fig: go.Figure) -> str:
    """The figure's plotted numbers as CSV text (header + one row per point or cell)."""
    rows = figure_rows(fig)
    used = [c for c in COLUMNS if c in _ALWAYS or any(row.get(c, "") != "" for row in rows)]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=used, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def figure_rows(fig: go.Figure) -> list[dict[str, Any]]:
    """The rows ``figure_csv`` writes, as dicts (values not yet turned into text; masked ones are "")."""
    subplots = {_subplot(trace) for trace in fig.data}
    rows = []
    for index, trace in enumerate(fig.data):
        common = {"trace": trace.name if trace.name else f"trace {index}", "type": trace.type}
        if len(subplots) > 1:
            common["subplot"] = _subplot(trace)
        ticks = (_tick_labels(fig, trace, "x"), _tick_labels(fig, trace, "y"))
        z = decode_array(getattr(trace, "z", None))
        points = _cells(trace, z) if z is not None and z.ndim == 2 else _points(trace, z)
        for point in points:
            point["x_label"] = ticks[0].get(_key(point.get("x")), "")
            point["y_label"] = ticks[1].get(_key(point.get("y")), "")
            rows.append(common | {c: _cell(v) for c, v in point.items()})
    return rows


def decode_array(value: Any) -> np.ndarray | None:
    """A trace's data array as numpy: lists, tuples, numpy arrays or Plotly typed arrays; None if absent."""
    if value is None or isinstance(value, str):
        return None
    if isinstance(value, dict):
        if "bdata" not in value:
            return None
        data = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        if isinstance(shape, str):
            shape = [int(s) for s in shape.split(",")]
        return data.reshape(shape) if shape else data
    if isinstance(value, np.ndarray):
        return value
    rows = [list(r) if isinstance(r, (list, tuple, np.ndarray)) else r for r in value]
    if rows and all(isinstance(r, list) for r in rows) and len({len(r) for r in rows}) == 1:
        out = np.empty((len(rows), len(rows[0])), dtype=object)  # object: keeps None, ints and strings as given
        for i, r in enumerate(rows):
            out[i, :] = r
        return out
    out = np.empty(len(rows), dtype=object)
    out[:] = rows
    return out


def _points(trace, z: np.ndarray | None) -> Iterator[dict[str, Any]]:
    """One dict per point of a bar/scatter-like trace (x defaults to x0 + i·dx, as Plotly draws it)."""
    x, y = decode_array(getattr(trace, "x", None)), decode_array(getattr(trace, "y", None))
    n = max((len(a) for a in (x, y, z) if a is not None), default=0)
    if x is None and y is None and z is None:
        return
    if x is None:
        x = _default_positions(trace, "x", n)
    if y is None:
        y = _default_positions(trace, "y", n)
    base, text = _per_point(trace, "base", n), _per_point(trace, "text", n)
    for i in range(n):
        yield {"x": _at(x, i), "y": _at(y, i), "z": _at(z, i), "base": base[i], "text": text[i]}


def _cells(trace, z: np.ndarray) -> Iterator[dict[str, Any]]:
    """One dict per drawn heatmap cell: row, col, its x and y labels, value, text (cells with neither skipped)."""
    n_rows, n_cols = z.shape
    x = decode_array(getattr(trace, "x", None))
    y = decode_array(getattr(trace, "y", None))
    x = _default_positions(trace, "x", n_cols) if x is None else x
    y = _default_positions(trace, "y", n_rows) if y is None else y
    text = decode_array(getattr(trace, "text", None))
    has_text = text is not None and text.ndim == 2
    for i in range(n_rows):
        for j in range(n_cols):
            value = z[i, j]
            cell_text = text[i, j] if has_text and i < text.shape[0] and j < text.shape[1] else ""
            if _masked(value) and cell_text in ("", None):
                continue
            yield {"row": i, "col": j, "x": _at(x, j), "y": _at(y, i), "z": value, "text": cell_text}


def _default_positions(trace, axis: str, n: int) -> np.ndarray:
    start = getattr(trace, f"{axis}0", None)
    step = getattr(trace, f"d{axis}", None)
    start = 0 if start is None else start
    step = 1 if step is None else step
    return np.asarray([start + step * i for i in range(n)], dtype=object)


def _per_point(trace, name: str, n: int) -> list[Any]:
    """A per-point attribute (``text``, ``base``): an array, one value for every point, or nothing."""
    value = getattr(trace, name, None)
    array = decode_array(value)
    if array is None:
        return [value if value is not None else ""] * n
    return [_at(array, i) for i in range(n)]


def _at(array: np.ndarray | None, i: int) -> Any:
    return array[i] if array is not None and i < len(array) else ""


def _masked(value: Any) -> bool:
    return value is None or (isinstance(value, (float, np.floating)) and math.isnan(value))


def _cell(value: Any) -> Any:
    """A value as the csv module should write it: "" for missing, plain text for the rest.

    numpy scalars keep their own shortest text (float32 0.3 stays "0.3", not 0.30000001...);
    Plotly's line breaks (``<br>``) in labels become spaces.
    """
    if _masked(value):
        return ""
    if isinstance(value, str):
        return value.replace("<br>", " ")
    if isinstance(value, np.generic):
        return str(value)
    return value


def _subplot(trace) -> str:
    return f"{getattr(trace, 'xaxis', None) or 'x'}{getattr(trace, 'yaxis', None) or 'y'}"


def _tick_labels(fig: go.Figure, trace, axis: str) -> dict[Any, str]:
    """{tick value: tick text} of the axis a trace is drawn on, when that axis names its ticks."""
    ref = getattr(trace, f"{axis}axis", None) or axis  # "x", "x2", ...
    layout_axis = fig.layout[f"{axis}axis{ref[1:]}"]
    values, texts = decode_array(layout_axis.tickvals), decode_array(layout_axis.ticktext)
    if values is None or texts is None:
        return {}
    return {_key(v): str(t) for v, t in zip(values, texts)}


def _key(value: Any) -> Any:
    """A hashable lookup key under which 2, 2.0 and np.int64(2) are the same tick."""
    if isinstance(value, (bool, np.bool_)):
        return value
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    return value
