"""The Logits page's temperature playground: a slider and bars that move while you drag, with no server round trip.

The bars are softmax(logits ÷ T) of the prompt's real logits, one frame per step of the app's own
temperature slider, every frame computed on the server (``ui.logits.frames``) and sent once;
the browser only picks the frame under the handle (``playground.js``, a Streamlit ``components.v2``
element: plain SVG, no library, nothing fetched). Releasing the handle sends that frame's T back,
and ``render``'s callback makes it the app's temperature, so the link, the other charts and a class
broadcast follow as for the page's own slider. The browser records each frame's time from the input
event to the paint after it (``window.__temperaturePlayground.frameMs``), which the real-browser
test reads.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import streamlit as st

from ui.logits.frames import Frames

KEY = "logits_playground"  # the element's key; its state holds the T last released
_JS = (Path(__file__).with_suffix(".js")).read_text(encoding="utf-8")
_CSS = """
:host { display: block; width: 100%; }
.tp-root { display: block; width: 100%; font-family: "Source Sans Pro", system-ui, sans-serif; color: rgb(49, 51, 63); }
.tp-head { display: flex; flex-wrap: wrap; gap: 0.5rem 1.5rem; align-items: center; margin-bottom: 0.25rem; }
.tp-head label { display: flex; align-items: center; gap: 0.5rem; font-weight: 600; }
.tp-head input[type=range] { width: min(22rem, 60vw); accent-color: #ff7f0e; }
.tp-readout { font-variant-numeric: tabular-nums; }
.tp-chart { width: 100%; height: auto; max-height: 22rem; }
.tp-grid { stroke: #e6e6e6; }
.tp-tick, .tp-token, .tp-axis { font-size: 12px; fill: #555; }
.tp-bar { fill: #ff7f0e; }
.tp-value { font-size: 12px; fill: #222; }
"""
_component = st.components.v2.component("temperature_playground", js=_JS, css=_CSS)


def released(value: object, low: float, high: float, step: float) -> float | None:
    """The T a release sent, checked (a number inside the slider's range, snapped to its step), or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    if not low <= value <= high:
        return None
    return round(round((value - low) / step) * step + low, 10)


def render(frames: Frames, current: float, on_release: Callable[[float], None]) -> None:
    """Draw the playground at ``current``; a release calls ``on_release`` with the frame's T (checked)."""
    low, high = frames.temperatures[0], frames.temperatures[-1]
    step = frames.temperatures[1] - frames.temperatures[0] if len(frames.temperatures) > 1 else 1.0

    def changed() -> None:
        value = released(getattr(st.session_state.get(KEY), "temperature", None), low, high, step)
        if value is not None:
            on_release(value)

    _component(key=KEY, data=frames.payload(current), on_temperature_change=changed)
