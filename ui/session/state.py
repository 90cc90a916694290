"""Shared session state: the documented keys, their defaults, and the widget binding pattern.

The prompt, the seed and the chat-template toggle live under plain (non-widget) keys,
so they survive page switches. Streamlit drops a widget's own key when that widget is
not rendered on the current page; each widget therefore gets a shadow key
(``_w_<key>``) that is refilled from the plain key before the widget is drawn and
copied back by ``on_change``. Use ``bind`` for any widget whose value should persist:

    st.text_area("Prompt", **state.bind(state.PROMPT))
"""
from __future__ import annotations

from typing import Any

import streamlit as st

PROMPT = "prompt"  # str: the text every page runs through the model
SEED = "seed"  # int: seed for anything random (sampling, projections)
CHAT = "chat"  # bool: wrap the prompt in the model's chat template
PRESENTER = "presenter"  # bool: projector layout (bigger text and charts, fewer controls, Previous/Next)

DEFAULT_PROMPT = "The cat sat on the mat because it was tired."
DEFAULTS: dict[str, Any] = {PROMPT: DEFAULT_PROMPT, SEED: 0, CHAT: False, PRESENTER: False}

_WIDGET_PREFIX = "_w_"


def init(defaults: dict[str, Any] | None = None) -> None:
    """Set every shared key that is not yet in the session to its default."""
    for key, value in (defaults or DEFAULTS).items():
        st.session_state.setdefault(key, value)


def get(key: str) -> Any:
    """The current value of a shared key (its default if never set)."""
    if key not in st.session_state:
        st.session_state[key] = DEFAULTS.get(key)
    return st.session_state[key]


def widget_key(key: str) -> str:
    return _WIDGET_PREFIX + key


def _store(key: str) -> None:
    st.session_state[key] = st.session_state[widget_key(key)]


def bind(key: str, default: Any = None, options: list | range | None = None) -> dict[str, Any]:
    """Keyword arguments (``key``, ``on_change``, ``args``) that tie a widget to ``key``.

    The widget shows the stored value and writes changes back, so the value outlives
    pages where the widget is not drawn. ``default`` is used the first time only, and
    again whenever the stored value is no longer among ``options`` (say, a token
    position after the prompt got shorter).
    """
    if key not in st.session_state or (options is not None and st.session_state[key] not in options):
        st.session_state[key] = DEFAULTS.get(key, default)
    st.session_state[widget_key(key)] = st.session_state[key]
    return {"key": widget_key(key), "on_change": _store, "args": (key,)}


def set_values(values: dict[str, Any]) -> None:
    """Set shared keys from a callback (e.g. a button's ``on_click``); bound widgets show them on the rerun."""
    for key, value in values.items():
        st.session_state[key] = value
