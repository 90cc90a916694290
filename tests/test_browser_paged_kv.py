"""The Paged KV cache page in a real browser, on both models: a deep link opens the replay, the step slider moved
by the keyboard replays the scheduler (the pool's chart and the URL follow), and nothing leaves the machine.

Uses ``tests/test_browser.py``'s server and browser fixtures (one ``streamlit run app.py`` for this module).
"""

from __future__ import annotations

import time
import urllib.parse

import pytest

from tests import test_browser
from tests.test_browser import (
    GEMMA,
    RENDER_S,
    _outside,
    _record_requests,
    _screenshot_kept,
    _slider_right,
    _wait_for_run_to_finish,
)

pytestmark = pytest.mark.browser
browser, shared_server = test_browser.browser, test_browser.shared_server  # the fixtures, for this module


def _grid_title(page, start: str) -> str:
    """The title of the pool's chart once it starts with ``start`` (scrolled into view: a chart below the fold is
    drawn when the page gets to it), or the last title seen."""
    page.get_by_text("The scheduler, step by step", exact=True).first.scroll_into_view_if_needed()
    deadline, title = time.monotonic() + RENDER_S, ""
    while time.monotonic() < deadline:
        title = page.evaluate("""() => {
            const text = el => ((el.layout || {}).title || {}).text || '';
            const plain = el => text(el).replace(/<[^>]+>/g, '');  // Streamlit's theme sets titles in <b>
            const plot = [...document.querySelectorAll('.js-plotly-plot')]
                .find(el => plain(el).startsWith('The pool after step'));
            return plot ? plain(plot) : '';
        }""")
        if title.startswith(start):
            break
        page.mouse.wheel(0, 200)
        time.sleep(0.5)
    return title


@pytest.mark.parametrize("model", ["", GEMMA], ids=["default", "gemma"])
def test_the_step_slider_replays_the_scheduler(model, shared_server, browser, tmp_path):
    if model:
        from inference.model.packages import install_hint, is_installed

        if not is_installed(GEMMA):
            pytest.skip(f"{GEMMA} is not installed: {install_hint(GEMMA)}")
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    requested = _record_requests(page)
    query = {"scenario": "samples", "block_size": "4"} | ({"model": model} if model else {})
    page.goto(f"{shared_server}/paged_kv?{urllib.parse.urlencode(query)}")
    with _screenshot_kept(page, f"paged_kv_{model or 'default'}", tmp_path):
        # the first open loads the model and replays the scenario (a dozen forwards), on two shared cores
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=3 * RENDER_S * 1000)
        _wait_for_run_to_finish(page)
        assert _grid_title(page, "The pool after step 0:").startswith("The pool after step 0:")
        assert page.get_by_text("is forked from the sequence whose prefill computed the same prompt").count() >= 1
        step = _slider_right(page, "Scheduler step", 2)
        assert step == "2"
        assert _grid_title(page, "The pool after step 2:").startswith("The pool after step 2:")
        assert "paged_step=2" in page.url and "scenario=samples" in page.url, page.url
        assert page.locator('[data-testid="stException"]').count() == 0
        assert page.locator('[data-testid="stAlertContentError"]').count() == 0
        assert page.locator('[data-testid="stAlertContentWarning"]').count() == 0  # the link was used as given
        assert not _outside(requested, shared_server), _outside(requested, shared_server)
    page.close()
