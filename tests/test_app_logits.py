"""AppTest for the Logits & temperature page: greedy pick, temperature and sampler-filter widgets, no extra forward."""

from __future__ import annotations

import numpy as np
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


def test_logits_page_marks_greedy_and_the_temperature_slider_reshapes():
    at = open_page("logits")
    assert_clean(at)
    bar = chart(at, "logits_bar")
    assert bar["layout"]["xaxis"]["ticktext"][0] == "·on" and bar["layout"]["annotations"][0]["text"] == "greedy pick"
    before = plotly_array(chart(at, "probability_overlay")["data"][1]["y"])
    at.slider(key="_w_temperature").set_value(0.3).run()
    assert_clean(at)
    after = plotly_array(chart(at, "probability_overlay")["data"][1]["y"])
    assert after[0] > before[0] and after[-1] < before[-1]  # T < 1 sharpens
    assert at.metric[0].label == "Entropy at T = 0.3"
    at.slider(key="_w_temperature").set_value(1.5).run()
    flatter = plotly_array(chart(at, "probability_overlay")["data"][1]["y"])
    assert flatter[0] < before[0]  # T > 1 flattens


def test_temperature_and_top_p_moves_do_not_rerun_the_model(monkeypatch):
    """Logits are cached: a slider move reruns only the sampler's stages, never a forward pass.
    (How long such a rerun takes is measured by scripts/bench_slider.py, not asserted here.)"""
    from inference.model.transformer import Transformer

    at = open_page("logits")
    forwards = []
    original = Transformer.forward
    monkeypatch.setattr(Transformer, "forward", lambda self, *a, **k: forwards.append(1) or original(self, *a, **k))
    for temperature in (0.35, 0.65, 0.95, 1.25):
        at.slider(key="_w_temperature").set_value(temperature).run()
    at.slider(key="_w_top_p").set_value(0.5).run()
    assert_clean(at)
    assert forwards == []
    at.text_area(key="_w_prompt").input("The dog sat").run()  # the counter does see a real forward
    assert forwards


def test_top_p_change_cuts_tokens():
    at = open_page("logits")
    at.slider(key="_w_top_p").set_value(0.5).run()
    assert_clean(at)
    stages = chart(at, "stage_figure")["data"][0]
    assert "top-p · 2 left, 49,150 removed" in stages["y"]  # " on" 0.39 + " at" 0.34 reach 0.5 at T = 0.8
    assert any(
        label.startswith("softmax(logits ÷ T) · nothing removed") for label in stages["y"]
    )  # softmax cuts nothing
    assert "**2 tokens can be drawn**" in texts(at.markdown) and "The filters removed 49,150." in texts(at.markdown)


def test_tiny_top_p_leaves_one_token():
    at = open_page("logits")
    at.slider(key="_w_top_p").set_value(0.01).run()
    assert_clean(at)
    assert "one token can be drawn" in texts(at.markdown) and "·on" in texts(at.markdown)


def test_temperature_zero_is_explained_as_greedy():
    at = open_page("logits")
    at.slider(key="_w_temperature").set_value(0.0).run()
    assert_clean(at)
    assert "greedy" in texts(at.info)
    assert len(chart(at, "stage_figure")["data"][0]["y"]) == 2  # softmax, final: nothing else runs


def test_top_k_above_the_vocabulary_is_clamped_with_a_note():
    at = open_page("logits")
    at.number_input(key="_w_top_k").set_value(100_000).run()
    assert_clean(at)
    assert "clamped to 49,152" in texts(at.info)


def test_chat_template_runs_through_the_logits_page():
    at = open_page("logits")
    at.toggle(key="_w_chat").set_value(True).run()
    assert_clean(at)
    assert "(3 tokens)" not in texts(at.markdown)  # the template's tokens come first


def test_repetition_penalty_and_min_p_run_through_the_engine_stages():
    at = open_page("logits", prompt="1, 2, 3, 1, 2, 3, 1, 2,")
    first = plotly_array(chart(at, "stage_figure")["data"][0]["z"])
    at.slider(key="_w_repetition_penalty").set_value(2.0).run()
    at.slider(key="_w_min_p").set_value(0.2).run()
    assert_clean(at)
    stages = chart(at, "stage_figure")["data"][0]
    assert not np.allclose(np.nan_to_num(first[0]), np.nan_to_num(plotly_array(stages["z"])[0]))  # penalised softmax
    assert any(label.startswith("min-p · ") for label in stages["y"])
    assert "the repetition penalty lowers tokens already in the prompt" in texts(at.markdown)  # greedy moved


def test_the_example_button_is_undone_with_one_click():
    at = open_page("logits", prompt="Bank is closed on Sunday")
    at.toggle(key="_w_chat").set_value(True).run()
    at.button(key="use_example_prompt_logits").click().run()
    assert_clean(at)
    assert at.session_state["prompt"] == "The cat sat" and at.session_state["chat"] is False
    assert at.text_area(key="_w_prompt").value == "The cat sat"
    at.button(key="restore_prompt_logits").click().run()  # the same place, now "Back to your prompt"
    assert_clean(at)
    assert at.session_state["prompt"] == "Bank is closed on Sunday" and at.session_state["chat"] is True
    assert at.text_area(key="_w_prompt").value == "Bank is closed on Sunday"
    assert at.button(key="use_example_prompt_logits")  # and the example is offered again
