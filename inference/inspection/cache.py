"""One request's KV cache as the Generation page shows it: its tensors as arrays, its size, and what it saves.

Owns ``cache_view`` (one layer's cached K and V of a ``Stepper``, as numpy), ``cache_bytes`` (the
cache's size from the config's formula, checked against the real tensors, and what a rolling
buffer for local layers would hold) and ``measure_cache_timing`` (greedy tokens one at a time,
a cached decode step against a full recompute at each length, both timed and compared).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..generation.engine import Engine
from ..generation.stepper import Stepper


@dataclass(frozen=True)
class CacheView:
    keys: np.ndarray  # (n_kv, positions, head_dim)
    values: np.ndarray  # (n_kv, positions, head_dim)
    token_ids: list[int]  # the token at each cached position shown
    new_rows: list[int]  # rows (of those shown) written by the last forward
    first_position: int = 0  # the position of the first row shown


def cache_view(stepper: Stepper, layer: int, max_positions: int = 96) -> CacheView:
    """One layer's cached K and V (the last ``max_positions`` positions at most)."""
    keys, values = stepper.cache.layer_views(layer)  # (1, n_kv, L, hd) each
    length = keys.shape[2]
    first = max(0, length - max_positions)
    last = stepper.chosen[-1] if stepper.chosen else None
    new = range(last.cache_len_before, last.cache_len_after) if last else range(0)
    return CacheView(
        keys=keys[0, :, first:].float().cpu().numpy(),
        values=values[0, :, first:].float().cpu().numpy(),
        token_ids=stepper.ids[first:length],
        new_rows=[p - first for p in new if p >= first],
        first_position=first,
    )


@dataclass(frozen=True)
class CacheBytes:
    formula_now: int  # 2 x layers x KV heads x head dim x bytes x tokens
    tensors_now: int  # the same, measured on the cache's actual tensors
    allocated: int  # the preallocated capacity of this request's cache
    full_context: int  # the formula at the model's whole context length
    formula: str
    per_token: int  # the formula for one position
    rolling_now: int | None  # what a rolling buffer for the local layers would hold now (None: no local layers)
    rolling_full_context: int | None  # ... and at the whole context


def cache_bytes(stepper: Stepper) -> CacheBytes:
    config, cache = stepper.engine.config, stepper.cache
    element = cache.keys.element_size()
    return CacheBytes(
        formula_now=config.kv_cache_bytes(len(cache), element),
        tensors_now=cache.used_bytes,
        allocated=cache.nbytes,
        full_context=config.kv_cache_bytes(config.max_seq_len, element),
        formula=(
            f"2 × {config.n_layers} layers × {config.n_kv_heads} KV heads × {config.head_dim} dims × "
            f"{element} bytes × tokens"
        ),
        per_token=config.kv_cache_bytes(1, element),
        rolling_now=config.rolling_kv_cache_bytes(len(cache), element) if config.local_layers else None,
        rolling_full_context=(
            config.rolling_kv_cache_bytes(config.max_seq_len, element) if config.local_layers else None
        ),
    )


@dataclass
class CacheTiming:
    context_lengths: list[int]
    cached_ms: list[float]
    uncached_ms: list[float]
    max_abs_diff: float  # largest |logit difference| between the two paths over every step
    prefill_ms: float
    prompt_tokens: int


def measure_cache_timing(
    engine: Engine,
    prompt_ids: list[int],
    n_tokens: int,
    progress: Callable[[float, str], None] | None = None,
    repeats: int = 2,
) -> CacheTiming:
    """Greedy tokens one at a time, timing a cached decode step and a full recompute at each length.

    Each is timed ``repeats`` times and the fastest kept (the cached step is re-run by truncating
    the cache by one position), so a moment of machine noise does not show as a spike.
    """
    cache = engine.new_cache(len(prompt_ids) + n_tokens)
    started = time.perf_counter()
    logits = engine.prefill(prompt_ids, cache)
    prefill_ms = 1000 * (time.perf_counter() - started)
    ids = list(prompt_ids)
    result = CacheTiming([], [], [], 0.0, prefill_ms, len(prompt_ids))
    for step in range(n_tokens):
        ids.append(int(logits.argmax()))
        cached, uncached = [], []
        for attempt in range(repeats):
            if attempt:
                cache.truncate(len(cache) - 1)  # forget the position, to time the same step again
            started = time.perf_counter()
            logits = engine.decode_step(ids[-1], cache)
            cached.append(1000 * (time.perf_counter() - started))
            started = time.perf_counter()
            full = engine.recompute_last(ids)  # what generate(use_cache=False) runs each step
            uncached.append(1000 * (time.perf_counter() - started))
        result.cached_ms.append(min(cached))
        result.uncached_ms.append(min(uncached))
        result.context_lengths.append(len(ids))
        result.max_abs_diff = max(result.max_abs_diff, float((full - logits).abs().max()))
        if progress:
            progress((step + 1) / n_tokens, f"{len(ids)} tokens")
    return result
