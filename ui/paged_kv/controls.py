"""The Paged KV cache page's controls: the scenario, the block size and the step on screen, bound to session keys.

The three live under plain session keys (``ui.common.state``), so a link can carry them
(``ui.session.links``: ``scenario``, ``block_size``, ``paged_step``) and they outlive a page switch.
A step past the replay's end (an old link, another scenario) is clamped to the last step, with a note.
"""

from __future__ import annotations

import streamlit as st

from ui.common import state
from ui.paged_kv import claims
from ui.paged_kv.compute import BLOCK_SIZE_RANGE, DEFAULT_BLOCK_SIZE, DEFAULT_SCENARIO, SCENARIOS


def scenario_and_block_size() -> tuple[str, int]:
    """The chosen scenario's key and block size."""
    left, right = st.columns([2, 1])
    scenario = left.selectbox(
        "Scenario",
        list(SCENARIOS),
        format_func=lambda key: SCENARIOS[key].title,
        **state.bind(state.PAGED_SCENARIO, DEFAULT_SCENARIO, options=list(SCENARIOS)),
    )
    block_size = right.slider(
        "Block size (positions per block)",
        *BLOCK_SIZE_RANGE,
        help="vLLM uses 16. Smaller blocks waste less in a sequence's last block but need longer tables.",
        **state.bind(
            state.PAGED_BLOCK_SIZE, DEFAULT_BLOCK_SIZE, options=range(BLOCK_SIZE_RANGE[0], BLOCK_SIZE_RANGE[1] + 1)
        ),
    )
    return scenario, int(block_size)


def step(last: int) -> tuple[int, str | None]:
    """The step on screen (0..``last``), and a note when a stored step had to be clamped."""
    asked = int(state.get(state.PAGED_STEP) or 0)
    note = claims.step_note(asked, last)
    if note:
        st.session_state[state.PAGED_STEP] = last
    if last == 0:
        st.session_state[state.PAGED_STEP] = 0
        return 0, note
    chosen = st.slider(
        "Scheduler step (replay)",
        0,
        last,
        help="Each step is one forward of the real model: a prefill of newly admitted prompts, or one decode "
        "position for every running sequence.",
        **state.bind(state.PAGED_STEP, 0, options=range(last + 1)),
    )
    return int(chosen), note
