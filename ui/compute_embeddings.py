"""Cached embedding-matrix results for the Embeddings page: rows, neighbours, PCA, position encodings.

Everything is read from the loaded model's own weights (``engine.model.embed``,
``engine.model.rope`` or ``engine.model.pos_embed``) and returned as numpy or plain
Python, bounded by ``max_entries``. The unit-normalised matrix used for cosine
similarity is built once per server and model with ``cache_resource`` (never mutated).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st
import torch

from .compute_tokens import piece_text
from .resources import engine_for

WORD_SET = (" cat", " dog", " kitten", " car", " truck", " banana", " apple", " mat", " tired", " sleepy")


def matrix_shape(model: str) -> tuple[int, int]:
    """(vocabulary size, model width) of the embedding matrix."""
    rows, width = engine_for(model).model.embed.weight.shape
    return int(rows), int(width)


@st.cache_resource(show_spinner=False, max_entries=4)
def _unit_rows(model: str) -> torch.Tensor:
    """Every embedding row scaled to length 1, so a matrix-vector product gives cosine similarities."""
    with torch.inference_mode():
        weight = engine_for(model).model.embed.weight.float()  # (V, D)
        return weight / weight.norm(dim=-1, keepdim=True).clamp_min(1e-12)


@st.cache_data(max_entries=16, show_spinner=False)
def rows_for(model: str, ids: list[int]) -> np.ndarray:
    """The embedding rows (T, D) that the token ids select: the model's first view of the prompt."""
    with torch.inference_mode():
        return engine_for(model).model.embed(torch.tensor(ids)).float().numpy().copy()


def _piece(model: str, token_id: int) -> str:
    tokenizer = engine_for(model).tokenizer
    return piece_text(tokenizer.raw_tokens([token_id])[0], token_id in tokenizer.special_ids)


@st.cache_data(max_entries=64, show_spinner=False)
def nearest(model: str, token_id: int, k: int = 12) -> list[tuple[int, str, float]]:
    """The ``k`` vocabulary entries whose rows point most nearly the same way (cosine), itself excluded."""
    unit = _unit_rows(model)
    with torch.inference_mode():
        cosines = unit @ unit[token_id]  # (V,)
        cosines[token_id] = -2.0
        values, indices = cosines.topk(k)
    return [(int(i), _piece(model, int(i)), float(v)) for v, i in zip(values, indices)]


def word_row(model: str, word: str) -> torch.Tensor:
    """The unit-length row of ``word`` (its tokens' mean when it is several)."""
    ids = engine_for(model).tokenizer.encode(word, special_tokens=False)
    unit = _unit_rows(model)
    with torch.inference_mode():
        row = unit[torch.tensor(ids)].mean(0)
        return row / row.norm().clamp_min(1e-12)


@st.cache_data(max_entries=16, show_spinner=False)
def word_cosines(model: str, word: str, others: tuple[str, ...]) -> list[float]:
    """Cosine similarity of ``word``'s embedding row with each of ``others``' (words with their leading space)."""
    row = word_row(model, word)
    return [float(row @ word_row(model, other)) for other in others]


def token_id_of(model: str, word: str) -> int | None:
    """The id of ``word`` when it is exactly one token, else None."""
    ids = engine_for(model).tokenizer.encode(word, special_tokens=False)
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
    engine = engine_for(model)
    tokenizer = engine.tokenizer
    seen, labels, groups, vectors = set(), [], [], []
    weight = engine.model.embed.weight
    with torch.inference_mode():
        for i in ids:
            if i not in seen:
                seen.add(i)
                labels.append(_piece(model, i))
                groups.append("prompt")
                vectors.append(weight[i].float().numpy())
        for word in words:
            word_ids = tokenizer.encode(word)
            if not word_ids or (len(word_ids) == 1 and word_ids[0] in seen):
                continue  # empty, or already plotted as a prompt token
            labels.append(word if len(word_ids) == 1 else f"{word} ({len(word_ids)} tokens, mean)")
            groups.append("word set")
            vectors.append(weight[torch.tensor(word_ids)].float().mean(0).numpy())
    matrix = np.stack(vectors)  # (N, D)
    centred = matrix - matrix.mean(0, keepdims=True)
    _, singular, vt = np.linalg.svd(centred, full_matrices=False)
    points = np.zeros((len(vectors), 2))
    points[:, : min(2, len(vt))] = centred @ vt[:2].T  # (N, 2); fewer than 3 vectors leave PC2 at 0
    variance = singular**2 / max(float((singular**2).sum()), 1e-12)
    explained = (float(variance[0]), float(variance[1]) if len(variance) > 1 else 0.0)
    return Projection(points, labels, groups, explained)


@st.cache_data(max_entries=8, show_spinner=False)
def rope_angles(model: str, n_positions: int) -> np.ndarray:
    """RoPE rotation angle (radians, wrapped to [-pi, pi]) per position and frequency pair: (P, hd/2).

    Read from the model's own cos/sin tables; pair i rotates dims (i, i + hd/2) together.
    """
    rope = engine_for(model).model.rope
    half = rope.cos.shape[-1] // 2
    cos, sin = rope.cos[:n_positions, :half], rope.sin[:n_positions, :half]  # (P, hd/2)
    return torch.atan2(sin, cos).numpy().copy()


@st.cache_data(max_entries=8, show_spinner=False)
def rope_cos(model: str, n_positions: int) -> np.ndarray:
    """cos(angle) per position and frequency pair (P, hd/2), straight from the model's table."""
    rope = engine_for(model).model.rope
    return rope.cos[:n_positions, : rope.cos.shape[-1] // 2].numpy().copy()


@st.cache_data(max_entries=8, show_spinner=False)
def rope_wavelengths(model: str) -> np.ndarray:
    """Positions needed for one full turn of each frequency pair: 2*pi / (angle per position)."""
    rope = engine_for(model).model.rope
    half = rope.cos.shape[-1] // 2
    step = torch.atan2(rope.sin[1, :half], rope.cos[1, :half])  # angle per position, (hd/2,)
    return (2 * np.pi / step.clamp_min(1e-12)).numpy().copy()


@st.cache_data(max_entries=8, show_spinner=False)
def learned_positions(model: str, n_positions: int) -> np.ndarray:
    """GPT-2 style learned position rows (P, D)."""
    with torch.inference_mode():
        return engine_for(model).model.pos_embed.weight[:n_positions].float().numpy().copy()


def position_scheme(model: str) -> str:
    """'rope' or 'learned': how this model tells positions apart."""
    return "rope" if engine_for(model).model.rope is not None else "learned"
