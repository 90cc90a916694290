"""How every page draws a chart: ``show(fig, key)`` instead of ``st.plotly_chart``.

One call gives each chart the same extras: Plotly's camera button saves a PNG under a
stable name (``llm-explorer_<page>_<key>.png``), a small "Download CSV" button below
it hands out the numbers behind the chart, and in presenter mode (``state.PRESENTER``)
the chart is drawn from a copy with larger text. The caller's figure is never changed, but for one
setting every chart gets (``keep_tick_labels``): no tick label is ever dropped.

A page hands ``show`` one chart spec called with its arguments (``ui.common.chart``: each chapter's
``figures.py`` pairs a ``make_*`` figure with the ``*_table`` of its CSV), so the figure and the CSV's named
columns come from the same argument list; the table is built only when the button is clicked. A plain figure,
or a spec with no table, falls back to the numbers read off its traces (``ui.common.export.figure_csv``).
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Callable

import plotly.graph_objects as go
import streamlit as st

from ui.common import state
from ui.common.chart import ChartCall
from ui.common.export import figure_csv
from ui.common.navigation import current_url_path
from ui.common.presenter import is_on as presenting

FILE_PREFIX = "llm-explorer"
PNG_SCALE = 2  # the PNG is drawn at twice the on-screen size: sharp on slides
FONT_SCALE = 1.4  # presenter mode: every text this much larger
HEIGHT_SCALE = 1.25  # presenter mode: a figure that sets its height gets this much taller
TITLE_LINE_CHARS = 56  # presenter mode: a longer title wraps (a full-width chart at 1280 px holds ~60 characters)

_X_AXIS = re.compile(r"xaxis\d*")  # a layout's x axes: xaxis, xaxis2, ...

# Sizes (px) the Streamlit theme gives Plotly text; presenter mode scales these when the figure sets none.
_THEME_FONT, _THEME_TITLE, _THEME_AXIS_TITLE = 12, 16, 14


def show(chart: ChartCall | go.Figure, key: str, name: str | None = None, *, shared: bool = False) -> go.Figure:
    """Draw ``chart`` under ``key`` with a PNG export name and a CSV download (key ``<key>_csv``) below it.

    ``chart`` is a chart spec called with its arguments (``figs.logits_bar(tokens, logits, greedy)``): the figure
    is built from them (once for every session when ``shared``: ``shared`` below) and the CSV's table from the same
    ones. ``name`` replaces ``<page>_<key>`` in the file names when given. Returns the figure drawn (a page that
    reads something off it, such as which points went unlabelled).
    """
    if isinstance(chart, go.Figure):
        fig = chart
        csv = lambda: figure_csv(fig)  # noqa: E731 (a plain figure: its traces are its table)
    else:
        fig = chart.figure(builder=_shared_cache(chart.spec.figure) if shared else None)
        csv = lambda: chart.csv(fig)  # noqa: E731
    stem = file_stem(key, name)
    if not shared:  # a shared figure got its tick-label settings once, when it was built: never changed after
        keep_tick_labels(fig)
    shown = presenter_copy(fig) if presenting() else fig
    st.plotly_chart(shown, key=key, config=chart_config(stem))
    st.download_button(
        "Download CSV",
        data=csv,
        file_name=f"{stem}.csv",
        mime="text/csv",
        key=state.csv_button(key),
        type="tertiary",
        icon=":material/download:",
        on_click="ignore",
        help="The numbers behind this chart, one row each, with named columns",
    )
    return fig


def chart_config(stem: str) -> dict:
    """Plotly config: the camera button saves ``<stem>.png`` at ``PNG_SCALE``; no Plotly logo."""
    return {"toImageButtonOptions": {"format": "png", "filename": stem, "scale": PNG_SCALE}, "displaylogo": False}


def file_stem(key: str, name: str | None = None) -> str:
    """``llm-explorer_<page url path>_<key>`` (or ``llm-explorer_<name>``), safe as a file name."""
    parts = [name] if name else [current_url_path(), key]
    return "_".join(_safe(p) for p in [FILE_PREFIX, *parts] if p)


def keep_tick_labels(fig: go.Figure) -> go.Figure:
    """Every x axis of ``fig`` keeps all its tick labels: its margin grows to hold them (``automargin``) and a label
    reaching past the chart's edge is drawn, not hidden (``ticklabeloverflow``). Plotly's defaults hide such a label:
    the class histogram's last bar, "other (49,142 tokens)" on two lines, lost its label in a narrow column. This
    changes ``fig``: a figure shared between sessions takes it once, when ``shared`` builds it (two sessions
    updating one figure at once break Plotly's own dictionaries: "OrderedDict mutated during iteration")."""
    layout = fig.layout
    for name in [key for key in layout if _X_AXIS.fullmatch(key)]:  # xaxis, and xaxis2 ... where subplots set them
        axis = layout[name]
        # set on each axis itself: ``update_xaxes`` gives the same JSON at ~2.7x the Python (its axis search and
        # batched relayout), ~7 % of a class server's page runs (docs/benchmarks.md)
        axis.automargin = True
        axis.ticklabeloverflow = "allow"
    return fig


def presenter_copy(fig: go.Figure) -> go.Figure:
    """A copy of ``fig`` for a projector: all text ``FONT_SCALE`` larger, a set height ``HEIGHT_SCALE`` taller.

    The Streamlit theme gives titles, axes and legends their own sizes, so scaling the
    layout font alone would leave them small: each gets an explicit, scaled size.
    """
    big = copy.deepcopy(fig)  # not go.Figure(fig): that reorders the original's JSON keys

    def grow(font, default: float | None) -> None:
        size = font.size or default
        if isinstance(size, (int, float)):  # a per-point list of sizes is left as it is
            font.size = round(size * FONT_SCALE)

    grow(big.layout.font, _THEME_FONT)
    grow(big.layout.title.font, _THEME_TITLE)
    grow(big.layout.legend.font, _THEME_FONT)
    for axis in [*big.select_xaxes(), *big.select_yaxes()]:
        grow(axis.tickfont, _THEME_FONT)
        grow(axis.title.font, _THEME_AXIS_TITLE)
    for annotation in big.layout.annotations:  # subplot titles, labels; unset ones follow the layout font
        grow(annotation.font, None)
    for trace in big.data:
        if "textfont" in trace:
            grow(trace.textfont, None)
    if big.layout.height:
        big.layout.height = round(big.layout.height * HEIGHT_SCALE)
    title = big.layout.title.text
    if title and "<br>" not in title and len(title) > TITLE_LINE_CHARS:
        big.layout.title.text = wrap_title(title)
        top = big.layout.margin.t if big.layout.margin.t is not None else 100
        big.layout.margin.t = top + round(_THEME_TITLE * FONT_SCALE * 1.3)  # room for the second line
        if big.layout.height:
            big.layout.height += round(_THEME_TITLE * FONT_SCALE * 1.3)
    return big


def wrap_title(title: str, limit: int = TITLE_LINE_CHARS) -> str:
    """``title`` broken into lines of at most ``limit`` characters at spaces (Plotly's ``<br>``)."""
    lines, line = [], ""
    for word in title.split(" "):
        if line and len(line) + 1 + len(word) > limit:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "<br>".join([*lines, line])


def _safe(part: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", part).strip("-")


@functools.cache  # one cache per builder, however often a page asks for it
def shared(builder: Callable[..., go.Figure], max_entries: int = 16) -> Callable[..., go.Figure]:
    """``builder`` (a pure ``make_*`` figure function) built once per set of arguments for every session: a class
    on the teacher's view draws the same charts, and building a Plotly figure is most of a page run's Python.
    The figure is finished when it is built (``keep_tick_labels`` included) and never changed after: sessions read
    it at the same time (``show`` copies it for presenter mode, and ``st.plotly_chart`` reads it). ``max_entries``
    per builder bounds the memory (a figure is ~0.1-1 MB); a class on one view needs a handful (a class on one
    server: docs/benchmarks.md)."""

    @functools.wraps(builder)  # the cache's key reads the builder's own name and source
    def finished(*args, **kwargs) -> go.Figure:
        return FinishedFigure.of(keep_tick_labels(builder(*args, **kwargs)))

    return st.cache_resource(max_entries=max_entries, show_spinner=False)(finished)


class FinishedFigure(go.Figure):
    """A shared figure, finished: its dict (what ``st.plotly_chart`` serialises, through ``to_dict``) is made once
    when it is built, not deep-copied again for every session on every run (up to 7 ms of a page run, the Logits page:
    docs/benchmarks.md). The dict is read, never changed: ``st.plotly_chart`` only reads it. A copy (``presenter_copy``'s
    ``copy.deepcopy``, a pickle) is a plain ``go.Figure`` again, built from a dict of its own, free to change."""

    _dict: dict

    @classmethod
    def of(cls, fig: go.Figure) -> FinishedFigure:
        """``fig`` itself, finished: the same object (no second validation of its properties), its dict made now."""
        fig.__class__ = cls  # go.Figure and this class hold the very same attributes
        fig._dict = go.Figure.to_dict(fig)
        return fig

    def to_dict(self) -> dict:
        return self._dict

    def __reduce__(self):  # plotly's own, with a fresh dict and the plain class
        props = go.Figure.to_dict(self)
        props["_grid_str"], props["_grid_ref"] = self._grid_str, self._grid_ref
        return (go.Figure, (props,))


_shared_cache = shared  # ``show``'s own ``shared`` flag hides the name there
