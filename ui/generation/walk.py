"""The Generation page's controller: this session's walk through generation and what its buttons do.

Owns the session's ``Stepper`` (one request: its own KV cache, never shared; made through the
model's client and kept under ``state.GEN_STEPPER``), replaying the walk a shared link carries,
the link's ``step`` / ``forced`` parameters for the walk, the buttons' callback (``act``) and
"Run N" (``run_steps``). The walk's numbers and texts are ``ui/generation/compute.py``.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from inference.api import PromptError, SamplingParams, Stepper, StepperError, TokenizerError
from ui.common import models, state
from ui.common.resources import client_for
from ui.generation.compute import MAX_STEPS, parse_forced_token
from ui.tokenization.compute import tokenize


def current_stepper(model: str, prompt_ids: list[int], params: SamplingParams) -> Stepper:
    """This session's stepper for the prompt: a new one when the prompt changed, new settings otherwise.

    A new stepper first replays the walk of a shared link, if one is waiting for the
    session's current prompt: the same steps, forced tokens included (sampled steps are
    deterministic per (seed, step)).
    """
    client = client_for(model)
    stepper: Stepper | None = st.session_state.get(state.GEN_STEPPER)
    if stepper is None or stepper.prompt_ids != prompt_ids or not client.owns(stepper):
        stepper = client.stepper(prompt_ids, params, max_steps=MAX_STEPS)
        st.session_state[state.GEN_STEPPER] = stepper
        steps = st.session_state.pop(state.GEN_REPLAY_STEPS, 0)
        forced = st.session_state.pop(state.GEN_REPLAY_FORCED, {})
        if steps and st.session_state.pop(state.GEN_REPLAY_PROMPT, None) == (
            state.get(state.PROMPT),
            state.get(state.CHAT),
        ):
            replay(stepper, steps, forced)
    stepper.params = params  # settings changed mid-walk apply from the next step on
    return stepper


def replay(stepper: Stepper, steps: int, forced: dict[int, int]) -> None:
    """Take ``steps`` steps, forcing ``forced[i]`` at step i; stops early (with a message) where a step is refused."""
    for index in range(steps):
        if stepper.done:
            break
        try:
            stepper.step(forced_token=forced.get(index))
        except StepperError as error:
            st.session_state[state.GEN_ERROR] = f"The link's walk stopped at step {index}: {error}"
            break


def walk_query() -> dict[str, str]:
    """The ``step`` / ``forced`` link parameters for this session's walk (or for a replay still waiting)."""
    stepper: Stepper | None = st.session_state.get(state.GEN_STEPPER)
    if stepper is not None and stepper.prompt_ids == _current_prompt_ids():
        steps, forced = len(stepper.chosen), {c.index: c.token_id for c in stepper.chosen if c.forced}
    elif stepper is None:
        steps, forced = (
            st.session_state.get(state.GEN_REPLAY_STEPS, 0),
            st.session_state.get(state.GEN_REPLAY_FORCED, {}),
        )
    else:  # a walk for another prompt: the page starts a new one when next opened
        steps, forced = 0, {}
    query = {"step": str(steps)} if steps else {}
    if forced:
        query["forced"] = ",".join(f"{index}:{token}" for index, token in sorted(forced.items()))
    return query


def _current_prompt_ids() -> list[int] | None:
    try:
        return tokenize(models.current(), state.get(state.PROMPT), state.get(state.CHAT)).ids
    except (PromptError, TokenizerError):
        return None


def run_steps(stepper: Stepper, count: int, progress: Callable[[float, str], None] | None = None) -> int:
    """Take up to ``count`` steps (stopping at end of text or the limit); returns how many were taken."""
    taken = 0
    for taken in range(1, count + 1):
        if stepper.done:
            return taken - 1
        chosen = stepper.step()
        if progress:
            progress(taken / count, f"step {chosen.index}: {chosen.text!r}")
    return taken


def act(action: str) -> None:
    """Button callback: apply ``action`` to this session's stepper with the values of its inputs.

    Runs before the page redraws, so the page always shows the state after the action.
    A refused action leaves the stepper as it was and leaves a message for the page.
    """
    stepper: Stepper | None = st.session_state.get(state.GEN_STEPPER)
    if stepper is None:
        return
    try:
        if action == "next":
            stepper.step()  # after the end: says so ("rewind to continue") rather than doing nothing
        elif action == "run":  # long: the page runs it with a progress bar
            st.session_state[state.GEN_PENDING] = "run"
        elif action == "measure":
            st.session_state[state.GEN_PENDING] = "measure"
        elif action == "rewind":
            stepper.rewind(int(st.session_state.get(state.GEN_REWIND_TO, 0)))
        elif action == "restart":  # presenter mode's one-click rewind to the prompt
            stepper.rewind(0)
        elif action == "force":
            tokenizer = client_for(models.current()).tokenizer
            stepper.step(forced_token=parse_forced_token(tokenizer, st.session_state.get(state.GEN_FORCE, "")))
    except StepperError as error:
        st.session_state[state.GEN_ERROR] = str(error)
