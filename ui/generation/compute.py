"""The Generation & KV cache page's numbers: a walk's tokens and cache as plain data, and live timings.

Owns turning a typed forced token (or a link's forced tokens) into ids, the numpy views of one
layer of a walk's cache, the cache's size from the config formula checked against the real
tensors, the cached-vs-uncached measurement, and the display texts of a walk's tokens, all read
through the model's client. The session's walk itself (its ``Stepper`` and the buttons' actions)
is ``ui/generation/walk.py``; figures live in ``ui/generation/figures.py``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

import streamlit as st

from inference.api import (
    CacheBytes,
    CacheTiming,
    CacheView,
    SamplingParams,
    Stepper,
    StepperError,
    Tokenizer,
    number_text,
)
from inference.api import cache_bytes as read_cache_bytes
from inference.api import cache_view as read_cache_view
from ui.common import format as fmt
from ui.common import token_text
from ui.common.resources import client_for
from ui.common.token_text import visible

MAX_STEPS = 128  # tokens one walk may generate (bounds the per-session cache)
MAX_RUN = 32  # tokens one "Run N" press may add
MAX_TIMING_TOKENS = 64  # tokens the cached-vs-uncached measurement may generate
MAX_TOKEN_ID = 999_999_999  # a forced token id in a link (nine digits; the stepper checks it against the vocabulary)


def parse_forced(text: str, steps: int) -> tuple[dict[int, int], str | None]:
    """A link's forced tokens, ``"step:id,step:id"`` with step < ``steps``; bad pairs dropped with a note."""
    forced: dict[int, int] = {}
    dropped = 0
    for pair in filter(None, text.split(",")[: MAX_STEPS + 1] if len(text) <= 4096 else ["x"]):
        try:
            index, token = number_text.whole_pair(pair, ":", low=0, high=MAX_TOKEN_ID)
        except number_text.NumberError:
            dropped += 1
            continue
        if index < steps:
            forced[index] = token
        else:
            dropped += 1
    note = (
        f"`forced`: {dropped} malformed or out-of-walk entr{'ies' if dropped > 1 else 'y'} ignored."
        if dropped
        else None
    )
    return forced, note


@st.cache_data(max_entries=4, show_spinner=False)
def greedy_example(model: str, prompt: str | tuple[int, ...], n_tokens: int = 3) -> list[str]:
    """The first ``n_tokens`` greedy tokens of ``model`` after ``prompt`` (text, or the ids the page reads: the
    learner's prompt, in the chat template when it is on), display texts, for the page's intro."""
    client = client_for(model)
    done = client.complete(
        prompt if isinstance(prompt, str) else list(prompt), SamplingParams(temperature=0.0, max_new_tokens=n_tokens)
    )
    return token_text.token_texts(client.tokenizer, done.token_ids)


def parse_forced_token(tokenizer: Tokenizer, text: str) -> int:
    """The id of ``text`` if it is exactly one token; otherwise a ``StepperError`` saying what it is."""
    if text == "":
        raise StepperError("type the token to force, e.g. ' under' (mind the leading space)")
    ids = tokenizer.encode(text, special_tokens=False)
    if len(ids) != 1:
        shown = repr(text) if len(text) <= 40 else repr(text[:40]) + "…"  # a pasted page stays a short message
        if not ids:
            raise StepperError(f"{shown} gives no token")
        pieces = token_text.token_texts(tokenizer, ids[:5])  # <0xNN> for pieces of a character
        listed = ", ".join(f"'{p}'" for p in pieces) + (", …" if len(ids) > 5 else "")
        typable = next((p for p in pieces if "<0x" not in p), None)
        example = (
            f"e.g. '{typable}'"
            if typable
            else "and a piece of a character (<0xNN>) cannot be typed alone: rewind and let the model choose it"
        )
        raise StepperError(f"{shown} is {len(ids):,} tokens ({listed}), not one: force a single token, {example}")
    return ids[0]


@dataclass(frozen=True)
class LabelledCache(CacheView):
    """The engine's view of one layer's cache (``CacheView``) with each cached position's token written."""

    labels: list[str] = field(default_factory=list)  # the token at each cached position


def cache_view(model: str, stepper: Stepper, layer: int, max_positions: int = 96) -> LabelledCache:
    """One layer's cached K and V as numpy (the last ``max_positions`` positions at most)."""
    client = client_for(model)
    view = read_cache_view(stepper, layer, max_positions)
    return LabelledCache(**vars(view), labels=token_text.token_texts(client.tokenizer, view.token_ids))


def cache_bytes(model: str, stepper: Stepper) -> CacheBytes:
    """The cache's size from the config's formula, the real tensors' and a rolling buffer's."""
    return read_cache_bytes(stepper)


def measure_cache_timing(
    model: str, prompt_ids: list[int], n_tokens: int, progress: Callable[[float, str], None] | None = None
) -> CacheTiming:
    """Greedy tokens one at a time (at most ``MAX_TIMING_TOKENS``), a cached decode step against a full recompute."""
    return client_for(model).measure_cache_timing(prompt_ids, min(n_tokens, MAX_TIMING_TOKENS), progress)


def machine_load() -> tuple[float | None, int]:
    """(one-minute load average or None where it cannot be read, cores this process may run on): how busy the
    machine was while the walk timed its steps."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return load, cores


def chosen_texts(model: str, stepper: Stepper) -> list[str]:
    """The display text of every chosen token (``ui.common.token_text``: pieces of a character as <0xNN>)."""
    return token_text.token_texts(client_for(model).tokenizer, [c.token_id for c in stepper.chosen])


def candidate_texts(model: str, candidates: list) -> list[str]:
    """The display text of a step's top candidates, in the same notation."""
    return token_text.token_texts(client_for(model).tokenizer, [c.token_id for c in candidates])


def steps_table(model: str, stepper: Stepper) -> list[dict]:
    """One row per chosen token for ``st.dataframe``."""
    texts = chosen_texts(model, stepper)
    return [
        {
            "step": c.index,
            "token": visible(text),
            "forced": c.forced,
            "p (T=1)": fmt.prob(c.probability, 4),
            "phase": c.phase,
            "ms": round(1000 * c.seconds, 1),
            "cache reused": c.cache_len_before,
            "top 3": " | ".join(
                f"{visible(t)} {fmt.pct(p.probability)}" for t, p in zip(candidate_texts(model, c.top[:3]), c.top[:3])
            ),
        }
        for c, text in zip(stepper.chosen, texts)
    ]
