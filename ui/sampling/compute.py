"""Cached draws for the Sampling page: one draw by index, a thousand draws, continuations, goodness of fit.

Owns the seed's random stream as the page sees it. Draw number ``k`` is the engine's
``sample(record=True)`` with draw ``k``'s own generator, seeded from (seed, k) as every
runner seeds its ``k``-th token (``inference.generation.sampling.generator_for``), so "Draw
again" computes draw ``k`` directly and every draw is reproducible from (prompt, settings,
seed, k). The thousand draws reuse the sampler's recorded cumulative ranges with the same
per-draw u values, so draw ``k`` of the histogram is exactly draw ``k`` of "Draw again" (a
test checks this against ``sample`` itself). Continuations come from the model's shared generation server (the same
tokens as ``Engine.generate``). Results are plain numpy/Python.
"""

from __future__ import annotations

import dataclasses
import threading
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np
import streamlit as st

from inference.api import SamplingParams, draw_ids
from ui.common import token_text
from ui.common.lru import SharedLRU
from ui.common.resources import client_for
from ui.common.stats import GoodnessOfFit, chi_square_gof
from ui.logits.compute import prompt_logits, recorded_sample, token_texts


# -- one draw -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Draw:
    """What the engine's sampler did on one draw: u, the ranges it laid out and the token u landed in."""

    draw_index: int
    greedy: bool
    u: float | None  # None for greedy (T = 0): no random number is drawn
    token_id: int
    token_string: str
    probability: float  # of the chosen token in the final renormalised distribution
    chosen_rank: int  # position of the chosen token in the engine's range order (0 = most probable)
    chosen_start: float
    chosen_end: float
    survivors: int  # tokens with a range of their own
    range_ids: list[int]  # the first N survivors, in the engine's order
    range_strings: list[str]
    range_starts: np.ndarray  # (N,)
    range_ends: np.ndarray  # (N,)


@st.cache_data(max_entries=64, show_spinner=False)
def draw(model: str, prompt: str, chat: bool, params: SamplingParams, draw_index: int, top_n: int = 10) -> Draw:
    """Draw number ``draw_index`` of the seeded stream, with the sampler's own recorded numbers (``params``: the
    canonical settings, ``SamplingParams.canonical``)."""
    result = recorded_sample(model, prompt, chat, params, draw_index)
    if params.greedy:  # the sampler records no ranges: the argmax owns all of [0, 1)
        ids, starts, ends = [result.token_id], np.array([0.0]), np.array([1.0])
        rank, survivors, chosen = 0, 1, (0.0, 1.0)
    else:
        order = result.range_token_ids.tolist()
        rank, survivors = order.index(result.token_id), len(order)
        ids = order[:top_n]
        starts = result.range_starts[:top_n]
        ends = result.range_ends[:top_n]
        chosen = (float(result.range_starts[rank]), float(result.range_ends[rank]))
    return Draw(
        draw_index=draw_index,
        greedy=params.greedy,
        u=result.u,
        token_id=result.token_id,
        token_string=token_texts(model, [result.token_id])[0],
        probability=result.probability,
        chosen_rank=rank,
        chosen_start=chosen[0],
        chosen_end=chosen[1],
        survivors=survivors,
        range_ids=ids,
        range_strings=token_texts(model, ids),
        range_starts=starts,
        range_ends=ends,
    )


# -- many draws and how well they fit -----------------------------------------------------


@dataclass(frozen=True)
class Histogram:
    """n draws summarised over the top-N survivors plus one "all other tokens" bucket."""

    n_draws: int
    labels: list[str]  # (N [+ 1],) token texts, then "other (k tokens)" when more survive
    token_ids: list[int]  # (N,)
    observed: np.ndarray  # (N [+ 1],) fraction of draws
    expected: np.ndarray  # (N [+ 1],) the sampler's final probabilities
    gof: GoodnessOfFit  # over every survivor, not just the N shown
    drawn_ids: list[int]  # every draw, in order (draw k = "Draw again" number k)


