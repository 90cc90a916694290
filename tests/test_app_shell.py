"""AppTest for the shell: defaults, sidebar, navigation, and the prompt and page choices surviving page switches."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests import apptest_utils
from tests.apptest_utils import APP, PREDICTING_PAGES, READING_PAGES, assert_clean

pytestmark = pytest.mark.real_model

PROMPT = "The cat sat on the mat because it was tired."
TIMEOUT = 90  # the first run loads the model; 2 shared cores
PAGES = READING_PAGES


def open_page(page: str, prompt: str | None = None) -> AppTest:
    return apptest_utils.open_page(PAGES[page][0], prompt, TIMEOUT)


def test_shell_defaults_sidebar_and_navigation():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    assert_clean(at)
    assert at.title[0].value == "LLM inference explorer"
    assert at.text_area(key="_w_prompt").value == PROMPT
    assert at.toggle(key="_w_chat").value is False and at.number_input(key="_w_seed").value == 0
    facts = " ".join(c.value for c in at.sidebar.caption)
    for word in ("SmolLM2-135M-Instruct", "cpu", "float32", "Parameters"):
        assert word in facts


def test_prompt_and_page_choices_survive_page_switches():
    at = open_page("attention", prompt="Tom fed his dog because it was hungry.")
    at.slider(key="_w_att_layer").set_value(5).run()
    at.switch_page("pages/tokenization.py").run()
    assert_clean(at)
    assert at.text_area(key="_w_prompt").value == "Tom fed his dog because it was hungry."
    at.switch_page("pages/embeddings.py").run()
    at.switch_page("pages/attention.py").run()
    assert_clean(at)
    assert at.slider(key="_w_att_layer").value == 5
    assert at.session_state["prompt"] == "Tom fed his dog because it was hungry."


def _forced(at: AppTest) -> dict[str, bool]:
    """Each slider's ``set_value``: whether this run makes the browser take the run's value over its own."""
    return {w.key: w.proto.set_value for w in at.slider if w.key}


def test_a_rerun_never_moves_a_slider_the_browser_already_shows():
    """A bound slider's value goes to the browser with ``set_value`` only when the browser would not show the stored
    value otherwise (first drawn, changed by the app, a page switch), never on a plain rerun: a forced value undid
    the key presses made while that run was on its way (four arrow presses from T = 0.8 ended at 0.85)."""
    at = apptest_utils.open_page(PREDICTING_PAGES["logits"][0], "The cat sat on the")
    assert _forced(at)["_w_temperature"]  # first drawn on this page: the browser must take the stored value
    at.slider(key="_w_temperature").set_value(1.3).run()
    assert not any(_forced(at).values()), _forced(at)  # the browser's own values: nothing forced back
    at.run()
    assert not any(_forced(at).values()), _forced(at)
    at.switch_page(PREDICTING_PAGES["sampling"][0]).run()  # Streamlit drops a widget's value on a page switch: restored
    assert _forced(at)["_w_temperature"] and at.slider(key="_w_temperature").value == 1.3
    at.run()
    assert not any(_forced(at).values()), _forced(at)
    at.session_state["temperature"] = 0.4  # the app (a link, the teacher) changed it: the browser must take it
    at.run()
    assert _forced(at)["_w_temperature"] and at.slider(key="_w_temperature").value == 0.4


def test_overview_opens_by_its_name_with_a_link_s_settings():
    """``/overview?prompt=...`` (a link to the overview by its name, as every other page is linked) opens the
    Overview with the link's prompt, not "Page not found": the name is registered beside "/" (``navigation.build``).
    AppTest opens a page by the script hash its url path gives, as the browser's request does."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["prompt"] = "Tom fed his dog because it was hungry."
    at.switch_page("pages/overview.py").run()  # before the first run: the page named "overview"
    assert_clean(at)
    registered = {info.get("url_pathname"): info.get("script_path") for info in at._registered_pages.values()}
    assert registered[""].endswith("pages/overview.py") and registered["overview"].endswith("pages/overview.py")
    assert at.title[0].value == "LLM inference explorer"
    assert at.session_state["prompt"] == "Tom fed his dog because it was hungry."
    at.switch_page("pages/tokenization.py").run()
    at.switch_page("pages/overview.py").run()  # back by name, in the same session
    assert_clean(at)
    assert at.title[0].value == "LLM inference explorer"
