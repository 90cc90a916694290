"""Cached results for the side-by-side page: one prompt through two models, and what sets them apart.

Owns each model's card (parameters, layers, heads, KV bytes per token, the window),
its next-token top 10, and its greedy continuation with the decode speed measured
while it ran, plus the first point where two continuations part. Plain Python data,
the model's name first in every cached call; no torch outside the engine's own calls.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from inference.api import SamplingParams
from ui.common.resources import client_for
from ui.logits.compute import prompt_logits, token_texts

CONTINUATION_TOKENS = 24
TOP_N = 10


@dataclass(frozen=True)
class ModelCard:
    name: str
    family: str
    parameters: int  # tied matrices counted once
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    vocab_size: int
    kv_bytes_per_token: int  # in the engine's dtype, every layer
    dtype: str
    local_layers: int
    window: int | None
    tokenizer_scheme: str


def model_card(model: str) -> ModelCard:
    client = client_for(model)
    config, info = client.info.config, client.info
    return ModelCard(
        name=config.name,
        family=config.family,
        parameters=info.parameter_count,
        n_layers=config.n_layers,
        d_model=config.d_model,
        n_heads=config.n_heads,
        n_kv_heads=config.n_kv_heads,
        head_dim=config.head_dim,
        vocab_size=config.vocab_size,
        kv_bytes_per_token=config.kv_cache_bytes(1, info.dtype_bytes),
        dtype=info.dtype,
        local_layers=len(config.local_layers),
        window=config.sliding_window,
        tokenizer_scheme=client.tokenizer.scheme,
    )


@dataclass(frozen=True)
class NextToken:
    token_ids: list[int]  # the top ``TOP_N``, most likely first
    token_strings: list[str]
    probabilities: list[float]  # softmax at T = 1


@st.cache_data(max_entries=32, show_spinner=False)
def next_token_top(model: str, prompt: str) -> NextToken:
    """``model``'s ``TOP_N`` most likely next tokens after the prompt (plain text: no chat template)."""
    logits = prompt_logits(model, prompt, False).logits.astype(np.float64)  # (V,)
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    top = np.argsort(probs)[::-1][:TOP_N]
    return NextToken(top.tolist(), token_texts(model, top.tolist()), [float(p) for p in probs[top]])


@dataclass(frozen=True)
class Continuation:
    pieces: list[str]  # each generated token's own text
    text: str
    decode_tok_s: float | None  # decode steps (after the prefill) per second, measured in this run
    prefill_ms: float


@st.cache_data(max_entries=16, show_spinner="Generating greedy continuations…")
def greedy_continuation(model: str, prompt: str, n_tokens: int = CONTINUATION_TOKENS) -> Continuation:
    """Greedy tokens after the prompt from ``model``'s own engine, timed step by step."""
    steps = client_for(model).complete(prompt, SamplingParams(temperature=0, max_new_tokens=n_tokens)).steps
    decode = steps[1:]
    return Continuation(
        pieces=[step.text for step in steps],
        text="".join(step.text for step in steps),
        decode_tok_s=len(decode) / sum(step.seconds for step in decode) if decode else None,
        prefill_ms=1000 * steps[0].seconds,
    )


@dataclass(frozen=True)
class Divergence:
    common: str  # the text both continuations start with
    left_rest: str
    right_rest: str

    @property
    def identical(self) -> bool:
        return not self.left_rest and not self.right_rest


def first_divergence(left: str, right: str) -> Divergence:
    """Where two continuations part, by characters (the two models' tokens do not line up)."""
    shared = 0
    for a, b in zip(left, right):
        if a != b:
            break
        shared += 1
    return Divergence(left[:shared], left[shared:], right[shared:])
