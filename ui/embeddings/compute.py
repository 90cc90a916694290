"""Cached embedding-matrix results for the Embeddings page: rows, neighbours, PCA, position encodings.

Everything is read from the loaded model's own weights through its client (``EngineClient``:
rows by lookup, every row's length kept once per engine, nearest neighbours block by block,
RoPE's own tables) and returned as numpy or plain Python, bounded by ``max_entries``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from ui.common.resources import client_for
from ui.tokenization.compute import piece_text

WORD_SET = (" cat", " dog", " kitten", " car", " truck", " banana", " apple", " mat", " tired", " sleepy")


def matrix_shape(model: str) -> tuple[int, int]:
    """(vocabulary size, model width) of the embedding matrix (read off the model, never built)."""
    return client_for(model).info.embedding_shape


def embed_scale(model: str) -> float:
    """The factor the model multiplies every row by before the first block (Gemma: sqrt(d_model); else 1)."""
    return float(client_for(model).info.config.embed_scale)


@st.cache_data(max_entries=16, show_spinner=False)
def rows_for(model: str, ids: list[int]) -> np.ndarray:
    """The embedding rows (T, D) that the token ids select: the model's first view of the prompt."""
    return client_for(model).embedding_rows(ids)


def _piece(model: str, token_id: int) -> str:
    tokenizer = client_for(model).tokenizer
    return piece_text(tokenizer.raw_tokens([token_id])[0], token_id in tokenizer.special_ids, tokenizer)


@st.cache_data(max_entries=64, show_spinner=False)
def nearest(model: str, token_id: int, k: int = 12) -> list[tuple[int, str, float]]:
    """The ``k`` vocabulary entries whose rows point most nearly the same way (cosine), itself excluded."""
    return [(i, _piece(model, i), cosine) for i, cosine in client_for(model).nearest(token_id, k)]


@st.cache_data(max_entries=16, show_spinner=False)
def word_cosines(model: str, word: str, others: tuple[str, ...]) -> list[float]:
    """Cosine similarity of ``word``'s embedding row with each of ``others``' (words with their leading space)."""
    return client_for(model).word_cosines(word, others)


def token_id_of(model: str, word: str) -> int | None:
    """The id of ``word`` when it is exactly one token, else None."""
    ids = client_for(model).tokenizer.encode(word, special_tokens=False)
    return ids[0] if len(ids) == 1 else None


@dataclass(frozen=True)
class Projection:
    points: np.ndarray  # (N, 2) PCA coordinates
    labels: list[str]
    groups: list[str]  # "prompt" or "word set"
    explained: tuple[float, float]  # share of the variance along each axis (of these N vectors)


@st.cache_data(max_entries=16, show_spinner=False)
def project(model: str, ids: list[int], words: tuple[str, ...]) -> Projection:
    """PCA to 2-D of the prompt's distinct token rows plus a word set (multi-token words: mean of rows)."""
    distinct, drawn, matrix = client_for(model).projection_vectors(ids, words)  # (N, D)
    labels = [_piece(model, i) for i in distinct]
    labels += [word if n == 1 else f"{word} ({n} tokens, mean)" for word, n in drawn]
    groups = ["prompt"] * len(distinct) + ["word set"] * len(drawn)
    centred = matrix - matrix.mean(0, keepdims=True)
    _, singular, vt = np.linalg.svd(centred, full_matrices=False)
    points = np.zeros((len(labels), 2))
    points[:, : min(2, len(vt))] = centred @ vt[:2].T  # (N, 2); fewer than 3 vectors leave PC2 at 0
    variance = singular**2 / max(float((singular**2).sum()), 1e-12)
    explained = (float(variance[0]), float(variance[1]) if len(variance) > 1 else 0.0)
    return Projection(points, labels, groups, explained)


def rope_bases(model: str) -> dict[str, float]:
    """RoPE base per kind of layer: {"global": theta} or, with local layers, {"local": ..., "global": ...}."""
    config = client_for(model).info.config
    return ({"local": config.rope_local_theta} if config.local_layers else {}) | {"global": config.rope_theta}


@st.cache_data(max_entries=8, show_spinner=False)
def rope_angles(model: str, n_positions: int, local: bool = False) -> np.ndarray:
    """RoPE rotation angle (radians, wrapped to [-pi, pi]) per position and frequency pair: (P, hd/2).

    Read from the model's own cos/sin; pair i rotates dims (i, i + hd/2) together.
    """
    return client_for(model).positions(n_positions, local).angles


@st.cache_data(max_entries=8, show_spinner=False)
def rope_cos(model: str, n_positions: int, local: bool = False) -> np.ndarray:
    """cos(angle) per position and frequency pair (P, hd/2), as the model computes it."""
    return client_for(model).positions(n_positions, local).half_cos


@st.cache_data(max_entries=8, show_spinner=False)
def rope_wavelengths(model: str, local: bool = False) -> np.ndarray:
    """Positions needed for one full turn of each frequency pair: 2*pi / (angle per position)."""
    return client_for(model).positions(2, local).wavelengths


@st.cache_data(max_entries=8, show_spinner=False)
def learned_positions(model: str, n_positions: int) -> np.ndarray:
    """GPT-2 style learned position rows (P, D)."""
    return client_for(model).positions(n_positions).learned


def position_scheme(model: str) -> str:
    """'rope' or 'learned': how this model tells positions apart."""
    return client_for(model).info.position_scheme
