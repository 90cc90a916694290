"""AppTest for the prompt (and seed) on several pages: main chart, and bad or odd input gets a clear message."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from tests import apptest_utils
from tests.apptest_utils import N_TOKENS, PREDICTING_PAGES, READING_PAGES, assert_clean, chart, plotly_array, texts

pytestmark = pytest.mark.real_model

ROOT = Path(__file__).resolve().parents[1]
READING_TIMEOUT = 90  # the first run loads the model; 2 shared cores
PREDICTING_TIMEOUT = 120  # the first run loads the model; continuations run on 2 shared cores
PAGES = {**READING_PAGES, **PREDICTING_PAGES}


def open_page(page: str, prompt: str | None = None) -> AppTest:
    timeout = READING_TIMEOUT if page in READING_PAGES else PREDICTING_TIMEOUT
    return apptest_utils.open_page(PAGES[page][0], prompt, timeout)


@pytest.mark.parametrize("page", list(READING_PAGES))
def test_page_runs_with_its_main_chart(page):
    at = open_page(page)
    assert_clean(at)
    assert at.title[0].value == PAGES[page][1]
    spec = chart(at, PAGES[page][2])
    data = spec["data"][0]
    if page == "tokenization":
        assert len(plotly_array(data["y"])) == N_TOKENS
    elif page == "embeddings":
        assert plotly_array(data["z"]).shape == (N_TOKENS, 576)
    else:
        z = plotly_array(data["z"])
        assert z.shape == (N_TOKENS, N_TOKENS)
        assert np.isnan(z[0, 1]) and np.allclose(np.nansum(z, axis=1), 1.0, atol=1e-4)
    assert "What to try next" in [h.value for h in at.header]


@pytest.mark.parametrize("page", list(READING_PAGES))
def test_empty_prompt_gives_a_clear_error(page):
    at = open_page(page, prompt="")
    assert_clean(at)
    assert at.error and "empty" in at.error[0].value
    assert at.text_area(key="_w_prompt").value == ""


@pytest.mark.parametrize("page", list(READING_PAGES))
def test_a_single_space_is_a_one_token_prompt(page):
    """Whitespace is text: " " is one token, drawn like any prompt (only "" is empty)."""
    at = open_page(page, prompt=" ")
    assert_clean(at)
    assert not at.error
    assert at.text_area(key="_w_prompt").value == " "
    chart(at, READING_PAGES[page][2])


@pytest.mark.parametrize("page", list(READING_PAGES))
def test_prompt_beyond_the_context_gives_a_clear_error(page):
    at = open_page(page, prompt="🙂" * 5000)  # within the box's 20,000 characters, > 8,192 tokens
    assert_clean(at)
    assert at.error and "context" in at.error[0].value


@pytest.mark.parametrize(
    "page,shown", [("tokenization", "first 512"), ("embeddings", "first 64"), ("attention", "first 128")]
)
def test_long_prompt_says_what_is_shown(page, shown):
    at = open_page(page, prompt="The cat sat on the mat. " * 100)  # 600 tokens
    assert_clean(at)
    assert any(shown in w.value for w in at.warning), [w.value for w in at.warning]


@pytest.mark.parametrize("page", list(READING_PAGES))
def test_emoji_rtl_and_control_characters_are_explained(page):
    at = open_page(page, prompt="Hi 🙂 שלום عربي\x00\x07 end")
    assert_clean(at)
    notes = " ".join(i.value for i in at.info)
    assert "emoji" in notes and "right-to-left" in notes and "U+0000" in notes


def test_tiny_inputs_on_every_widget_stay_clean():
    at = open_page("embeddings", prompt="Hi")
    at.text_input(key="_w_emb_words").input("").run()
    assert_clean(at)
    assert at.info and chart(at, "embedding_pca")
    at.switch_page("pages/tokenization.py").run()
    for key, value in (
        ("_w_tok_id_word", ""),
        ("_w_tok_compare", ""),
        ("_w_tok_bpe_word", " "),
        ("_w_tok_bpe_word", "🙂"),
        ("_w_tok_bpe_word", ""),
    ):
        at.text_input(key=key).input(value).run()
        assert_clean(at)
    at.text_area(key="_w_tok_corpus").input("").run()
    assert_clean(at)


@pytest.mark.parametrize("page", list(PREDICTING_PAGES))
def test_empty_prompt_gives_a_clear_error_predicting_pages(page):
    at = open_page(page, prompt="")
    assert_clean(at)
    assert at.error and "empty" in at.error[0].value


def _page_alone(page_script: str, seed) -> AppTest:
    """The page without the shell's sidebar (whose number box cannot hold text), given a shared seed."""

    def script(page_path: str, seed_value) -> None:
        import runpy

        import streamlit as st

        from ui.common import navigation, state

        state.init()
        st.session_state[state.SEED] = seed_value
        st.session_state[state.PROMPT] = "The cat sat"
        navigation._in_app.set(True)
        runpy.run_path(page_path)

    return AppTest.from_function(script, args=(str(ROOT / page_script), seed), default_timeout=PREDICTING_TIMEOUT)


@pytest.mark.parametrize("page", ["logits", "sampling"])
def test_a_seed_that_is_not_a_number_gives_a_clear_message(page):
    at = _page_alone(PAGES[page][0], "abc").run()
    assert_clean(at)
    assert "seed must be a whole number" in texts(at.error)


@pytest.mark.parametrize("page", list(PREDICTING_PAGES))
def test_prompt_beyond_the_context_gives_a_clear_error_predicting_pages(page):
    at = open_page(page, prompt="🙂" * 5000)  # > 8,192 tokens
    assert_clean(at)
    assert at.error and "context" in at.error[0].value
