"""AppTest for the Quantization page: a real stored block, bytes against the file, every mode on the prompt."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.apptest_utils import assert_clean, chart, open_page, plotly_array

pytestmark = pytest.mark.real_model


@pytest.fixture(scope="module")
def page():
    at = open_page("pages/quantization.py", prompt="The cat sat", timeout=300)
    assert_clean(at)
    assert not [c for c in at.get("plotly_chart") if c.proto.id.endswith("quant_modes")]  # not before the button
    at.button(key="quant_compare").click().run(timeout=300)  # the other modes load on request
    assert_clean(at)
    return at


def test_the_block_is_the_files_own(page):
    from gguf import GGMLQuantizationType, GGUFReader
    from gguf.quants import dequantize

    from inference.model.gguf import default_gguf_path

    figure = chart(page, "quant_block")["data"]
    codes, decoded = plotly_array(figure[0]["y"]), plotly_array(figure[1]["y"])
    tensor = next(t for t in GGUFReader(default_gguf_path()).tensors if t.name == "blk.0.attn_q.weight")
    expected = dequantize(np.asarray(tensor.data)[:1], GGMLQuantizationType.Q4_1)[0, :32]
    assert np.array_equal(decoded.astype(np.float32), expected)
    assert codes.min() >= 0 and codes.max() <= 15
    text = " ".join(m.value for m in page.markdown)
    assert "**20 bytes** — 5.00 bits per weight" in text and "bit for bit" in text
    assert (
        "**Q4_1**: blocks of 32 weights share one scale d and one offset m; each weight keeps a four-bit code" in text
        and "**Q8_0**" in text
    )


def test_bytes_and_modes_are_computed_from_the_model(page):
    text = " ".join(m.value for m in page.markdown)
    assert "**134,515,008** weights" in text and "Q4_1" in text
    bytes_chart = chart(page, "quant_bytes")["data"]
    per_token = plotly_array(bytes_chart[0]["y"])
    assert per_token[0] == pytest.approx(4 * 134_515_584 / 1e6)  # float32: every weight plus one row, 4 bytes each
    modes = chart(page, "quant_modes")["data"]
    assert [trace["name"] for trace in modes][:3] == ["float32", "bfloat16", "as stored (gguf)"]
    table = page.table[0].value
    assert table.iloc[0]["top-1 agreement with float32"] == "100.0%"  # float32 against itself
    sentence = next(m.value for m in page.markdown if "closest to float32" in m.value)
    closest = re.search(r"the mode closest to float32 is \*\*([^*]+)\*\*", sentence).group(1)
    kls = {row["weights"]: float(row["mean KL from float32 (nats)"]) for _, row in table.iloc[1:].iterrows()}
    assert closest == min(kls, key=kls.get)


def test_speed_is_measured_on_request(page):
    page.button(key="quant_measure").click().run()
    assert_clean(page)
    speeds = plotly_array(chart(page, "quant_speed")["data"][0]["y"])
    assert len(speeds) == 5 and (speeds > 0).all()
    sentence = next(m.value for m in page.markdown if "decodes fastest" in m.value)
    fastest = re.search(r"\*\*([^*]+)\*\* decodes fastest, ([0-9.]+) tok/s", sentence)
    labels = chart(page, "quant_speed")["data"][0]["x"]
    assert fastest.group(1) == labels[int(np.argmax(speeds))]


def test_every_page_runs_on_the_files_blocks(gguf_engine, monkeypatch):
    """A server started with LLM_EXPLORER_QUANT=gguf: every page of the story runs, and the sidebar says in words
    what runs (the engine is the session's gguf one, so no page loads a third copy)."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from tests.apptest_utils import APP
    from ui.common import resources
    from ui.common.navigation import PAGES

    real = resources.load_engine
    monkeypatch.setenv("LLM_EXPLORER_QUANT", "gguf")
    monkeypatch.setattr(
        resources,
        "load_engine",
        lambda model=None, **kwargs: (
            gguf_engine
            if model is None and kwargs.get("quant") == "gguf"  # the default
            else real(model=model, **kwargs)
        ),
    )
    st.cache_resource.clear()
    st.cache_data.clear()
    try:
        at = AppTest.from_file(APP, default_timeout=300)
        at.run()
        for spec in PAGES:
            if spec.url_path == "compare":  # a second model (Gemma on its own blocks: tests/test_engine_gemma.py)
                continue
            at.switch_page(spec.script)
            at.run()
            assert_clean(at)
            assert not at.error, (spec.url_path, [e.value for e in at.error])
        sidebar = " ".join(c.value for c in at.sidebar.caption)
        # the kernel follows the CPU (inference/model/kernels.py): the file's 4-bit groups on AVX-512 and (q8dot) AVX2,
        # 8-bit rows from them else
        assert ("4-bit groups (Q4_1, exact)" in sidebar and "as stored in the file" in sidebar) or (
            "8-bit rows (re-quantized from Q4_1)" in sidebar and "from the file's blocks" in sidebar
        )
        assert "kernel: " in sidebar
    finally:
        st.cache_resource.clear()
        st.cache_data.clear()


def test_the_weights_mode_reaches_every_gguf_model_and_a_float_folder_runs_dense(tokenizer_folder, monkeypatch):
    """LLM_EXPLORER_QUANT=gguf: the embedded default and a packaged model named by its name (Gemma 3 270M, a GGUF)
    both run on their file's blocks; a float checkpoint's folder has none to keep, and runs dense."""
    from inference.api import GEMMA3_270M, is_installed
    from ui.common import resources

    monkeypatch.setenv("LLM_EXPLORER_QUANT", "gguf")
    monkeypatch.setenv("LLM_EXPLORER_MODELS", f"float-folder={tokenizer_folder}")
    assert resources.engine_settings("SmolLM2-135M-Instruct")["quant"] == "gguf"
    assert resources.engine_settings("float-folder")["quant"] is None
    if is_installed(GEMMA3_270M):
        assert resources.engine_settings(GEMMA3_270M)["quant"] == "gguf"
