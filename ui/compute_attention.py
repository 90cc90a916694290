"""Cached attention results for the Attention page, read from one traced forward pass.

Owns: running ``engine.traced_forward`` once per prompt (capped at ``MAX_TOKENS``,
exact for those positions because attention is causal), keeping the recorded raw
scores and attention probabilities of every layer and head as numpy, and small pure
helpers that slice them (the score → scale → mask → softmax steps for one query,
a query's attention over layers, grouped-query head groups).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st
import torch

from .resources import get_engine

MAX_TOKENS = 128  # positions traced and drawn; later tokens cannot change earlier rows (causal mask)


@dataclass(frozen=True)
class AttentionMaps:
    raw_scores: np.ndarray  # (L, H, T, T) q·k, before scaling and masking
    probs: np.ndarray  # (L, H, T, T) softmax of the scaled, masked scores
    head_dim: int
    n_kv_heads: int
    total_tokens: int  # tokens in the prompt (T may be fewer: the first MAX_TOKENS)

    @property
    def n_layers(self) -> int:
        return self.probs.shape[0]

    @property
    def n_heads(self) -> int:
        return self.probs.shape[1]

    @property
    def n_tokens(self) -> int:
        return self.probs.shape[2]

    def kv_group(self, head: int) -> int:
        """The K/V head a query head reads (grouped-query attention: consecutive query heads share one)."""
        return head // (self.n_heads // self.n_kv_heads)


@st.cache_data(max_entries=4, show_spinner="Running the model and recording attention…")
def attention_maps(ids: list[int]) -> AttentionMaps:
    """Every layer's and head's attention for the first ``MAX_TOKENS`` tokens of ``ids``."""
    engine = get_engine()
    _, trace = engine.traced_forward(ids[:MAX_TOKENS])
    with torch.inference_mode():
        raw = torch.stack([layer.raw_scores[0] for layer in trace.layers])  # (L, H, T, T)
        probs = torch.stack([layer.attention_probs[0] for layer in trace.layers])  # (L, H, T, T)
    return AttentionMaps(raw.numpy().copy(), probs.numpy().copy(), engine.config.head_dim,
                         engine.config.n_kv_heads, len(ids))


@dataclass(frozen=True)
class ScoreSteps:
    raw: np.ndarray  # (T,) q·k for every key
    scaled: np.ndarray  # (T,) raw / sqrt(head_dim)
    masked: np.ndarray  # (T,) scaled, with future keys at -inf
    probs: np.ndarray  # (T,) softmax(masked): the recorded attention row


def score_steps(maps: AttentionMaps, layer: int, head: int, query: int) -> ScoreSteps:
    """One query's path from dot products to attention weights, with the model's real numbers."""
    raw = maps.raw_scores[layer, head, query]
    scaled = raw / np.sqrt(maps.head_dim)
    masked = np.where(np.arange(raw.shape[0]) <= query, scaled, -np.inf)
    return ScoreSteps(raw, scaled, masked, maps.probs[layer, head, query])


def query_over_layers(maps: AttentionMaps, query: int) -> np.ndarray:
    """(L, T): for one query position, the attention to each key, averaged over heads, per layer."""
    return maps.probs[:, :, query, :].mean(axis=1)


def top_heads(maps: AttentionMaps, query: int, key: int, k: int = 5) -> list[tuple[int, int, float]]:
    """The ``k`` (layer, head) pairs that put the most weight from ``query`` on ``key``."""
    weights = maps.probs[:, :, query, key]  # (L, H)
    order = np.argsort(weights, axis=None)[::-1][:k]
    return [(int(i // maps.n_heads), int(i % maps.n_heads), float(weights.flat[i])) for i in order]


def find_token(pieces: list[str], word: str) -> int | None:
    """Position of the first token whose text, stripped, equals ``word`` (case-insensitive)."""
    for i, piece in enumerate(pieces):
        if piece.strip().lower() == word:
            return i
    return None
