"""The pages on Gemma 3 270M: what differs from SmolLM2 is said, and computed from Gemma's own numbers.

The app's engine for ``gemma-3-270m`` is the session's ``gemma_engine`` (no second load).
Every fact checked here is one the page computes from the config, the tokenizer or the
trace. Every page opens on Gemma without an error, warning or exception (``test_every_page_opens_on_gemma``);
the real-browser test (``test_browser.py``) opens the pages whose charts differ most for Gemma.
"""

from __future__ import annotations

import re
from dataclasses import astuple

import numpy as np
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from tests.apptest_utils import APP, assert_clean, chart, plotly_array, texts
from ui.common.navigation import PAGES

GEMMA = "gemma-3-270m"
TIMEOUT = 300


@pytest.fixture
def app_on_gemma(gemma_engine, monkeypatch):
    from ui.common import resources

    real = resources.load_engine
    monkeypatch.setattr(
        resources,
        "load_engine",
        lambda model=None, **kwargs: gemma_engine if model == GEMMA else real(model=model, **kwargs),
    )
    st.cache_resource.clear()
    yield
    st.cache_resource.clear()


def open_gemma(script: str, prompt: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"model": GEMMA, **({"prompt": prompt} if prompt else {})})
    at.run()
    at.switch_page(script)
    at.run()
    assert_clean(at)
    assert not at.error and not at.warning
    return at


@pytest.mark.parametrize("spec", PAGES, ids=[spec.url_path for spec in PAGES])
def test_every_page_opens_on_gemma(spec, app_on_gemma):
    at = open_gemma(spec.script)  # no exception, no error, no warning (the link's model was taken)
    assert f"**Model:** {GEMMA}" in texts(at.sidebar.caption)  # the engine that ran
    assert at.session_state["_page"] == spec.url_path


def test_tokenization_says_sentencepiece_bos_and_byte_fallback(app_on_gemma):
    at = open_gemma("pages/tokenization.py", "The cat sat 𓀀")
    shown = texts(at.markdown)
    assert "SentencePiece-style BPE" in shown and "`▁`" in shown and "262,144" in shown
    assert "adds **`<bos>`** (id 2)" in shown
    assert "becomes 4 tokens: `<0xF0>`, `<0x93>`, `<0x80>`, `<0x80>`" in shown
    entries = next(df.value for df in at.dataframe if "entry as stored" in df.value.columns)
    assert list(entries["entry as stored"][:3]) == ["<bos>", "The", "▁cat"]
    assert "<0xF0>" in texts(at.markdown)  # the prompt's own byte-fallback chips, in the one notation


def test_block_walk_shows_four_norms(app_on_gemma):
    at = open_gemma("pages/logit_lens.py")
    names = [
        a["text"].split("</b>")[0].removeprefix("<b>").replace("<br>", " ")
        for a in chart(at, "block_diagram")["layout"]["annotations"]
        if a.get("text")
    ]
    assert names == [
        "block input",
        "RMSNorm (pre-attention)",
        "attention output",
        "RMSNorm (post-attention)",
        "residual add 1",
        "RMSNorm (pre-MLP)",
        "feed-forward output",
        "RMSNorm (post-MLP)",
        "residual add 2",
    ]
    assert "has **four norms per block**" in texts(at.caption)


def test_attention_past_the_window(app_on_gemma):
    from ui.attention.compute import long_prompt_for_window
    from ui.common.state import DEFAULT_PROMPT

    prompt = long_prompt_for_window(GEMMA, DEFAULT_PROMPT)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"model": GEMMA, "prompt": prompt})
    at.run()
    at.switch_page("pages/attention.py")
    at.run()
    assert_clean(at)
    shown = texts(at.markdown)
    assert "**multi-query attention**: all 4 query heads read one and the same key/value head" in shown
    assert "**15 local layers**" in shown and "(5, 11, 17)" in shown
    assert "outside its window is **0**" in shown
    split = re.findall(r"\*\*([\d.]+)%\*\* on text and ([\d.]+)% on the sink \(layer (\d+)\)", shown)
    assert [int(layer) for _, _, layer in split] == [5, 11, 17]  # the <bos> sink apart from the far-back text
    assert "The sink is the first token, `<bos>`" in shown
    local = plotly_array(chart(at, "window_local")["data"][0]["z"])
    centres = plotly_array(chart(at, "window_local")["data"][0]["x"])
    block = int(centres[1] - centres[0])
    far = int(512 / block) + 1  # pooled cells entirely outside the window
    assert np.isnan(local[far:, 0]).all()  # the local layer's first keys, seen from far queries: drawn masked
    assert (plotly_array(chart(at, "window_global")["data"][0]["z"])[far:, 0] > 0).all()


