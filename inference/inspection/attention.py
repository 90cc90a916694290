"""Attention as the explorer draws it: every layer's and head's maps of one traced forward, and the sliding window.

Owns ``attention_arrays`` (raw scores, probabilities, queries and keys of every layer and head,
as numpy) and ``window_view`` (one traced forward of a prompt longer than a model's sliding
window, kept as small head-averaged pooled maps with the window's effect measured): the
traces themselves (hundreds of MB past the window) never leave this module.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..generation.engine import Engine
from ..model.memory import release_freed_memory


@dataclass(frozen=True)
class AttentionArrays:
    raw_scores: np.ndarray  # (L, H, T, T) q·k, before scaling and masking
    probs: np.ndarray  # (L, H, T, T) softmax of the scaled, masked scores
    queries: np.ndarray  # (L, H, T, hd) after RoPE
    keys: np.ndarray  # (L, n_kv, T, hd) after RoPE


def attention_arrays(engine: Engine, ids: list[int]) -> AttentionArrays:
    """Every layer's and head's attention of one traced forward of ``ids``."""
    _, trace = engine.traced_forward(ids, last_only=True)  # the maps, not the logits
    with torch.inference_mode():
        raw = torch.stack([layer.raw_scores[0] for layer in trace.layers])  # (L, H, T, T)
        probs = torch.stack([layer.attention_probs[0] for layer in trace.layers])  # (L, H, T, T)
        queries = torch.stack([layer.queries[0] for layer in trace.layers])  # (L, H, T, hd)
        keys = torch.stack([layer.keys[0] for layer in trace.layers])  # (L, n_kv, T, hd)
    return AttentionArrays(raw.numpy().copy(), probs.numpy().copy(), queries.numpy().copy(), keys.numpy().copy())


@dataclass(frozen=True)
class WindowView:
    """One traced forward past the window: per layer, head-averaged maps pooled for drawing, and measurements."""

    pooled: np.ndarray  # (L, R, R) max over each block of positions of the head-averaged weights
    block: int  # positions per pooled cell
    n_tokens: int  # positions traced
    window: int
    local_layers: tuple[int, ...]
    outside_max: np.ndarray  # (L,) largest weight any query puts on a key outside its window
    outside_share: np.ndarray  # (L,) mean share of weight that queries past the window put outside it
    outside_cells: int  # (query, key) pairs outside the window, per head and layer
    sink_share: np.ndarray  # (L,) of ``outside_share``, the part on the first token (the sink: <bos> in Gemma)


def window_view(engine: Engine, ids: list[int], pooled_cells: int) -> WindowView:
    """The window's effect, measured on one traced forward of ``ids`` (longer than the model's window)."""
    config = engine.config
    window = int(config.sliding_window)
    _, trace = engine.traced_forward(ids, last_only=True)
    n = len(ids)
    query, key = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    outside = key <= query - window  # (T, T) keys more than window - 1 positions back
    late = np.arange(n) >= window  # queries that have keys outside their window
    block = int(np.ceil(n / pooled_cells))
    cells = int(np.ceil(n / block))
    pooled, outside_max, outside_share, sink_share = [], [], [], []
    for layer in trace.layers:
        probs = layer.attention_probs[0].numpy()  # (H, T, T)
        outside_max.append(float(probs[:, outside].max()))
        outside_share.append(float((probs * outside).sum(-1)[:, late].mean()))
        sink_share.append(float(probs[:, late, 0].mean()))  # key 0 is outside every late query's window
        mean = probs.mean(axis=0)  # (T, T)
        padded = np.zeros((cells * block, cells * block), dtype=np.float32)
        padded[:n, :n] = mean
        pooled.append(padded.reshape(cells, block, cells, block).max(axis=(1, 3)))  # (R, R)
        del probs
    view = WindowView(
        np.stack(pooled),
        block,
        n,
        window,
        config.local_layers,
        np.array(outside_max),
        np.array(outside_share),
        int(outside.sum()),
        np.array(sink_share),
    )
    del trace
    release_freed_memory()  # the trace held ~350 MB of (H, T, T) maps
    return view
