"""Deep links whose numbers are Unicode digits that are not decimals ('²', '①', '٣'), NaN or ±inf: every page
named in issue 38 draws with a note (or ignores the item), never a traceback. On a tiny random Llama offered
through the allowlist, so each page run takes milliseconds."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.apptest_utils import APP, assert_clean, texts
from tests.tiny_models import save_folder, tiny_llama

TIMEOUT = 120
BAD = "²"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, tokenizer_folder):
    folder = save_folder(tiny_llama(), tmp_path_factory.mktemp("tiny-numbers"), tokenizer_folder)
    patch = pytest.MonkeyPatch()
    patch.setenv("LLM_EXPLORER_MODELS", f"tiny-numbers={folder}")
    yield "tiny-numbers"
    patch.undo()


def open_with(query: dict[str, str], script: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update(query)
    at.run()
    at.switch_page(script)
    at.run()
    assert_clean(at)
    return at


@pytest.mark.parametrize("bad", [BAD, "①", "٣", "1²", "nan", "-inf", "1e999"])
def test_experiment_lists_with_unicode_digits_are_left_out_with_a_note(tiny, bad):
    query = {
        "model": tiny,
        "prompt": "The cat sat on the mat",
        "off": f"{bad},1.{bad},{bad}.0,1.2",
        "cut": f"{bad}-1,3-{bad},4-1",
        "mlp_off": f"{bad},1",
        "head_scale": bad,
        "mlp_scale": bad,
        "layer": bad,
        "seed": bad,
    }
    at = open_with(query, "pages/experiments.py")
    assert at.session_state["exp_heads"] == ((1, 2),)
    assert at.session_state["exp_edges"] == ((4, 1),)
    assert at.session_state["exp_mlps"] == (1,)
    notes = texts(at.warning)
    for name in ("`off`: left out", "`cut`: left out", "`mlp_off`: left out", "`seed` ignored", "`layer` ignored"):
        assert name in notes, (name, notes)
    assert bad not in texts(at.error)  # the page's own messages (the tiny model's patching) are about prompts


@pytest.mark.parametrize("bad", [BAD, "①", "٣"])
def test_generation_forced_tokens_with_unicode_digits_are_dropped_with_a_note(tiny, bad):
    at = open_with(
        {"model": tiny, "prompt": "The cat sat", "step": "2", "forced": f"0:{bad},{bad}:5,1:17"}, "pages/generation.py"
    )
    stepper = at.session_state["gen_stepper"]
    assert len(stepper.chosen) == 2 and stepper.chosen[1].forced and stepper.chosen[1].token_id == 17
    assert "`forced`: 2 malformed" in texts(at.warning)
    at = open_with({"model": tiny, "prompt": "The cat sat", "step": bad, "forced": "0:5"}, "pages/generation.py")
    assert "`step` ignored" in texts(at.warning)


@pytest.mark.parametrize("name", ["SLOTS", "THREADS"])
def test_a_setting_with_unicode_digits_stops_the_app_with_its_reason(tiny, name, monkeypatch):
    monkeypatch.setenv(f"LLM_EXPLORER_{name}", BAD)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert_clean(at)
    assert f"LLM_EXPLORER_{name}='{BAD}': use a whole number" in texts(at.error)
