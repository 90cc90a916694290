"""Chart conventions every figure follows, in code rather than in a style guide.

- **Paired charts share their axis.** Two charts meant to be compared side by side (two models'
  top-10 bars, a local and a global layer's map, two batching timelines) take one range from
  ``shared_range`` (or one colour scale), so equal values are drawn equally long.
- **Bars start at zero.** A bar's length is its value: a bar axis always holds 0
  (``bar_axes_hold_zero`` checks a figure).
- **A flat chart says so.** A line whose whole range is under 1 % of its size would fill the
  plot with swings of nothing; ``flat_note`` gives the note that says how small the range is,
  shown on the chart beside the zoomed axis.
- **Labels fit their cells.** A label drawn inside a heatmap cell or next to a point is cut to
  the characters that fit (``fit_label``; the hover and the CSV keep it whole), and labels that
  would pile up on each other are thinned (``spread_out``).

Plain numbers in, plain values out; the figure modules call these, and ``tests/test_conventions.py``
checks the pages' paired charts against them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

FLAT_SHARE = 0.01  # a chart whose values span less than this share of their size is "flat"
CHAR_PX = 0.6  # a character is about this share of the font size wide (proportional fonts, mixed text)
PLOT_PX = 760  # the narrowest plot area a full-width chart gets (a 1280-px window, sidebar open, presenter padding)
PROJECTOR_FONT_SCALE = 1.4  # presenter mode's text scale (ui.common.charts.FONT_SCALE; a test keeps them equal)


def shared_range(*series: Sequence[float], headroom: float = 1.15, smallest: float = 0.01) -> list[float]:
    """One value axis [0, top] for every chart of a pair (bars from zero, room above the longest for its label)."""
    top = max((float(v) for values in series for v in values), default=0.0)
    return [0.0, max(top, smallest) * headroom]


def shared_colour_top(*maps: np.ndarray, percentile: float = 99.0) -> float:
    """One colour-scale top for maps drawn side by side: the highest of their ``percentile``-th values."""
    tops = [float(np.nanpercentile(m, percentile)) for m in maps if np.isfinite(m).any()]
    return max(tops, default=1.0) or 1.0


def flat_note(values: Sequence[float], what: str = "the line", threshold: float = FLAT_SHARE) -> str | None:
    """A note for a chart whose values barely move (their span under ``threshold`` of their size), or None.

    The size is the largest magnitude, so a span of 0.015 on values near 6.8 is 0.2 %."""
    data = np.asarray(values, dtype=float)
    data = data[np.isfinite(data)]
    if data.size < 2:
        return None
    span, size = float(data.max() - data.min()), float(np.abs(data).max())
    if size == 0 or span >= threshold * size:
        return None
    return f"Zoomed in: {what} spans only {span:.3g} ({100 * span / size:.2g}% of its size)"


def is_flat(values: Sequence[float], threshold: float = FLAT_SHARE) -> bool:
    return flat_note(values, threshold=threshold) is not None


def fit_label(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` characters, the last one an ellipsis when anything was cut."""
    max_chars = max(int(max_chars), 1)
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def chars_that_fit(width_px: float, font_px: float) -> int:
    """How many characters of a ``font_px`` font fit in ``width_px`` (at least 1)."""
    return max(1, int(width_px / (CHAR_PX * font_px)))


def cell_chars(n_cells: int, font_px: float, plot_px: float = PLOT_PX) -> int:
    """Characters of a ``font_px`` label that fit in one of ``n_cells`` equal cells across a plot, in presenter
    mode too (its larger text)."""
    return chars_that_fit(plot_px / max(n_cells, 1) - 4, font_px * PROJECTOR_FONT_SCALE)


MIN_CELL_FONT_PX = 9


def fit_cells(
    labels: Sequence[str], n_cells: int, font_px: float, min_font_px: float = MIN_CELL_FONT_PX
) -> tuple[int, dict[str, str]]:
    """A font size for labels drawn inside ``n_cells`` equal cells, and each label as drawn: the font shrinks
    (down to ``min_font_px``) until the longest label fits, and a label still too long is cut with "…"."""
    width = PLOT_PX / max(n_cells, 1) - 4
    longest = max((len(label) for label in labels), default=1)
    size = max(min_font_px, min(font_px, width / (CHAR_PX * PROJECTOR_FONT_SCALE * max(longest, 1))))
    fits = chars_that_fit(width, size * PROJECTOR_FONT_SCALE)
    return int(size), {label: fit_label(label, fits) for label in labels}


def spread_out(positions: Sequence[float], min_gap: float, period: float | None = None) -> list[bool]:
    """Which of the points at ``positions`` keep their label so that no two kept labels are closer than
    ``min_gap`` (on a circle of ``period`` when given): earlier points win."""
    kept: list[float] = []
    keep = []

    def gap(x: float, y: float) -> float:
        d = abs(x - y)
        return min(d, period - d) if period else d

    for x in positions:
        ok = all(gap(x, y) >= min_gap for y in kept)
        keep.append(ok)
        if ok:
            kept.append(x)
    return keep


def bar_axes_hold_zero(fig: go.Figure) -> list[str]:
    """The bar traces of ``fig`` whose value axis has an explicit range without 0 (empty: the convention holds).

    Bars drawn from a ``base`` (a timeline, ranges on [0, 1)) are positioned, not measured, and are left out."""
    problems = []
    layout = fig.layout
    for trace in fig.data:
        if trace.type != "bar" or trace.base is not None:
            continue
        horizontal = trace.orientation == "h"
        axis_name = (trace.xaxis if horizontal else trace.yaxis) or ("x" if horizontal else "y")
        axis = layout[("xaxis" if axis_name[0] == "x" else "yaxis") + axis_name[1:]]
        if axis.range is not None and not (min(axis.range) <= 0 <= max(axis.range)):
            problems.append(f"{trace.name or 'bar'}: axis {axis_name} range {list(axis.range)} leaves out 0")
    return problems
