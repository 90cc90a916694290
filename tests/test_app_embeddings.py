"""AppTest for the Embeddings page: its widgets (found by key) re-render it."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests import apptest_utils
from tests.apptest_utils import READING_PAGES, assert_clean, chart

pytestmark = pytest.mark.real_model

TIMEOUT = 90  # the first run loads the model; 2 shared cores
PAGES = READING_PAGES


def open_page(page: str, prompt: str | None = None) -> AppTest:
    return apptest_utils.open_page(PAGES[page][0], prompt, TIMEOUT)


def test_embeddings_widgets_rerender():
    at = open_page("embeddings")
    first = chart(at, "embedding_neighbours")["layout"]["title"]["text"]
    at.selectbox(key="_w_emb_token").set_value(5).run()  # " mat"
    assert_clean(at)
    assert chart(at, "embedding_neighbours")["layout"]["title"]["text"] != first
    at.text_input(key="_w_emb_words").input("cat, banana, kiwifruit").run()
    assert_clean(at)
    names = [t["name"] for t in chart(at, "embedding_pca")["data"]]
    assert names == ["prompt", "word set"]
