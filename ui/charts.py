"""How every page draws a chart: ``show(fig, key)`` instead of ``st.plotly_chart``.

One call gives each chart the same extras: Plotly's camera button saves a PNG under a
stable name (``llm-explorer_<page>_<key>.png``), a small "Download CSV" button below
it hands out the numbers drawn (``ui.figures.export.figure_csv``, built only when
clicked), and in presenter mode (``state.PRESENTER``) the chart is drawn from a copy
with larger text. The caller's figure is never changed.
"""
from __future__ import annotations

import copy
import re

import plotly.graph_objects as go
import streamlit as st

from ui.figures.export import figure_csv
from ui.navigation import current_url_path
from ui.presenter import is_on as presenting

FILE_PREFIX = "llm-explorer"
PNG_SCALE = 2  # the PNG is drawn at twice the on-screen size: sharp on slides
FONT_SCALE = 1.4  # presenter mode: every text this much larger
HEIGHT_SCALE = 1.25  # presenter mode: a figure that sets its height gets this much taller

# Sizes (px) the Streamlit theme gives Plotly text; presenter mode scales these when the figure sets none.
_THEME_FONT, _THEME_TITLE, _THEME_AXIS_TITLE = 12, 16, 14


def show(fig: go.Figure, key: str, name: str | None = None) -> None:
    """Draw ``fig`` under ``key`` with a PNG export name and a CSV download (key ``<key>_csv``) below it.

    ``name`` replaces ``<page>_<key>`` in the file names when given.
    """
    stem = file_stem(key, name)
    shown = presenter_copy(fig) if presenting() else fig
    st.plotly_chart(shown, key=key, config=chart_config(stem))
    st.download_button(
        "Download CSV", data=lambda: figure_csv(fig), file_name=f"{stem}.csv", mime="text/csv", key=f"{key}_csv",
        type="tertiary", icon=":material/download:", on_click="ignore",
        help="The numbers drawn in this chart, one row per point or cell",
    )


def chart_config(stem: str) -> dict:
    """Plotly config: the camera button saves ``<stem>.png`` at ``PNG_SCALE``; no Plotly logo."""
    return {"toImageButtonOptions": {"format": "png", "filename": stem, "scale": PNG_SCALE}, "displaylogo": False}


def file_stem(key: str, name: str | None = None) -> str:
    """``llm-explorer_<page url path>_<key>`` (or ``llm-explorer_<name>``), safe as a file name."""
    parts = [name] if name else [current_url_path(), key]
    return "_".join(_safe(p) for p in [FILE_PREFIX, *parts] if p)


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
    return big


def _safe(part: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", part).strip("-")
