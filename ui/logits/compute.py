"""Cached model results for the logit pages: next-token logits, the sampler's stages, the logit lens, one block.

Owns the part-2 pages' link to the engine for everything before a token is drawn.
The forward pass for a prompt runs once (the model's client: in the engine's child on a
process server) and its logits are cached as numpy; moving a temperature or top-p control
reruns only the sampler's stage bookkeeping on those cached logits (``sampling_stages``),
never the model. Every probability shown comes from the engine's own ``sample(record=True)``
(``inference.inspection.recorded_draw``) except the temperature sweep, which is the plain
softmax formula over the same cached logits. Drawing tokens lives in ``ui/sampling/compute.py``;
figures live in ``figures.py`` beside it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import streamlit as st

from inference.api import Lens, RecordedDraw, SamplingParams, TracedPrompt, recorded_draw
from ui.common import token_text
from ui.common.prompt_tail import prompt_tail
from ui.common.resources import client_for

STAGE_LABELS: dict[str, str] = {  # in the sampler's order; "softmax" is the T = 1 reference row
    "softmax": "softmax at T = 1 (after repetition penalty)",
    "temperature": "softmax(logits ÷ T)",
    "top_k": "top-k",
    "top_p": "top-p",
    "min_p": "min-p",
    "final": "final (renormalised)",
}


# -- the forward pass, once per prompt ---------------------------------------------------
@dataclass(frozen=True)
class PromptLogits:
    """The prompt as tokens and the model's logits for the token after it."""

    token_ids: list[int]
    token_strings: list[str]
    logits: np.ndarray  # (V,) float32: the next-token logits at the last position


@st.cache_data(max_entries=64, show_spinner="Running the model on the prompt…")  # ~0.2 MB each (one logit row)
def prompt_logits(model: str, prompt: str, chat: bool) -> PromptLogits:
    """Encode the prompt and run one forward; raises ``PromptError`` for an empty or too long prompt."""
    client = client_for(model)
    ids = client.encode_prompt(prompt, chat=chat)
    logits = client.last_logits(ids)  # (V,): the last position only (T rows could be GBs)
    return PromptLogits(ids, token_text.token_texts(client.tokenizer, ids), logits)


def token_texts(model: str, token_ids: list[int]) -> list[str]:
    """Each id's own display text (``ui.token_text``: pieces of a character as <0xNN>)."""
    return token_text.token_texts(client_for(model).tokenizer, token_ids)


# -- softmax and temperature (plain formulas on cached logits) ----------------------------
def softmax_at(logits: np.ndarray, temperature: float) -> np.ndarray:
    """softmax(logits / T) in float64; T == 0 is the greedy limit, a one-hot on the argmax."""
    if temperature == 0:
        probs = np.zeros(logits.shape, dtype=np.float64)
        probs[int(np.argmax(logits))] = 1.0
        return probs
    scaled = logits.astype(np.float64) / temperature
    scaled -= scaled.max()
    weights = np.exp(scaled)
    return weights / weights.sum()


def top_indices(values: np.ndarray, n: int) -> np.ndarray:
    """Indices of the n largest values, largest first (argpartition: no full sort of the vocabulary)."""
    n = min(n, values.size)
    part = np.argpartition(-values, n - 1)[:n]
    return part[np.argsort(-values[part], kind="stable")]


def entropy_bits(probs: np.ndarray) -> float:
    """Shannon entropy in bits (0 for a one-hot, log2(V) for uniform)."""
    nonzero = probs[probs > 0]
    return float(-(nonzero * np.log2(nonzero)).sum())


def tokens_for_mass(probs: np.ndarray, mass: float = 0.9, order: np.ndarray | None = None) -> int:
    """How many of the most probable tokens it takes to cover ``mass`` of the probability.

    ``order``: indices that put ``probs`` in descending order, when the caller has them: the logits' stable
    argsort, descending, orders softmax(logits ÷ T) at every T (exp and a division by T > 0 never reverse two values;
    T = 0's one-hot sits on the first largest logit, where the stable argsort puts it first). The same count as
    sorting ``probs``, without a sort of the vocabulary per temperature.
    """
    ranked = np.sort(probs)[::-1] if order is None else probs[order]
    return int(np.searchsorted(np.cumsum(ranked), mass) + 1)


def descending_order(logits: np.ndarray) -> np.ndarray:
    """The indices of ``logits`` from the largest down (stable: equal logits in index order), for ``tokens_for_mass``."""
    return np.argsort(-np.asarray(logits, dtype=np.float64), kind="stable")


@dataclass(frozen=True)
class TemperatureSweep:
    temperatures: np.ndarray  # (S,)
    entropy_bits: np.ndarray  # (S,)
    top_probability: np.ndarray  # (S,) probability of the most likely token


@st.cache_data(max_entries=64, show_spinner=False)
def temperature_sweep(model: str, prompt: str, chat: bool, temperatures: tuple[float, ...]) -> TemperatureSweep:
    """Entropy and top-token probability of softmax(logits / T) for each T (prompt logits cached)."""
    logits = prompt_logits(model, prompt, chat).logits
    dists = [softmax_at(logits, t) for t in temperatures]
    return TemperatureSweep(
        np.array(temperatures), np.array([entropy_bits(p) for p in dists]), np.array([p.max() for p in dists])
    )


