"""The Generation & KV cache page's link to the engine: the per-session stepper, cache views, live timings.

Owns the session's ``Stepper`` (one request: its own KV cache, never shared), turning a
typed forced token into an id, the numpy views of one layer's cache, the cache's size
from the config formula checked against the real tensors, and the cached-vs-uncached
measurement. Figures live in ``ui/figures/generation.py``.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import streamlit as st

from inference import Engine, PromptError, SamplingParams, Stepper, StepperError, TokenizerError

from ui.shell import models
from ui.session import state
from ui.compute import token_text
from ui.compute.tokens import tokenize
from ui.figures.tokens import visible
from ui.shell.resources import engine_for

STEPPER_KEY = "gen_stepper"
TIMING_KEY = "gen_timing"
ERROR_KEY = "gen_error"  # the last action's error message, shown once
PENDING_KEY = "gen_pending"  # a long action the page runs with a progress bar
MAX_STEPS = 128  # tokens one walk may generate (bounds the per-session cache)
MAX_RUN = 32  # tokens one "Run N" press may add
MAX_TIMING_TOKENS = 64  # tokens the cached-vs-uncached measurement may generate
# A walk restored from a shared link (``ui.url_state``): its length, forced tokens and the prompt it was for.
REPLAY_KEY, REPLAY_FORCED_KEY, REPLAY_PROMPT_KEY = "gen_replay_steps", "gen_replay_forced", "gen_replay_prompt"


def current_stepper(engine: Engine, prompt_ids: list[int], params: SamplingParams) -> Stepper:
    """This session's stepper for the prompt: a new one when the prompt changed, new settings otherwise.

    A new stepper first replays the walk of a shared link, if one is waiting for the
    session's current prompt: the same steps, forced tokens included (sampled steps are
    deterministic per (seed, step)).
    """
    stepper: Stepper | None = st.session_state.get(STEPPER_KEY)
    if stepper is None or stepper.prompt_ids != prompt_ids or stepper.engine is not engine:
        stepper = Stepper(engine, prompt_ids, params, max_steps=MAX_STEPS)
        st.session_state[STEPPER_KEY] = stepper
        steps = st.session_state.pop(REPLAY_KEY, 0)
        forced = st.session_state.pop(REPLAY_FORCED_KEY, {})
        if steps and st.session_state.pop(REPLAY_PROMPT_KEY, None) == (state.get(state.PROMPT), state.get(state.CHAT)):
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
            st.session_state[ERROR_KEY] = f"The link's walk stopped at step {index}: {error}"
            break


def parse_forced(text: str, steps: int) -> tuple[dict[int, int], str | None]:
    """A link's forced tokens, ``"step:id,step:id"`` with step < ``steps``; bad pairs dropped with a note."""
    forced: dict[int, int] = {}
    dropped = 0
    for pair in filter(None, text.split(",")[: MAX_STEPS + 1] if len(text) <= 4096 else ["x"]):
        index, _, token = pair.partition(":")
        if index.isdigit() and token.isdigit() and int(index) < steps and len(token) <= 9:
            forced[int(index)] = int(token)
        else:
            dropped += 1
    note = f"`forced`: {dropped} malformed or out-of-walk entr{'ies' if dropped > 1 else 'y'} ignored." if dropped else None
    return forced, note


def walk_query() -> dict[str, str]:
    """The ``step`` / ``forced`` link parameters for this session's walk (or for a replay still waiting)."""
    stepper: Stepper | None = st.session_state.get(STEPPER_KEY)
    if stepper is not None and stepper.prompt_ids == _current_prompt_ids():
        steps, forced = len(stepper.chosen), {c.index: c.token_id for c in stepper.chosen if c.forced}
    elif stepper is None:
        steps, forced = st.session_state.get(REPLAY_KEY, 0), st.session_state.get(REPLAY_FORCED_KEY, {})
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


