"""AppTest for the part-2 pages (Transformer block & logit lens, Logits & temperature, Sampling):
each page runs on the real model, its charts hold real data, widgets found by key re-render them,
a temperature move stays fast, settings survive page switches, and bad input gives a clear
message, never an exception element."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from tests import apptest_utils
from tests.apptest_utils import assert_clean, chart, plotly_array

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.real_model

TIMEOUT = 120  # the first run loads the model; continuations run on 2 shared cores
PROMPT = "The cat sat"  # seed 004: the model should continue with " on"
PAGES = {
    "logit_lens": ("pages/4_logit_lens.py", "Transformer block & logit lens"),
    "logits": ("pages/5_logits.py", "Logits & temperature"),
    "sampling": ("pages/6_sampling.py", "Sampling"),
}






def open_page(page: str, prompt: str | None = PROMPT) -> AppTest:
    return apptest_utils.open_page(PAGES[page][0], prompt, TIMEOUT)




def texts(elements) -> str:
    return " ".join(e.value for e in elements)


# -- Transformer block & logit lens ----------------------------------------------------------
def test_logit_lens_page_shows_the_answer_forming():
    at = open_page("logit_lens")
    assert_clean(at)
    assert at.title[0].value == PAGES["logit_lens"][1]
    lens = chart(at, "logit_lens")["data"][0]
    z = plotly_array(lens["z"])
    assert z.shape == (31, 3)  # embeddings + 30 blocks, 3 prompt positions
    assert lens["text"][-1][-1] == "·on"  # the last layer's guess after "sat" is the model's answer
    assert "is the top guess at the last position from" in texts(at.markdown)
    first = chart(at, "block_diagram")["layout"]["annotations"][0]["text"]
    assert "3 × 576" in first
    at.slider(key="_w_block_layer").set_value(20).run()
    assert_clean(at)
    assert chart(at, "block_diagram")["layout"]["annotations"][0]["text"] != first


# -- Logits & temperature -------------------------------------------------------------------
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
    from inference.model import Transformer

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
    assert "top-p · 2 left" in stages["y"]  # " on" 0.39 + " at" 0.34 reach 0.5 at T = 0.8
    assert "2 tokens survive" in texts(at.markdown)


def test_tiny_top_p_leaves_one_token():
    at = open_page("logits")
    at.slider(key="_w_top_p").set_value(0.01).run()
    assert_clean(at)
    assert "one token survives" in texts(at.markdown) and "·on" in texts(at.markdown)


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


# -- Sampling -------------------------------------------------------------------------------
def _draw_line(at: AppTest) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("Draw **#"))


def test_sampling_page_draw_again_steps_the_seeded_stream():
    at = open_page("sampling")
    assert_clean(at)
    toy = chart(at, "toy_ranges")
    assert "TOY" in toy["layout"]["title"]["text"]
    assert [round(d["base"][0], 2) for d in toy["data"]] == [0.0, 0.1, 0.3]
    first = _draw_line(at)
    assert first.startswith("Draw **#0** with seed **0**")
    at.button(key="draw_again").click().run()
    assert_clean(at)
    second = _draw_line(at)
    assert second.startswith("Draw **#1**") and second.split("u = ")[1] != first.split("u = ")[1]
    at.run()  # a plain rerun keeps the draw
    assert _draw_line(at) == second
    history = texts(at.caption)
    assert "Draws so far: #0 " in history and " · #1 " in history
    at.button(key="draw_reset").click().run()
    assert _draw_line(at) == first  # reproducible from the seed


def test_draw_1000_times_fits_the_probabilities():
    at = open_page("sampling")
    at.button(key="draw_1000").click().run()
    assert_clean(at)
    histogram = chart(at, "draw_histogram")
    expected, observed = plotly_array(histogram["data"][0]["y"]), plotly_array(histogram["data"][1]["y"])
    assert observed.sum() == pytest.approx(1.0) and expected.sum() == pytest.approx(1.0, abs=1e-4)
    assert "consistent with" in texts(at.markdown) and "**not**" not in texts(at.markdown)


def test_sampling_page_temperature_and_top_p_changes():
    at = open_page("sampling")
    at.slider(key="_w_temperature").set_value(1.2).run()
    assert_clean(at)
    assert chart(at, "greedy_vs_sampled")["data"][0]["y"][1] == "sampled (T = 1.2)"
    at.slider(key="_w_top_p").set_value(0.01).run()
    assert_clean(at)
    ranges = chart(at, "real_ranges")["data"]
    assert len(ranges) == 1 and ranges[0]["name"] == " on" and ranges[0]["x"][0] == pytest.approx(1.0)


def test_two_settings_mark_the_first_divergence():
    at = open_page("sampling")
    strips = chart(at, "two_settings")
    assert strips["data"][0]["y"] == ["A: T = 0.3", "B: T = 1.5"]
    rows = strips["data"][0]["text"]
    split = next(i for i, (a, b) in enumerate(zip(*rows)) if a != b)
    assert strips["layout"]["shapes"][0]["x0"] == split - 0.5
    assert f"first differ at generated token #{split}" in texts(at.markdown)


def test_sampling_settings_survive_page_switches():
    at = open_page("logits")
    at.slider(key="_w_temperature").set_value(1.3).run()
    at.slider(key="_w_top_p").set_value(0.9).run()
    at.switch_page(PAGES["sampling"][0]).run()
    assert_clean(at)
    assert at.slider(key="_w_temperature").value == 1.3 and at.slider(key="_w_top_p").value == 0.9
    at.switch_page(PAGES["logit_lens"][0]).run()
    at.switch_page(PAGES["logits"][0]).run()
    assert at.slider(key="_w_temperature").value == 1.3


# -- bad input ------------------------------------------------------------------------------
@pytest.mark.parametrize("page", list(PAGES))
def test_empty_prompt_gives_a_clear_error(page):
    at = open_page(page, prompt="   ")
    assert_clean(at)
    assert at.error and "empty" in at.error[0].value


def _page_alone(page_script: str, seed) -> AppTest:
    """The page without the shell's sidebar (whose number box cannot hold text), given a shared seed."""

    def script(page_path: str, seed_value) -> None:
        import runpy

        import streamlit as st

        from ui import navigation, state

        state.init()
        st.session_state[state.SEED] = seed_value
        st.session_state[state.PROMPT] = "The cat sat"
        navigation._in_app.set(True)
        runpy.run_path(page_path)

    return AppTest.from_function(script, args=(str(ROOT / page_script), seed), default_timeout=TIMEOUT)


