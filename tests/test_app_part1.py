"""AppTest for the shell and the part-1 pages: each page runs, its main chart holds real data of the
right shape, widgets (found by key) re-render it, the shared prompt survives page switches, and bad
input gives a clear message instead of an exception."""
from __future__ import annotations


import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from tests import apptest_utils
from tests.apptest_utils import APP, assert_clean, chart, plotly_array

pytestmark = pytest.mark.real_model

TIMEOUT = 90  # the first run loads the model; 2 shared cores
PROMPT = "The cat sat on the mat because it was tired."
N_TOKENS = 11  # of PROMPT, for the embedded SmolLM2 tokenizer
PAGES = {
    "tokenization": ("pages/1_tokenization.py", "Tokenization", "token_ids_chart"),
    "embeddings": ("pages/2_embeddings.py", "Embeddings", "embedding_heatmap"),
    "attention": ("pages/3_attention.py", "Attention", "attention_heatmap"),
}






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


@pytest.mark.parametrize("page", list(PAGES))
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


def test_attention_widgets_and_guided_buttons():
    at = open_page("attention")
    assert at.selectbox(key="_w_att_query").value == 7  # " it" is the default query
    first = plotly_array(chart(at, "attention_heatmap")["data"][0]["z"])
    at.slider(key="_w_att_layer").set_value(13).run()
    assert_clean(at)
    assert not np.allclose(np.nan_to_num(first), np.nan_to_num(plotly_array(chart(at, "attention_heatmap")["data"][0]["z"])))
    at.button(key="att_show_cat").click().run()
    assert_clean(at)
    steps = chart(at, "score_steps")
    probs = plotly_array(steps["data"][3]["y"])
    assert probs.shape == (N_TOKENS,) and abs(probs.sum() - 1) < 1e-4 and probs[1] == probs.max()  # "it" -> "cat"


def test_prompt_and_page_choices_survive_page_switches():
    at = open_page("attention", prompt="Tom fed his dog because it was hungry.")
    at.slider(key="_w_att_layer").set_value(5).run()
    at.switch_page("pages/1_tokenization.py").run()
    assert_clean(at)
    assert at.text_area(key="_w_prompt").value == "Tom fed his dog because it was hungry."
    at.switch_page("pages/2_embeddings.py").run()
    at.switch_page("pages/3_attention.py").run()
    assert_clean(at)
    assert at.slider(key="_w_att_layer").value == 5
    assert at.session_state["prompt"] == "Tom fed his dog because it was hungry."


@pytest.mark.parametrize("page", list(PAGES))
@pytest.mark.parametrize("prompt", ["", "   \n\t "])
def test_empty_prompt_gives_a_clear_error(page, prompt):
    at = open_page(page, prompt=prompt)
    assert_clean(at)
    assert at.error and "empty" in at.error[0].value
    assert at.text_area(key="_w_prompt").value == prompt  # the user's text is kept


@pytest.mark.parametrize("page", list(PAGES))
def test_prompt_beyond_the_context_gives_a_clear_error(page):
    at = open_page(page, prompt="🙂" * 5000)  # within the box's 20,000 characters, > 8,192 tokens
    assert_clean(at)
    assert at.error and "context" in at.error[0].value


@pytest.mark.parametrize("page,shown", [("tokenization", "first 512"), ("embeddings", "first 64"),
                                        ("attention", "first 128")])
def test_long_prompt_says_what_is_shown(page, shown):
    at = open_page(page, prompt="The cat sat on the mat. " * 100)  # 600 tokens
    assert_clean(at)
    assert any(shown in w.value for w in at.warning), [w.value for w in at.warning]


@pytest.mark.parametrize("page", list(PAGES))
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
    at.switch_page("pages/1_tokenization.py").run()
    for key, value in (("_w_tok_id_word", ""), ("_w_tok_compare", ""), ("_w_tok_bpe_word", " "),
                       ("_w_tok_bpe_word", "🙂"), ("_w_tok_bpe_word", "")):
        at.text_input(key=key).input(value).run()
        assert_clean(at)
    at.text_area(key="_w_tok_corpus").input("").run()
    assert_clean(at)
