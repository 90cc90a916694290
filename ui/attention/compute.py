"""Cached attention results for the Attention page, read from one traced forward pass.

Owns: asking the model's client for one traced forward's attention once per prompt (capped at
``MAX_TOKENS``, exact for those positions because attention is causal), keeping the recorded raw
scores and attention probabilities of every layer and head as numpy, and small pure
helpers that slice them (the score → scale → mask → softmax steps for one query,
a query's attention over layers, grouped-query head groups), and, for a model with
local layers, one traced forward of a prompt longer than its sliding window, kept as
small pooled maps with the window's effect measured (``window_view``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from inference.api import AttentionArrays, WindowView
from ui.common.resources import client_for

MAX_TOKENS = 128  # positions traced and drawn; later tokens cannot change earlier rows (causal mask)


@dataclass(frozen=True)
class AttentionMaps(AttentionArrays):
    """The engine's maps (``AttentionArrays``: raw scores, probabilities, queries, keys) with what the page needs
    to read them: the head size, the K/V sharing, the prompt's length and the window."""

    head_dim: int
    n_kv_heads: int
    total_tokens: int  # tokens in the prompt (T may be fewer: the first MAX_TOKENS)
    score_scale_dim: float = 0.0  # scores are divided by sqrt(this); 0: head_dim
    window: int | None = None  # keys a local layer's query sees (itself included)
    local_layers: tuple[int, ...] = ()

    @property
    def scale_dim(self) -> float:
        return self.score_scale_dim or float(self.head_dim)

    def window_of(self, layer: int) -> int | None:
        """The sliding window of ``layer`` (None for a global layer)."""
        return self.window if layer in self.local_layers else None

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


@st.cache_data(max_entries=16, show_spinner="Running the model and recording attention…")  # ≤ 18 MB each (128 tokens)
def attention_maps(model: str, ids: list[int]) -> AttentionMaps:
    """Every layer's and head's attention in ``model`` for the first ``MAX_TOKENS`` tokens of ``ids``."""
    client = client_for(model)
    arrays = client.attention(ids[:MAX_TOKENS])  # in the engine's child on a process server
    config = client.info.config
    return AttentionMaps(
        arrays.raw_scores,
        arrays.probs,
        arrays.queries,
        arrays.keys,
        config.head_dim,
        config.n_kv_heads,
        len(ids),
        config.score_scale_dim,
        config.sliding_window,
        config.local_layers,
    )


def attention_kind(n_heads: int, n_kv_heads: int) -> str:
    """The name of the K/V sharing: multi-head (none), multi-query (one K/V head) or grouped-query."""
    if n_kv_heads == n_heads:
        return "multi-head attention"
    return "multi-query attention" if n_kv_heads == 1 else "grouped-query attention"


@dataclass(frozen=True)
class ScoreSteps:
    raw: np.ndarray  # (T,) q·k for every key
    scaled: np.ndarray  # (T,) raw / sqrt(head_dim) (or the model's own score scalar)
    masked: np.ndarray  # (T,) scaled, with future keys (and, in a local layer, keys outside the window) at -inf
    probs: np.ndarray  # (T,) softmax(masked): the recorded attention row


def score_steps(maps: AttentionMaps, layer: int, head: int, query: int) -> ScoreSteps:
    """One query's path from dot products to attention weights, with the model's real numbers."""
    raw = maps.raw_scores[layer, head, query]
    scaled = raw / np.sqrt(maps.scale_dim)
    keys = np.arange(raw.shape[0])
    visible = keys <= query
    if maps.window_of(layer) is not None:
        visible &= keys > query - maps.window_of(layer)
    masked = np.where(visible, scaled, -np.inf)
    return ScoreSteps(raw, scaled, masked, maps.probs[layer, head, query])


def query_over_layers(maps: AttentionMaps, query: int) -> np.ndarray:
    """(L, T): for one query position, the attention to each key, averaged over heads, per layer."""
    return maps.probs[:, :, query, :].mean(axis=1)