def test_kv_cache_says_what_a_rolling_buffer_would_save(app_on_gemma):
    at = open_gemma("pages/generation.py")
    at.button(key="gen_next").click().run()
    assert_clean(at)
    shown = texts(at.markdown)
    # fp32: 2 x 18 x 1 x 256 x 4 = 36,864 bytes per token; at 32,768 tokens 1,152 MiB, rolling (3 x 32,768 + 15 x 512)
    assert "36,864 bytes per token" in texts(at.caption)
    assert "would need 207 MiB instead of 1,152 MiB at the full context (82% less)" in shown


def test_side_by_side_runs_the_prompt_through_both(app_on_gemma, engine, gemma_engine):
    at = open_gemma("pages/compare.py")
    prompt = "The cat sat on the mat because it was tired."
    shown = texts(at.markdown)
    for model in (engine, gemma_engine):  # the counts are the models' own tokenizers', of the text alone
        assert (
            f"**{len(model.tokenizer.encode(prompt, special_tokens=False)):,} tokens** for the text's 44 characters"
            in shown
        )
    assert "plus 1 special token the tokenizer adds (`<bos>`), which is not text" in shown  # Gemma's, named apart
    design = next(df.value for df in at.dataframe if "SmolLM2-135M-Instruct" in df.value.columns)
    assert list(design["gemma-3-270m"][:3]) == ["268.1 M", "18", "640"]
    assert "36,864 bytes" in list(design["gemma-3-270m"]) and "46,080 bytes" in list(design["SmolLM2-135M-Instruct"])
    assert [m.label for m in at.metric].count("Decode speed (measured)") == 2
    assert "They agree on the first" in shown or "identical" in shown
    for side in ("left", "right"):
        assert len(plotly_array(chart(at, f"cmp_top_{side}")["data"][0]["x"])) == 10


def test_first_divergence_is_by_characters():
    from ui.compare.compute import first_divergence

    split = first_divergence(" hungry.\nThe cat", " hungry and")
    assert (split.common, split.left_rest, split.right_rest) == (" hungry", ".\nThe cat", " and")
    assert first_divergence("same", "same").identical and first_divergence("", "x").common == ""


@pytest.mark.real_model
@pytest.mark.parametrize("word", ["thecatsatonthemat", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "👨\u200d👩\u200d👧", "é" * 70, "東京タワー"])
def test_the_merge_captions_counts_are_the_words_on_both_models(both_models, word):
    """The caption under "Merge by merge" counts what the replay starts from: bytes for SmolLM2's byte-level BPE;
    for Gemma, code points, with those outside its vocabulary said apart (they start as their bytes)."""
    from ui.tokenization import claims
    from ui.tokenization.compute import MAX_BPE_BYTES, bpe_steps, pre_tokens, replay_start, symbol_unit

    for model in both_models:
        steps = bpe_steps(model, word)
        start = replay_start(steps[0].parts)
        replayed = pre_tokens(model, word)[0][:MAX_BPE_BYTES]  # byte-level: one alphabet character per byte
        assert start.characters == len(replayed), model
        unit = symbol_unit(model)
        caption = claims.merge_replay_caption(
            len(steps) - 1, start.symbols, len(steps[-1].parts), True, False, unit, *astuple(start)[2:]
        )
        assert f" from {len(replayed):,} {unit}" in caption
        if model == "gemma-3-270m" and word[0] == "𝔘":  # five of its letters are not in Gemma's vocabulary
            assert start.fallback_characters > 0
        if start.fallback_characters:
            assert unit == "code points" and f"{start.symbols:,} symbols" in caption
            assert claims.merge_start_label(unit, start.fallback_characters).endswith("as byte tokens)")
