"""Shared helpers for the AppTest suites: the pages, open a page through app.py, read a chart, decode Plotly arrays."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")
TIMEOUT = 120  # the first run loads the model; 2 shared cores

# The pages the per-page suites open by short name.
READING_PAGES = {  # short name: (script, title, main chart key)
    "tokenization": ("pages/tokenization.py", "Tokenization", "token_ids_chart"),
    "embeddings": ("pages/embeddings.py", "Embeddings", "embedding_heatmap"),
    "attention": ("pages/attention.py", "Attention", "attention_heatmap"),
}
PREDICTING_PAGES = {  # short name: (script, title)
    "logit_lens": ("pages/logit_lens.py", "Transformer block & logit lens"),
    "logits": ("pages/logits.py", "Logits & temperature"),
    "sampling": ("pages/sampling.py", "Sampling"),
}
N_TOKENS = 11  # of the shell's default prompt, for the embedded SmolLM2 tokenizer


def open_page(script: str, prompt: str | None = None, timeout: float = TIMEOUT) -> AppTest:
    """Run app.py, optionally type ``prompt`` into the shared sidebar, then switch to ``script``."""
    at = AppTest.from_file(APP, default_timeout=timeout)
    at.run()
    if prompt is not None:
        at.text_area(key="_w_prompt").input(prompt)
        at.run()
    at.switch_page(script)
    at.run()
    return at


def open_link(script: str, query: dict[str, str], timeout: float = TIMEOUT) -> AppTest:
    """Open ``script`` as a shared link does: app.py runs with the link's query first, then the page; no exception."""
    at = AppTest.from_file(APP, default_timeout=timeout)
    at.query_params.update(query)
    at.run()
    at.switch_page(script)
    at.run()
    assert_clean(at)
    return at


def chart(at: AppTest, key: str) -> dict:
    """The Plotly figure (as JSON) of the chart drawn with ``key``."""
    for element in at.get("plotly_chart"):
        if element.proto.id.endswith("-" + key):
            return json.loads(element.proto.spec)
    raise AssertionError(f"no chart with key {key!r}")


def plotly_array(value) -> np.ndarray:
    """A Plotly JSON array: a plain list or a typed one ({'dtype', 'bdata', 'shape'})."""
    if isinstance(value, dict) and "bdata" in value:
        data = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        if isinstance(shape, str):
            shape = [int(s) for s in shape.split(",")]
        return data.reshape(shape) if shape else data
    return np.asarray(value, dtype=object if value and isinstance(value[0], str) else float)


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def texts(elements) -> str:
    return " ".join(e.value for e in elements)