def draw_token_ids(
    model: str, prompt: str, chat: bool, params: SamplingParams, n: int
) -> tuple[list[int], list[int], np.ndarray]:
    """Draws 0..n-1 of the seeded stream: (drawn ids, the sampler's range order, its final probs in that order).

    The draws come from the engine's ``sample_many``: exactly ``n`` calls of ``sample``
    with draw k's own seeded generator, with the stages and ranges computed once.
    """
    result = recorded_sample(model, prompt, chat, params)
    if params.greedy:
        return [result.token_id] * n, [result.token_id], np.array([1.0])
    cached = prompt_logits(model, prompt, chat)
    drawn = draw_ids(cached.logits, params, n, cached.token_ids)
    order = result.range_token_ids  # (K,)
    probs = result.stage_probs["final"][order].astype(np.float64)
    return drawn, order.tolist(), probs


@st.cache_data(max_entries=64, show_spinner=False)
def draw_history(
    model: str, prompt: str, chat: bool, params: SamplingParams, upto: int, last: int = 12
) -> list[tuple[int, str]]:
    """(draw number, token text) of the last ``last`` draws among draws 0..upto of the seeded stream."""
    drawn, _, _ = draw_token_ids(model, prompt, chat, params, upto + 1)
    first = max(0, upto + 1 - last)
    return list(zip(range(first, upto + 1), token_texts(model, drawn[first:])))


@st.cache_data(max_entries=64, show_spinner="Drawing…")
def draw_many(model: str, prompt: str, chat: bool, params: SamplingParams, n: int = 1000, top_n: int = 10) -> Histogram:
    """Draw ``n`` tokens with the page's settings and compare their frequencies with the exact probabilities."""
    drawn, order, probs = draw_token_ids(model, prompt, chat, params, n)
    slot_of = {token: slot for slot, token in enumerate(order)}
    counts = np.bincount([slot_of[t] for t in drawn], minlength=len(order)).astype(np.float64)  # (K,)
    shown = min(top_n, len(order))
    rest = len(order) - shown
    observed, expected, labels = counts[:shown] / n, probs[:shown], token_texts(model, order[:shown])
    if rest:  # one bucket for the long tail
        observed = np.append(observed, counts[shown:].sum() / n)
        expected = np.append(expected, probs[shown:].sum())
        labels = labels + [f"other ({rest:,} tokens)"]
    return Histogram(n, labels, order[:shown], observed, expected, chi_square_gof(counts, probs), drawn)


# -- continuations ------------------------------------------------------------------------
@dataclass(frozen=True)
class Continuation:
    token_ids: list[int]
    token_strings: list[str]
    probabilities: list[float]  # of each chosen token after all sampling stages
    text: str
    finish_reason: str | None
    max_batch_size: int | None = None  # the most requests (from every session) that shared a forward with it


MAX_STORED_CONTINUATIONS = 1024  # ~1 KB each; a class of 40 sessions moving sliders needs hundreds


class ContinuationStore:
    """A bounded, thread-safe LRU of finished continuations, shared by every session of one model, and the
    ones being generated right now (``claim``): a class following the teacher onto the Sampling page asks
    for the same four continuations at once, and one request per continuation is generated, not one per
    student."""

    def __init__(self, max_entries: int = MAX_STORED_CONTINUATIONS) -> None:
        self.max_entries = max_entries
        self._entries: SharedLRU[Continuation] = SharedLRU(max_entries)
        self._in_flight: dict[tuple, Future] = {}
        self._lock = threading.Lock()  # guards the claims: a key is stored or in flight, checked at one moment

    def get(self, key: tuple) -> Continuation | None:
        return self._entries.get(key)

    def put(self, key: tuple, value: Continuation) -> None:
        self._entries.put(key, value)

    def claim(self, key: tuple) -> tuple[Future, bool]:
        """The future of ``key``'s continuation, and whether the caller must generate it (True: nobody else
        is; the caller then calls ``finish``). A stored one comes back as a finished future."""
        with self._lock:
            stored = self._entries.get(key)
            if stored is not None:
                done: Future = Future()
                done.set_result(stored)
                return done, False
            if key in self._in_flight:
                return self._in_flight[key], False
            future = self._in_flight[key] = Future()
            return future, True

    def finish(self, key: tuple, value: Continuation | None = None, error: BaseException | None = None) -> None:
        """Store a generated continuation and hand it to everyone waiting, or pass them the failure."""
        if value is not None:
            self.put(key, value)
        with self._lock:
            future = self._in_flight.pop(key, None)
        if future is not None and not future.done():
            if value is not None:
                future.set_result(value)
            else:
                future.set_exception(error or RuntimeError("the session generating it stopped"))

    def __len__(self) -> int:
        return len(self._entries)