@st.cache_data(max_entries=4, show_spinner=False)
def greedy_example(model: str, prompt: str, n_tokens: int = 3) -> list[str]:
    """The first ``n_tokens`` greedy tokens of ``model`` after ``prompt`` (display texts), for the page's intro."""
    engine = engine_for(model)
    done = engine.complete(prompt, SamplingParams(temperature=0.0, max_new_tokens=n_tokens))
    return token_text.token_texts(engine.tokenizer, done.token_ids)


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


def parse_forced_token(engine: Engine, text: str) -> int:
    """The id of ``text`` if it is exactly one token; otherwise a ``StepperError`` saying what it is."""
    if text == "":
        raise StepperError("type the token to force, e.g. ' under' (mind the leading space)")
    ids = engine.tokenizer.encode(text, special_tokens=False)
    if len(ids) != 1:
        shown = repr(text) if len(text) <= 40 else repr(text[:40]) + "…"  # a pasted page stays a short message
        if not ids:
            raise StepperError(f"{shown} gives no token")
        pieces = token_text.token_texts(engine.tokenizer, ids[:5])  # <0xNN> for pieces of a character
        listed = ", ".join(f"'{p}'" for p in pieces) + (", …" if len(ids) > 5 else "")
        typable = next((p for p in pieces if "<0x" not in p), None)
        example = (f"e.g. '{typable}'" if typable else
                   "and a piece of a character (<0xNN>) cannot be typed alone: rewind and let the model choose it")
        raise StepperError(f"{shown} is {len(ids):,} tokens ({listed}), not one: force a single token, {example}")
    return ids[0]


@dataclass(frozen=True)
class CacheView:
    keys: np.ndarray  # (n_kv, positions, head_dim)
    values: np.ndarray  # (n_kv, positions, head_dim)
    labels: list[str]  # the token at each cached position
    new_rows: list[int]  # positions written by the last forward
    first_position: int = 0  # the position of the first row shown


def cache_view(stepper: Stepper, layer: int, max_positions: int = 96) -> CacheView:
    """One layer's cached K and V as numpy (the last ``max_positions`` positions at most)."""
    keys, values = stepper.cache.layer_views(layer)  # (1, n_kv, L, hd) each
    length = keys.shape[2]
    first = max(0, length - max_positions)
    ids = stepper.ids[:length]
    last = stepper.chosen[-1] if stepper.chosen else None
    new = range(last.cache_len_before, last.cache_len_after) if last else range(0)
    return CacheView(
        keys=keys[0, :, first:].float().cpu().numpy(), values=values[0, :, first:].float().cpu().numpy(),
        labels=token_text.token_texts(stepper.engine.tokenizer, ids[first:]),
        new_rows=[p - first for p in new if p >= first], first_position=first,
    )


@dataclass(frozen=True)
class CacheBytes:
    formula_now: int  # 2 x layers x KV heads x head dim x bytes x tokens
    tensors_now: int  # the same, measured on the cache's actual tensors
    allocated: int  # the preallocated capacity of this request's cache
    full_context: int  # the formula at the model's whole context length
    formula: str
    per_token: int  # the formula for one position
    rolling_now: int | None  # what a rolling buffer for the local layers would hold now (None: no local layers)
    rolling_full_context: int | None  # ... and at the whole context


def cache_bytes(stepper: Stepper) -> CacheBytes:
    config, cache = stepper.engine.config, stepper.cache
    element = cache.keys.element_size()
    return CacheBytes(
        formula_now=config.kv_cache_bytes(len(cache), element),
        tensors_now=cache.used_bytes,
        allocated=cache.nbytes,
        full_context=config.kv_cache_bytes(config.max_seq_len, element),
        formula=(f"2 × {config.n_layers} layers × {config.n_kv_heads} KV heads × {config.head_dim} dims × "
                 f"{element} bytes × tokens"),
        per_token=config.kv_cache_bytes(1, element),
        rolling_now=config.rolling_kv_cache_bytes(len(cache), element) if config.local_layers else None,
        rolling_full_context=(config.rolling_kv_cache_bytes(config.max_seq_len, element)
                              if config.local_layers else None),
    )


@dataclass
class CacheTiming:
    context_lengths: list[int]
    cached_ms: list[float]
    uncached_ms: list[float]
    max_abs_diff: float  # largest |logit difference| between the two paths over every step
    prefill_ms: float
    prompt_tokens: int