# -- the sampler's stages, exactly as the engine computes them ---------------------------
@dataclass(frozen=True)
class StageView:
    """The engine's stage probabilities for the N most likely tokens, plus survivor counts over all V."""

    token_ids: list[int]  # (N,) by descending probability after the repetition penalty
    token_strings: list[str]
    stage_names: list[str]  # in the engine's order; greedy runs record only softmax and final
    stage_probs: np.ndarray  # (S, N)
    survivors: dict[str, int]  # tokens with probability > 0 after each stage, over the whole vocabulary
    greedy_token_id: int  # argmax of the (penalised) logits: what T = 0 would pick
    entropy_bits: float  # of the distribution after temperature (0 for greedy)


def recorded_sample(model: str, prompt: str, chat: bool, params: SamplingParams, draw_index: int = 0) -> RecordedDraw:
    """Draw ``draw_index`` of the engine's ``sample(record=True)`` on the prompt's cached logits."""
    cached = prompt_logits(model, prompt, chat)
    return recorded_draw(cached.logits, params, cached.token_ids, draw_index)


@st.cache_data(max_entries=64, show_spinner=False)
def sampling_stages(model: str, prompt: str, chat: bool, params: SamplingParams, top_n: int = 12) -> StageView:
    """The probability of the top-N tokens after each stage of the engine's sampler (no model rerun).

    ``params`` is the cache key: pass ``params.canonical()``, so greedy settings that differ only in what
    greedy ignores share one entry."""
    result = recorded_sample(model, prompt, chat, params)
    stage_probs = result.stage_probs  # (V,) each
    names = [name for name in STAGE_LABELS if name in stage_probs]
    softmax = stage_probs["softmax"]
    top_ids = top_indices(softmax, top_n)  # (N,)
    after_t = stage_probs.get("temperature")
    ids = [int(i) for i in top_ids]
    return StageView(
        token_ids=ids,
        token_strings=token_texts(model, ids),
        stage_names=names,
        stage_probs=np.stack([stage_probs[name][top_ids] for name in names]).astype(np.float64),  # (S, N)
        survivors={name: int(np.count_nonzero(stage_probs[name])) for name in names},
        greedy_token_id=int(np.argmax(softmax)),
        entropy_bits=0.0 if after_t is None else entropy_bits(after_t.astype(np.float64)),
    )


@st.cache_data(max_entries=64, show_spinner=False)
def kept_by(model: str, prompt: str, chat: bool, params: SamplingParams, top_p: float, min_p: float) -> tuple[int, int]:
    """How many tokens top-p ``top_p`` alone and min-p ``min_p`` alone keep at these settings (the engine's sampler)."""
    if params.greedy:
        return 1, 1
    counts = []
    for change in ({"top_k": 0, "top_p": top_p, "min_p": 0.0}, {"top_k": 0, "top_p": 1.0, "min_p": min_p}):
        result = recorded_sample(model, prompt, chat, dataclasses.replace(params, **change))
        counts.append(int(np.count_nonzero(result.stage_probs["final"])))
    return counts[0], counts[1]


# -- the logit lens and one block, from one traced forward --------------------------------
@dataclass(frozen=True)
class LogitLens(Lens):
    """The engine's lens (``Lens``: top ids and probabilities per layer and position) with its tokens written."""

    layer_labels: list[str]  # (L+1,)
    position_tokens: list[str]  # (T,) the prompt token at each position
    top_strings: list[list[list[str]]]  # (L+1, T, 3)


@dataclass(frozen=True)
class PromptTrace(TracedPrompt):
    """The engine's traced prompt (its lens as a ``LogitLens``, the block walk) and how much of the prompt it ran on."""

    prompt_tokens: int  # the whole prompt's length
    traced_tokens: int  # how many of its tokens the traced forward ran on (``traced_part`` says which)
    traced_part: str  # which, in words ("its first token and its last 127")


MAX_TRACED_TOKENS = 128  # a trace keeps every layer's (H, T, T) attention three times: T² memory


@st.cache_data(max_entries=32, show_spinner="Running a traced forward (every layer recorded)…")
def traced_prompt(model: str, prompt: str, chat: bool, max_positions: int = 16) -> PromptTrace:
    """One traced forward of (the last ``MAX_TRACED_TOKENS`` tokens, after its BOS, of) the prompt, as the lens and
    the walk."""
    client = client_for(model)
    all_ids = client.encode_prompt(prompt, chat=chat)
    ids, part = prompt_tail(all_ids, MAX_TRACED_TOKENS, client.tokenizer.bos_token)
    traced = client.trace(ids, max(0, len(ids) - max_positions))
    return PromptTrace(
        lens=lens_view(model, traced.lens, ids),
        walk=traced.walk,
        prompt_tokens=len(all_ids),
        traced_tokens=len(ids),
        traced_part=part,
    )


def lens_view(model: str, lens: Lens, ids: list[int]) -> LogitLens:
    """The engine's lens of ``ids`` with every token written in the one display notation (also for Experiments)."""
    tokenizer = client_for(model).tokenizer
    strings = [[token_text.token_texts(tokenizer, row.tolist()) for row in layer] for layer in lens.top_ids]
    return LogitLens(
        layer_labels=["embed"] + [f"layer {i}" for i in range(len(lens.top_ids) - 1)],
        position_tokens=token_text.token_texts(tokenizer, ids[lens.keep_from :]),
        top_ids=lens.top_ids,
        top_probs=lens.top_probs,
        top_strings=strings,
        final_token_probability=lens.final_token_probability,
        keep_from=lens.keep_from,
    )
