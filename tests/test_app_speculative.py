"""AppTest for the Speculative decoding page: its controls, the token in focus, bad settings, the sweep and the seeds."""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

from tests.apptest_utils import assert_clean, chart, open_page, texts

pytestmark = pytest.mark.real_model

SCRIPT = "pages/speculative.py"


def open_speculative(prompt: str | None = None) -> AppTest:
    at = open_page(SCRIPT, prompt)
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    return at


def shown(at: AppTest) -> str:
    return texts(at.markdown) + " " + texts(at.caption)


def test_the_run_draws_its_steps_and_the_token_in_focus():
    at = open_speculative("The cat sat on the mat. The cat sat on the")
    at.number_input(key="_w_spec_new_tokens").set_value(8).run()
    assert at.title[0].value == "Speculative decoding"
    steps = chart(at, "spec_steps")
    assert steps["data"][0]["type"] == "heatmap"
    # the prompt repeats itself: prompt lookup drafts in the prompt's own forward, and a draft is in focus
    options = at.selectbox(key="_w_spec_focus").options
    assert options and "step 0, draft 1" in options[0]
    assert chart(at, "spec_p_vs_q")["data"][0]["name"] == "p: the model"
    assert "tokens per forward" in shown(at) and "Measured on this machine at" in shown(at)
    assert re.search(r"Identical: all 8 tokens", shown(at)), shown(at)
    metrics = {m.label: m.value for m in at.metric}
    assert "×" in metrics["Speed-up"] and metrics["Tokens per forward"]
    # another drafted token in focus: its own chart
    if len(options) > 1:
        at.selectbox(key="_w_spec_focus").select_index(len(options) - 1).run()
        assert_clean(at)
        assert chart(at, "spec_p_vs_q")


def test_bad_settings_are_the_engines_messages_and_keep_the_settings():
    at = open_speculative("The cat sat")
    at.number_input(key="_w_spec_new_tokens").set_value(4).run()
    at.number_input(key="_w_spec_ngram").set_value(0).run()  # lookup length 0
    assert any("n-gram length must be a whole number >= 1" in e.value for e in at.error), [e.value for e in at.error]
    assert_clean(at)
    at.radio(key="_w_spec_drafter").set_value("self").run()
    n_layers = int(at.number_input(key="_w_spec_depth").max)
    at.number_input(key="_w_spec_depth").set_value(n_layers).run()  # k = the model's depth: out of range
    assert any(f"choose 1..{n_layers - 1} layers, got {n_layers}" in e.value for e in at.error)
    at.number_input(key="_w_spec_depth").set_value(0).run()
    assert any("a whole number of layers >= 1, got 0" in e.value for e in at.error)
    assert_clean(at)
    # nothing was lost: the settings are as left, and a good depth runs
    assert at.session_state["spec_new_tokens"] == 4 and at.session_state["spec_ngram"] == 0
    at.number_input(key="_w_spec_depth").set_value(n_layers // 2).run()
    assert not at.error and chart(at, "spec_steps")
    assert f"the first {n_layers // 2} of {n_layers} layers" in shown(at)


def test_greedy_disables_the_seeds_and_sweep_runs():
    at = open_speculative("The cat sat on the mat because it was tired.")
    at.number_input(key="_w_spec_new_tokens").set_value(4).run()
    at.slider(key="_w_temperature").set_value(0.0).run()
    assert at.button(key="spec_seeds_run").disabled
    assert "Greedy decoding draws nothing at random" in shown(at)
    assert "Identical: all 4 tokens" in shown(at)
    at.button(key="spec_sweep_run").click().run()
    assert_clean(at)
    for name in ("self", "lookup"):
        figure = chart(at, f"spec_sweep_{name}")
        assert [t["type"] for t in figure["data"]] == ["bar", "bar", "bar"]
    assert "Tokens per forward:" in shown(at) and "plain decoding timed before and after" in shown(at)


def test_many_seeds_give_a_chi_square():
    at = open_speculative("The cat sat")
    at.number_input(key="_w_spec_seeds").set_value(50).run()
    at.button(key="spec_seeds_run").click().run()
    assert_clean(at)
    test = next(iter(at.session_state["spec_seeds_for"][-1:]))  # the seeds asked for
    assert test == 50
    figure = chart(at, "spec_seeds_chart")
    assert [t["name"] for t in figure["data"]] == ["plain decoding", "speculative"]
    text = shown(at)
    assert "Over 50 seeds (0…49)" in text and "checked against plain decoding itself on 3 seeds: 3 matched" in text
    assert re.search(r"χ² = [\d.]+ on \d+ degrees? of freedom, p = |nothing is tested", text), text


def test_a_long_prompt_is_decoded_from_its_tail_and_the_page_says_so(monkeypatch, engine):
    """Each whole request of the page reads its prompt again (four to six of them): a prompt over
    ``MAX_PROMPT_TOKENS`` is decoded from its last tokens (after a BOS, ``prompt_tail``), and a warning says which."""
    from inference.api import PromptError
    from ui.speculative import compute as spec

    asked = []

    def recorded(model, ids, params, speculation, repeats=2):
        asked.append(ids)
        raise PromptError("recorded, not run")

    monkeypatch.setattr(spec, "run", recorded)
    prompt = "The cat sat on the mat. " * 180
    n = len(engine.encode_prompt(prompt))  # 1,261 with SmolLM2's tokenizer (no BOS)
    assert n > spec.MAX_PROMPT_TOKENS
    at = open_page(SCRIPT, prompt)
    assert_clean(at)
    assert f"The prompt has {n:,} tokens; this page decodes from its last {spec.MAX_PROMPT_TOKENS:,}" in texts(
        at.warning
    )
    assert [list(ids) for ids in asked] == [engine.encode_prompt(prompt)[-spec.MAX_PROMPT_TOKENS :]]
    assert "Cannot run this request: recorded, not run" in texts(at.error)  # the page stopped at the recorded call
