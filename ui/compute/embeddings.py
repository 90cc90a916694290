"""Cached embedding-matrix results for the Embeddings page: rows, neighbours, PCA, position encodings.

Everything is read from the loaded model's own weights (``engine.model.embed``,
``engine.model.rope`` / ``rope_local`` or ``engine.model.pos_embed``) and returned as
numpy or plain Python, bounded by ``max_entries``. Cosine similarity needs every row's
length: those lengths (one float per row) are kept once per server and model with
``cache_resource``; the rows themselves are never copied (a normalised copy of Gemma's
262,144 x 640 matrix would be another 671 MB), the products are taken block by block.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st
import torch

from ui.compute.tokens import piece_text
from ui.shell.resources import engine_for

WORD_SET = (" cat", " dog", " kitten", " car", " truck", " banana", " apple", " mat", " tired", " sleepy")
BLOCK_ROWS = 32_768  # rows per float32 block in the similarity products (84 MB at Gemma's width)


def matrix_shape(model: str) -> tuple[int, int]:
    """(vocabulary size, model width) of the embedding matrix."""
    rows, width = engine_for(model).model.embed.weight.shape
    return int(rows), int(width)


def embed_scale(model: str) -> float:
    """The factor the model multiplies every row by before the first block (Gemma: sqrt(d_model); else 1)."""
    return float(engine_for(model).config.embed_scale)


def _blocks(weight: torch.Tensor):
    """The matrix in float32 blocks of ``BLOCK_ROWS`` rows (a bf16 matrix is never copied whole)."""
    for start in range(0, weight.shape[0], BLOCK_ROWS):
        yield weight[start : start + BLOCK_ROWS].float()  # (<=BLOCK_ROWS, D)


@st.cache_resource(show_spinner=False, max_entries=4)
def _row_norms(model: str) -> torch.Tensor:
    """Every embedding row's length (V,), so a matrix-vector product divided by them gives cosines."""
    with torch.inference_mode():
        weight = engine_for(model).model.embed.weight  # (V, D)
        return torch.cat([block.norm(dim=-1) for block in _blocks(weight)]).clamp_min(1e-12)  # (V,)


@st.cache_data(max_entries=16, show_spinner=False)
def rows_for(model: str, ids: list[int]) -> np.ndarray:
    """The embedding rows (T, D) that the token ids select: the model's first view of the prompt."""
    with torch.inference_mode():
        return engine_for(model).model.embed(torch.tensor(ids)).float().numpy().copy()


def _piece(model: str, token_id: int) -> str:
    tokenizer = engine_for(model).tokenizer
    return piece_text(tokenizer.raw_tokens([token_id])[0], token_id in tokenizer.special_ids, tokenizer)


@st.cache_data(max_entries=64, show_spinner=False)
def nearest(model: str, token_id: int, k: int = 12) -> list[tuple[int, str, float]]:
    """The ``k`` vocabulary entries whose rows point most nearly the same way (cosine), itself excluded."""
    norms = _row_norms(model)
    weight = engine_for(model).model.embed.weight  # (V, D)
    with torch.inference_mode():
        query = weight[token_id].float() / norms[token_id]  # (D,) unit length
        cosines = torch.cat([block @ query for block in _blocks(weight)]) / norms  # (V,)
        cosines[token_id] = -2.0
        values, indices = cosines.topk(k)
    return [(int(i), _piece(model, int(i)), float(v)) for v, i in zip(values, indices)]


def word_row(model: str, word: str) -> torch.Tensor:
    """The unit-length row of ``word`` (its tokens' mean when it is several)."""
    ids = engine_for(model).tokenizer.encode(word, special_tokens=False)
    weight, norms = engine_for(model).model.embed.weight, _row_norms(model)  # (V, D), (V,)
    with torch.inference_mode():
        picked = torch.tensor(ids)
        row = (weight[picked].float() / norms[picked, None]).mean(0)  # (D,) mean of the unit rows
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
            word_ids = tokenizer.encode(word, special_tokens=False)  # the word alone, without a BOS
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


def _rope(model: str, local: bool):
    """The RoPE of the model's local layers (``local``, where it has them) or of its global layers."""
    transformer = engine_for(model).model
    return transformer.rope_local if local and transformer.rope_local is not None else transformer.rope


def rope_bases(model: str) -> dict[str, float]:
    """RoPE base per kind of layer: {"global": theta} or, with local layers, {"local": ..., "global": ...}."""
    config = engine_for(model).config
    return ({"local": config.rope_local_theta} if config.local_layers else {}) | {"global": config.rope_theta}


def _tables(model: str, n_positions: int, local: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin (P, hd/2) of positions 0..P-1, one column per frequency pair, as the model computes them."""
    cos, sin = _rope(model, local).tables(n_positions)  # (P, hd) each, the halves repeated
    half = cos.shape[-1] // 2
    return cos[:, :half].cpu(), sin[:, :half].cpu()


@st.cache_data(max_entries=8, show_spinner=False)
def rope_angles(model: str, n_positions: int, local: bool = False) -> np.ndarray:
    """RoPE rotation angle (radians, wrapped to [-pi, pi]) per position and frequency pair: (P, hd/2).

    Read from the model's own cos/sin; pair i rotates dims (i, i + hd/2) together.
    """
    cos, sin = _tables(model, n_positions, local)
    return torch.atan2(sin, cos).numpy().copy()


@st.cache_data(max_entries=8, show_spinner=False)
def rope_cos(model: str, n_positions: int, local: bool = False) -> np.ndarray:
    """cos(angle) per position and frequency pair (P, hd/2), as the model computes it."""
    return _tables(model, n_positions, local)[0].numpy().copy()


@st.cache_data(max_entries=8, show_spinner=False)
def rope_wavelengths(model: str, local: bool = False) -> np.ndarray:
    """Positions needed for one full turn of each frequency pair: 2*pi / (angle per position)."""
    cos, sin = _tables(model, 2, local)
    step = torch.atan2(sin[1], cos[1])  # angle per position, (hd/2,)
    return (2 * np.pi / step.clamp_min(1e-12)).numpy().copy()


@st.cache_data(max_entries=8, show_spinner=False)
def learned_positions(model: str, n_positions: int) -> np.ndarray:
    """GPT-2 style learned position rows (P, D)."""
    with torch.inference_mode():
        return engine_for(model).model.pos_embed.weight[:n_positions].float().numpy().copy()


def position_scheme(model: str) -> str:
    """'rope' or 'learned': how this model tells positions apart."""
    return "rope" if engine_for(model).model.rope is not None else "learned"
