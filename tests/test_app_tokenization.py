"""AppTest for the Tokenization page: its widgets (found by key) re-render it."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests import apptest_utils
from tests.apptest_utils import N_TOKENS, READING_PAGES, assert_clean, chart, plotly_array

pytestmark = pytest.mark.real_model

TIMEOUT = 90  # the first run loads the model; 2 shared cores
PAGES = READING_PAGES


def open_page(page: str, prompt: str | None = None) -> AppTest:
    return apptest_utils.open_page(PAGES[page][0], prompt, TIMEOUT)


def test_tokenization_widgets_rerender():
    at = open_page("tokenization")
    before = len(at.markdown)
    at.text_input(key="_w_tok_bpe_word").input("banana").run()
    assert_clean(at)
    assert at.session_state["tok_bpe_word"] == "banana" and len(at.markdown) != before
    at.slider(key="_w_tok_vocab").set_value(270).run()
    assert_clean(at)
    assert any("14 merges learned" in c.value for c in at.caption)
    at.toggle(key="_w_chat").set_value(True).run()
    assert_clean(at)
    assert len(plotly_array(chart(at, "token_ids_chart")["data"][0]["y"])) > N_TOKENS  # the template's tokens


def test_characters_are_counted_as_seen_and_nothing_is_cut_unsaid():
    """A family emoji is one character (five code points, said apart); the raw-bytes column says when it shows only
    the first of the bytes; an invisible token (a no-break space) is a visible chip."""
    at = open_page("tokenization", prompt="My 👨\u200d👩\u200d👧 and\u00a0me")
    assert_clean(at)
    characters = next(m for m in at.metric if m.label == "Characters")
    assert characters.value == "11"  # "My", a space, the family, a space, "and", a no-break space, "me"
    assert any("15 Unicode code points" in c.value for c in at.caption)
    assert any("⍽" in m.value for m in at.markdown)  # the no-break space, visible in the chips
    at.text_input(key="_w_tok_compare").input("é" * 150).run()  # 300 bytes
    assert_clean(at)
    assert any("first 200 of the 300 bytes" in c.value for c in at.caption)
