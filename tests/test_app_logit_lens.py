"""AppTest for the Transformer block & logit lens page: the answer forming, the block slider, a long prompt."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests import apptest_utils
from tests.apptest_utils import PREDICTING_PAGES, assert_clean, chart, plotly_array, texts

pytestmark = pytest.mark.real_model

TIMEOUT = 120  # the first run loads the model; continuations run on 2 shared cores
PROMPT = "The cat sat"  # the example prompt: the model continues it with " on"
PAGES = PREDICTING_PAGES


def open_page(page: str, prompt: str | None = PROMPT) -> AppTest:
    return apptest_utils.open_page(PAGES[page][0], prompt, TIMEOUT)


def test_logit_lens_page_shows_the_answer_forming():
    at = open_page("logit_lens")
    assert_clean(at)
    assert at.title[0].value == PAGES["logit_lens"][1]
    lens = chart(at, "logit_lens")["data"][0]
    z = plotly_array(lens["z"])
    assert z.shape == (31, 3)  # embeddings + 30 blocks, 3 prompt positions
    assert lens["text"][-1][-1] == "·on"  # the last layer's guess after "sat" is the model's answer
    assert "At the last position the final answer is **·on**" in texts(at.markdown)
    first = chart(at, "block_diagram")["layout"]["annotations"][0]["text"]
    assert "3 × 576" in first
    at.slider(key="_w_block_layer").set_value(20).run()
    assert_clean(at)
    assert chart(at, "block_diagram")["layout"]["annotations"][0]["text"] != first


def test_long_prompt_says_what_the_lens_traces():
    at = open_page("logit_lens", prompt="The cat sat on the mat. " * 30)  # 180 tokens
    assert_clean(at)
    assert "traces only its last 128" in texts(at.warning)
    assert plotly_array(chart(at, "logit_lens")["data"][0]["z"]).shape == (31, 16)
    assert "Showing the last 16 of 128 positions." in texts(at.caption)