def top_heads(maps: AttentionMaps, query: int, key: int, k: int = 5) -> list[tuple[int, int, float]]:
    """The ``k`` (layer, head) pairs that put the most weight from ``query`` on ``key``."""
    weights = maps.probs[:, :, query, key]  # (L, H)
    order = np.argsort(weights, axis=None)[::-1][:k]
    return [(int(i // maps.n_heads), int(i % maps.n_heads), float(weights.flat[i])) for i in order]


def previous_token_heads(maps: AttentionMaps) -> np.ndarray:
    """(L, H) bool: heads whose strongest key is the previous token for more than half of the queries.

    Queries 0 and 1 are left out: their previous token is the first one, where heads also
    park weight they do not need (the attention sink).
    """
    t = maps.n_tokens
    if t < 4:
        return np.zeros((maps.n_layers, maps.n_heads), dtype=bool)
    strongest = maps.probs[:, :, 2:, :].argmax(axis=-1)  # (L, H, T-2) the key each query weighs most
    previous = np.arange(2, t)[None, None, :] - 1
    return (strongest == previous).mean(axis=-1) > 0.5


def word_positions(pieces: list[str]) -> list[int]:
    """Positions of word tokens (letters only, at least three), for suggestions that name a word of the prompt."""
    return [i for i, piece in enumerate(pieces) if piece.strip().isalpha() and len(piece.strip()) >= 3]


def find_token(pieces: list[str], word: str) -> int | None:
    """Position of the first token whose text, stripped, equals ``word`` (case-insensitive)."""
    for i, piece in enumerate(pieces):
        if piece.strip().lower() == word:
            return i
    return None


def default_query(pieces: list[str]) -> int:
    """The query token the page starts on: the first "it" (the example sentence's pronoun), else the last token."""
    found = find_token(pieces[:MAX_TOKENS], "it")
    return found if found is not None else min(len(pieces), MAX_TOKENS) - 1


def _rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """RoPE as the model applies it (half-split pairs): x * cos + rotate_half(x) * sin."""
    first, second = np.split(x, 2, axis=-1)
    return x * cos + np.concatenate([-second, first], axis=-1) * sin


@dataclass(frozen=True)
class DistanceScores:
    distances: np.ndarray  # (N,) how many positions the key sits before the query
    scores: np.ndarray  # (N,) scaled score q·k/sqrt(hd) of the same two vectors at that distance
    actual_distance: int
    recorded: float  # the scaled score the forward pass recorded at the actual positions


def scores_by_distance(
    model: str, maps: AttentionMaps, layer: int, head: int, query: int, key: int, max_distance: int = 64
) -> DistanceScores:
    """Take one real query and key, undo their RoPE rotations, and score them again at other distances.

    With RoPE the score depends only on how far apart the two tokens are, so it can be
    recomputed for any distance by rotating the query to position ``d`` and the key to 0.
    """
    # (P, hd) each; Gemma's local layers rotate with their own base
    tables = client_for(model).positions(max(query, key, max_distance) + 1, local=maps.window_of(layer) is not None)
    cos, sin = tables.cos, tables.sin
    q = maps.queries[layer, head, query]
    k = maps.keys[layer, maps.kv_group(head), key]
    q_plain = _rotate(q, cos[query], -sin[query])  # rotating by -angle undoes the rotation
    k_plain = _rotate(k, cos[key], -sin[key])
    distances = np.arange(max_distance + 1)
    k_at_zero = _rotate(k_plain, cos[0], sin[0])
    scores = np.array([_rotate(q_plain, cos[d], sin[d]) @ k_at_zero for d in distances]) / np.sqrt(maps.scale_dim)
    recorded = float(maps.raw_scores[layer, head, query, key]) / np.sqrt(maps.scale_dim)
    return DistanceScores(distances, scores, query - key, recorded)


# -- the sliding window, on a prompt longer than it --------------------------------------
WINDOW_EXTRA = 128  # tokens traced past the window (a traced forward keeps (H, T, T) per layer: ~350 MB at 640)
POOLED_CELLS = 160  # the maps are max-pooled to at most this many rows and columns for drawing


def long_prompt_for_window(model: str, sentence: str) -> str:
    """``sentence`` repeated until the prompt fills what ``window_view`` traces (the window + ``WINDOW_EXTRA``)."""
    client = client_for(model)
    target = client.info.config.sliding_window + WINDOW_EXTRA
    per_copy = len(client.tokenizer.encode(" " + sentence, special_tokens=False))
    return " ".join([sentence] * (target // max(per_copy, 1) + 1))


@st.cache_data(max_entries=2, show_spinner="Tracing the long prompt through every layer…")  # ~2 MB each
def window_view(model: str, ids: list[int]) -> WindowView:
    """The window's effect, measured on the first ``window + WINDOW_EXTRA`` tokens of ``ids``."""
    client = client_for(model)
    return client.window(ids[: int(client.info.config.sliding_window) + WINDOW_EXTRA], POOLED_CELLS)


@dataclass(frozen=True)
class LayerLayout:
    n_layers: int
    local_layers: tuple[int, ...]
    window: int | None


def layer_layout(model: str) -> LayerLayout:
    """Which of ``model``'s layers are local (sliding window) and how wide the window is."""
    config = client_for(model).info.config
    return LayerLayout(config.n_layers, config.local_layers, config.sliding_window)
