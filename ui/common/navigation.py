"""The page registry, in story order, and the one ``st.navigation`` call built from it.

The first entry is the default page, served at ``/`` (Streamlit gives the default
page no deep link of its own, so it is a short overview rather than a story page);
``/overview`` opens it as well, like any page's name.
To add a page, append a ``PageSpec`` to ``PAGES`` at its place in the story
(Tokenization → Embeddings → Attention → Transformer block & logit lens → Experiments →
Logits & temperature → Sampling → Generation & KV cache → Speculative decoding → Quantization → Batching → Two models
side by side). ``url_path`` is the deep link (``/attention``); it must equal the file name
without ``.py`` (see ``redirect_legacy_run`` for why; a number prefix, as Streamlit's own multipage
mode uses for order, would only repeat the order ``PAGES`` already owns).
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass

import streamlit as st
from streamlit.navigation.page import StreamlitPage

from ui.classroom import settings as class_settings
from ui.common import state

ROOT_TITLE = "LLM inference explorer"
DEFAULT_KEY = "home"  # the default page's internal name (Streamlit keys pages by it; its public path is "/")
FAVICON = "🔎"

# True while app.py runs a page; False when Streamlit ran a page script on its own.
_in_app: ContextVar[bool] = ContextVar("in_app", default=False)


@dataclass(frozen=True)
class PageSpec:
    script: str  # path from the repository root, e.g. "pages/attention.py"
    title: str
    url_path: str  # deep link, e.g. "attention" -> http://localhost:8501/attention
    icon: str  # shown on the overview's page links (not in the navigation: see ``build``)
    opens_with_chart: bool = True  # draws a Plotly chart before any click (the browser smoke test waits for it)


PAGES: list[PageSpec] = [
    PageSpec("pages/overview.py", "Overview", "overview", ":material/home:", False),  # default page, served at "/"
    PageSpec("pages/tokenization.py", "Tokenization", "tokenization", ":material/text_fields:"),
    PageSpec("pages/embeddings.py", "Embeddings", "embeddings", ":material/scatter_plot:"),
    PageSpec("pages/attention.py", "Attention", "attention", ":material/visibility:"),
    PageSpec("pages/logit_lens.py", "Transformer block & logit lens", "logit_lens", ":material/layers:"),
    PageSpec("pages/experiments.py", "Experiments", "experiments", ":material/science:"),
    PageSpec("pages/logits.py", "Logits & temperature", "logits", ":material/bar_chart:"),
    PageSpec("pages/sampling.py", "Sampling", "sampling", ":material/casino:"),
    PageSpec(
        "pages/generation.py", "Generation & KV cache", "generation", ":material/autorenew:", opens_with_chart=False
    ),  # charts appear after the first step
    PageSpec("pages/speculative.py", "Speculative decoding", "speculative", ":material/fast_forward:"),
    PageSpec("pages/quantization.py", "Quantization", "quantization", ":material/compress:"),
    PageSpec("pages/batching.py", "Batching", "batching", ":material/stacks:"),
    PageSpec("pages/paged_kv.py", "Paged KV cache", "paged_kv", ":material/grid_view:"),
    PageSpec("pages/compare.py", "Two models side by side", "compare", ":material/compare_arrows:"),
    PageSpec(
        "pages/class.py", "The class, together", "class", ":material/groups:", opens_with_chart=False
    ),  # charts appear once the teacher starts a round
    PageSpec("pages/lesson.py", "Lessons", "lesson", ":material/school:", opens_with_chart=False),  # charts: answers
]


def build() -> StreamlitPage:
    """Register every page (the first is the default) and return the one to run."""
    # No icon on st.Page: the browser tab takes the page's icon as its favicon, and Streamlit fetches a
    # :material/...: favicon from fonts.gstatic.com. The app's emoji favicon is an inline data: URL, and
    # the icons stay on the overview's page links (drawn with the bundled font): nothing leaves the machine.
    default, *story = PAGES
    pages = [st.Page(default.script, title=default.title, url_path=DEFAULT_KEY, default=True)]
    pages += [st.Page(spec.script, title=spec.title, url_path=spec.url_path) for spec in story]
    # The default page is served at "/" only; a link to "/overview?..." (its name, as every other page is linked)
    # opens it too, through a second entry hidden from the list (Streamlit would say "Page not found").
    pages.append(st.Page(default.script, title=default.title, url_path=default.url_path, visibility="hidden"))
    return st.navigation(pages, position="sidebar", expanded=list_expanded())


STUDENT_LIST = 10  # pages a student's list shows before its "View more" (Streamlit's own default)


def list_expanded() -> bool | int:
    """Every page listed (16: past the 12 Streamlit shows unasked), but for a student on a class server: there the
    list shows ``STUDENT_LIST`` pages and "View N more", so the class's own controls under it ("Follow the teacher",
    "I am the teacher") stay in a laptop's window (1366×768) without scrolling; a student follows the teacher's
    pages anyway, and the whole list is one click away."""
    if class_settings.current().teacher_key is None or st.session_state.get(state.CLASS_TEACHER):
        return True
    return STUDENT_LIST


def run(page: StreamlitPage, after: Callable[[], None] | None = None) -> None:
    """Run the chosen page from ``app.py`` (marks the run as going through the app shell).

    ``after`` runs once the page is done, also when the page stopped early (``st.stop``).
    """
    token = _in_app.set(True)
    st.session_state[state.PAGE] = spec_of(page).url_path  # also read by fragment reruns
    try:
        page.run()
    finally:
        _in_app.reset(token)
        if after is not None:
            after()


def current_url_path() -> str:
    """The url path of the page being run ("attention"; "overview" for "/"), or "" outside ``run``."""
    return st.session_state.get(state.PAGE, "")


def script_of(url_path: str) -> str:
    """The script of the page at ``url_path`` (for ``st.page_link``)."""
    return next(spec.script for spec in PAGES if spec.url_path == url_path)


def spec_of(page: StreamlitPage) -> PageSpec:
    """The registry entry of a page from ``build`` (the default page's url path is "")."""
    return next((spec for spec in PAGES if spec.url_path == page.url_path), PAGES[0])


def redirect_legacy_run() -> None:
    """The deep-link fix, called by every page script as its first statement after its imports:
    make sure ``app.py`` (sidebar, state, navigation) ran.

    A freshly started server that finds a ``pages/`` folder runs its first request in
    Streamlit's legacy multipage mode: a deep link such as ``/attention`` executes
    ``pages/attention.py`` directly, with a file-name navigation and without
    ``app.py``. Calling ``st.navigation`` switches that mode off for the server; the
    rerun then goes through ``app.py`` and lands on the same page, because a page is
    identified by its url path (hence ``url_path`` must match the file name).
    """
    if not _in_app.get():
        build()
        st.rerun()