@pytest.mark.parametrize("page", ["logits", "sampling"])
def test_a_seed_that_is_not_a_number_gives_a_clear_message(page):
    at = _page_alone(PAGES[page][0], "abc").run()
    assert_clean(at)
    assert "seed must be a whole number" in texts(at.error)


@pytest.mark.parametrize("page", list(PAGES))
def test_prompt_beyond_the_context_gives_a_clear_error(page):
    at = open_page(page, prompt="🙂" * 5000)  # > 8,192 tokens
    assert_clean(at)
    assert at.error and "context" in at.error[0].value


def test_long_prompt_says_what_the_lens_traces():
    at = open_page("logit_lens", prompt="The cat sat on the mat. " * 30)  # 180 tokens
    assert_clean(at)
    assert "traces only its last 128" in texts(at.warning)
    assert plotly_array(chart(at, "logit_lens")["data"][0]["z"]).shape == (31, 16)
    assert "Showing the last 16 of 128 positions." in texts(at.caption)


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


def test_sampling_page_at_temperature_zero_draws_nothing():
    at = open_page("sampling")
    at.slider(key="_w_temperature").set_value(0.0).run()
    at.button(key="draw_1000").click().run()
    assert_clean(at)
    assert "greedy" in texts(at.info) and "T = 0: no u is drawn" in texts(at.markdown)
    assert "Only one token can be drawn" in texts(at.markdown)
    assert "greedy draws none" in chart(at, "toy_ranges")["layout"]["title"]["text"]
