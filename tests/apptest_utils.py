"""Shared helpers for the AppTest suites: open a page through app.py, read a chart, decode Plotly arrays."""
from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")
TIMEOUT = 120  # the first run loads the model; 2 shared cores


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
