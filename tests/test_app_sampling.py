"""AppTest for the Sampling page: seeded draws, the 1,000-draw fit, settings surviving page switches, T = 0."""

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


def _draw_line(at: AppTest) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("Draw **#"))


def test_sampling_page_draw_again_steps_the_seeded_stream():
    at = open_page("sampling")
    assert_clean(at)
    toy = chart(at, "toy_ranges")
    assert "made-up example" in toy["layout"]["title"]["text"] and "not the model" in toy["layout"]["title"]["text"]
    assert [round(base, 2) for base in plotly_array(toy["data"][0]["base"])] == [0.0, 0.1, 0.3]
    first = _draw_line(at)
    assert first.startswith("Draw **#0** with seed **0**")
    at.button(key="draw_again").click().run()
    assert_clean(at)
    second = _draw_line(at)
    assert second.startswith("Draw **#1**") and second.split("u = ")[1] != first.split("u = ")[1]
    at.run()  # a plain rerun keeps the draw
    assert _draw_line(at) == second
    history = texts(at.caption)
    assert "Draws so far: #0 " in history and " | #1 " in history
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
    assert list(ranges[0]["customdata"]) == [" on"] and plotly_array(ranges[0]["x"]) == pytest.approx([1.0])


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


def test_sampling_page_at_temperature_zero_draws_nothing():
    at = open_page("sampling")
    at.slider(key="_w_temperature").set_value(0.0).run()
    at.button(key="draw_1000").click().run()
    assert_clean(at)
    assert "greedy" in texts(at.info) and "T = 0: no u is drawn" in texts(at.markdown)
    assert "Only one token can be drawn" in texts(at.markdown)
    assert "greedy draws none" in chart(at, "toy_ranges")["layout"]["title"]["text"]
