"""The example-prompt button of the Logits and Sampling pages, undoable with one click.

"Use the example" puts "The cat sat" (chat template off) into the shared prompt and keeps
what was there before; while the example is still the prompt, the button offers that
previous prompt back instead. Nothing the user typed is ever lost.
"""

from __future__ import annotations

import streamlit as st

from ui.common import state

EXAMPLE_PROMPT = "The cat sat"  # the model continues it with " on" (tests/test_compute_logits.py checks it)


def use_example() -> None:
    """Button callback: remember the current prompt and chat flag, then put the example in."""
    current = (state.get(state.PROMPT), bool(state.get(state.CHAT)))
    if current != (EXAMPLE_PROMPT, False):
        st.session_state[state.EXAMPLE_PREVIOUS] = current
    state.set_values({state.PROMPT: EXAMPLE_PROMPT, state.CHAT: False})


def restore_previous() -> None:
    """Button callback: put back the prompt (and chat flag) the example replaced."""
    previous = st.session_state.pop(state.EXAMPLE_PREVIOUS, None)
    if previous is not None:
        state.set_values({state.PROMPT: previous[0], state.CHAT: previous[1]})


def _short(text: str, limit: int = 40) -> str:
    one_line = " ".join(text.split()) or repr(text)
    return one_line if len(one_line) <= limit else one_line[: limit - 1] + "…"


def render(page: str) -> None:
    """The button for ``page`` (its key: ``use_example_prompt_<page>``, or ``restore_prompt_<page>`` to undo)."""
    previous = st.session_state.get(state.EXAMPLE_PREVIOUS)
    showing_example = (state.get(state.PROMPT), bool(state.get(state.CHAT))) == (EXAMPLE_PROMPT, False)
    if showing_example and previous is not None:
        st.button(
            f"Back to your prompt: “{_short(previous[0])}”",
            key=state.restore_prompt_button(page),
            icon=":material/undo:",
            on_click=restore_previous,
        )
    else:
        st.button(f"Use the example: “{EXAMPLE_PROMPT}”", key=state.use_example_button(page), on_click=use_example)