@st.cache_resource(show_spinner=False, max_entries=4)
def continuation_store(model: str) -> ContinuationStore:
    """The continuations ``model`` has generated for any session (keyed by prompt, chat, settings, length)."""
    return ContinuationStore()


def continuations(
    model: str, prompt: str, chat: bool, keys: list[SamplingParams], n_tokens: int = 10
) -> list[Continuation]:
    """``n_tokens`` tokens for each of the settings ``keys`` (each ``SamplingParams.canonical``), from the shared
    server (the same tokens as ``Engine.generate``).

    The ones neither stored nor being generated for another session are submitted together, so they
    share the server's forwards with each other and with other sessions' requests, instead of queueing
    one after another; the ones another session is generating are waited for. Raises ``BusyError`` when
    the server is full (requests already submitted are cancelled when dropped); a continuation another
    session failed to generate is generated here instead.
    """
    store = continuation_store(model)
    stored = {key: store.get((prompt, chat, key, n_tokens)) for key in keys}
    missing = sum(value is None for value in stored.values())
    if not missing:  # the rerun's usual case: no spinner, no claims
        return [stored[key] for key in keys]
    with st.spinner(f"Generating {missing} continuation{'s' * (missing > 1)}…"):
        claims = {key: store.claim((prompt, chat, key, n_tokens)) for key in dict.fromkeys(keys)}
        mine = [key for key, (_, owner) in claims.items() if owner]
        try:
            found = _generate(model, prompt, chat, mine, n_tokens)
        except BaseException as error:
            for key in mine:
                store.finish((prompt, chat, key, n_tokens), error=error)
            raise
        for key, value in found.items():
            store.finish((prompt, chat, key, n_tokens), value)
        for key, (future, owner) in claims.items():
            if not owner:
                try:
                    found[key] = future.result(timeout=300)
                except Exception:  # noqa: BLE001  (the other session's failure or time-out: generate it here)
                    found[key] = _generate(model, prompt, chat, [key], n_tokens)[key]
    return [found[key] for key in keys]


def _generate(
    model: str, prompt: str, chat: bool, keys: list[SamplingParams], n_tokens: int
) -> dict[SamplingParams, Continuation]:
    """The continuations for ``keys``, submitted together to the shared server."""
    client = client_for(model)
    handles = [
        (key, client.submit(prompt, dataclasses.replace(key, max_new_tokens=n_tokens), chat=chat)) for key in keys
    ]
    tokenizer = client.tokenizer
    found = {}
    for key, handle in handles:
        result = handle.result(timeout=300)
        found[key] = Continuation(  # texts in the one token notation (ui.token_text), not decoded with "�"
            token_ids=result.token_ids,
            token_strings=token_text.token_texts(tokenizer, result.token_ids),
            probabilities=result.probabilities,
            text=token_text.sequence_text(tokenizer, result.token_ids),
            finish_reason=result.finish_reason,
            max_batch_size=result.max_batch_size,
        )
    return found


def continuation(model: str, prompt: str, chat: bool, key: SamplingParams, n_tokens: int = 10) -> Continuation:
    """One continuation (see ``continuations``)."""
    return continuations(model, prompt, chat, [key], n_tokens)[0]


def first_divergence(a: list[int], b: list[int]) -> int | None:
    """Index of the first position where two token sequences differ (None when identical)."""
    for index, (left, right) in enumerate(zip(a, b)):
        if left != right:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


__all__ = [
    "Draw",
    "draw",
    "draw_history",
    "Histogram",
    "draw_many",
    "draw_token_ids",
    "GoodnessOfFit",
    "chi_square_gof",
    "Continuation",
    "ContinuationStore",
    "continuation",
    "continuations",
    "first_divergence",
]
