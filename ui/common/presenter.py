"""Presenter mode: a projector layout for a class (``?present=1`` or the sidebar toggle).

Owns what changes in that mode: bigger text (a fixed style sheet, no user data in it),
secondary sidebar controls left out (see ``ui.sidebar``), chart fonts enlarged (see
``ui.common.charts``), and a Previous / Next bar that walks the pages in the story's order.
The prompt and every other setting live in the session, so they carry across.
"""

from __future__ import annotations

import streamlit as st

from ui.common import state
from ui.common.navigation import PAGES, PageSpec

# Streamlit sizes its text in rem: a larger root font scales the whole page. At that size Streamlit's
# one-line labels (navigation, page links, buttons, metric labels) would be cut with "…": they wrap
# instead. Below 1600 px a row of charts side by side stacks, so no chart gets too narrow for its title
# (tests/test_browser.py checks 1280×720 and 1920×1080 for cut text and titles).
STYLE = """<style>
html { font-size: 21px; }
[data-testid="stMainBlockContainer"] { max-width: 100%; padding-left: 2.5rem; padding-right: 2.5rem; }
[data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li { font-size: 1.1rem; }
[data-testid="stToolbar"], [data-testid="stDecoration"] { display: none; }
[data-testid="stSidebarNav"] *, [data-testid="stPageLink"] *, [data-testid="stMetricLabel"] *,
[data-testid^="stBaseButton"] * { white-space: normal !important; text-overflow: clip !important;
  overflow: visible !important; }
@media (max-width: 1600px) {
  [data-testid="stHorizontalBlock"]:has(.js-plotly-plot) { flex-wrap: wrap; }
  [data-testid="stHorizontalBlock"]:has(.js-plotly-plot) > [data-testid="stColumn"] { min-width: 100%; }
}
</style>"""


def is_on() -> bool:
    return bool(state.get(state.PRESENTER))


def neighbours(spec: PageSpec) -> tuple[PageSpec | None, PageSpec | None]:
    """The story pages before and after ``spec``."""
    index = PAGES.index(spec)
    return (PAGES[index - 1] if index > 0 else None), (PAGES[index + 1] if index + 1 < len(PAGES) else None)


def render(spec: PageSpec) -> None:
    """When presenter mode is on: the style sheet and the Previous / Next bar at the top of the page."""
    if not is_on():
        return
    st.html(STYLE)
    previous, following = neighbours(spec)
    left, middle, right = st.columns([2, 1, 2], vertical_alignment="center")
    if previous:
        left.page_link(previous.script, label=f"Previous: {previous.title}", icon=":material/arrow_back:")
    middle.caption(f"Page {PAGES.index(spec) + 1} of {len(PAGES)}")
    if following:
        right.page_link(following.script, label=f"Next: {following.title}", icon=":material/arrow_forward:")
