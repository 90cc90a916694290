"""AppTest for the Generation & KV cache page: step, run N, rewind, force (and bad forced tokens), the cache view."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.apptest_utils import chart, open_page

pytestmark = pytest.mark.real_model


def open_generation(prompt: str | None = None) -> AppTest:
    at = open_page("pages/generation.py", prompt)
    assert not at.exception, [e.value for e in at.exception]
    return at


def stepper(at: AppTest):
    return at.session_state["gen_stepper"]


def test_step_run_rewind_force():
    at = open_generation("The cat sat")
    at.slider(key="_w_temperature").set_value(0.0).run()  # greedy: " on a cliff, ..."
    at.button(key="gen_next").click().run()
    assert [c.text for c in stepper(at).chosen] == [" on"]
    at.number_input(key="gen_n").set_value(3).run()
    at.button(key="gen_run").click().run()
    assert len(stepper(at).chosen) == 4 and len(stepper(at).cache) == 3 + 3
    assert chart(at, "gen_kv_heatmaps")["data"][0]["type"] == "heatmap"
    at.number_input(key="gen_rewind_to").set_value(1).run()
    at.button(key="gen_rewind").click().run()
    assert len(stepper(at).chosen) == 1
    at.text_input(key="gen_force").input(" under").run()
    at.button(key="gen_force_go").click().run()
    chosen = stepper(at).chosen
    assert [c.text for c in chosen] == [" on", " under"] and chosen[1].forced
    assert chosen[1].cache_len_before == 3  # the prompt's positions were reused for the branch
    assert not at.exception and not at.error


def test_bad_forced_token_and_rewind_past_the_prompt_keep_state():
    at = open_generation("The cat sat")
    at.button(key="gen_next").click().run()
    before = [c.token_id for c in stepper(at).chosen]
    at.text_input(key="gen_force").input(" under the table").run()
    at.button(key="gen_force_go").click().run()
    assert "not one" in at.error[0].value
    at.number_input(key="gen_rewind_to").set_value(-2).run()
    at.button(key="gen_rewind").click().run()
    assert any("past the prompt" in e.value for e in at.error)
    assert [c.token_id for c in stepper(at).chosen] == before
    assert not at.exception


def test_cached_vs_uncached_measurement():
    at = open_generation("The cat sat")
    at.number_input(key="gen_timing_n").set_value(4).run()
    at.button(key="gen_measure").click().run()
    figure = chart(at, "gen_timing_chart")
    assert [trace["name"] for trace in figure["data"]] == ["no cache: recompute all", "KV cache: one new position"]
    timing = at.session_state["gen_timing"][1]
    assert timing.context_lengths == [4, 5, 6, 7] and timing.max_abs_diff < 1e-3
    assert not at.exception


def test_empty_prompt_is_a_clear_message():
    at = open_generation("")
    assert at.error and "empty" in at.error[0].value
    assert not at.exception