def measure_cache_timing(engine: Engine, prompt_ids: list[int], n_tokens: int,
                         progress: Callable[[float, str], None] | None = None, repeats: int = 2) -> CacheTiming:
    """Greedy tokens one at a time, timing a cached decode step and a full recompute at each length.

    Each is timed ``repeats`` times and the fastest kept (the cached step is re-run by truncating
    the cache by one position), so a moment of machine noise does not show as a spike.
    """
    n_tokens = min(n_tokens, MAX_TIMING_TOKENS)
    cache = engine.new_cache(len(prompt_ids) + n_tokens)
    started = time.perf_counter()
    logits = engine.prefill(prompt_ids, cache)
    prefill_ms = 1000 * (time.perf_counter() - started)
    ids = list(prompt_ids)
    result = CacheTiming([], [], [], 0.0, prefill_ms, len(prompt_ids))
    for step in range(n_tokens):
        ids.append(int(logits.argmax()))
        cached, uncached = [], []
        for attempt in range(repeats):
            if attempt:
                cache.truncate(len(cache) - 1)  # forget the position, to time the same step again
            started = time.perf_counter()
            logits = engine.decode_step(ids[-1], cache)
            cached.append(1000 * (time.perf_counter() - started))
            started = time.perf_counter()
            full = engine.recompute_last(ids)  # what generate(use_cache=False) runs each step
            uncached.append(1000 * (time.perf_counter() - started))
        result.cached_ms.append(min(cached))
        result.uncached_ms.append(min(uncached))
        result.context_lengths.append(len(ids))
        result.max_abs_diff = max(result.max_abs_diff, float((full - logits).abs().max()))
        if progress:
            progress((step + 1) / n_tokens, f"{len(ids)} tokens")
    return result


def chosen_texts(stepper: Stepper) -> list[str]:
    """The display text of every chosen token (``ui.token_text``: pieces of a character as <0xNN>)."""
    return token_text.token_texts(stepper.engine.tokenizer, [c.token_id for c in stepper.chosen])


def candidate_texts(stepper: Stepper, candidates: list) -> list[str]:
    """The display text of a step's top candidates, in the same notation."""
    return token_text.token_texts(stepper.engine.tokenizer, [c.token_id for c in candidates])


def steps_table(stepper: Stepper) -> list[dict]:
    """One row per chosen token for ``st.dataframe``."""
    texts = chosen_texts(stepper)
    return [{
        "step": c.index, "token": visible(text), "forced": c.forced, "p (T=1)": round(c.probability, 4),
        "phase": c.phase, "ms": round(1000 * c.seconds, 1), "cache reused": c.cache_len_before,
        "top 3": " | ".join(f"{visible(t)} {p.probability:.0%}"
                            for t, p in zip(candidate_texts(stepper, c.top[:3]), c.top[:3])),
    } for c, text in zip(stepper.chosen, texts)]


def act(action: str) -> None:
    """Button callback: apply ``action`` to this session's stepper with the values of its inputs.

    Runs before the page redraws, so the page always shows the state after the action.
    A refused action leaves the stepper as it was and leaves a message for the page.
    """
    stepper: Stepper | None = st.session_state.get(STEPPER_KEY)
    if stepper is None:
        return
    try:
        if action == "next":
            stepper.step()  # after the end: says so ("rewind to continue") rather than doing nothing
        elif action == "run":  # long: the page runs it with a progress bar
            st.session_state[PENDING_KEY] = "run"
        elif action == "measure":
            st.session_state[PENDING_KEY] = "measure"
        elif action == "rewind":
            stepper.rewind(int(st.session_state.get("gen_rewind_to", 0)))
        elif action == "restart":  # presenter mode's one-click rewind to the prompt
            stepper.rewind(0)
        elif action == "force":
            stepper.step(forced_token=parse_forced_token(stepper.engine, st.session_state.get("gen_force", "")))
    except StepperError as error:
        st.session_state[ERROR_KEY] = str(error)
