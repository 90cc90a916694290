"""The KV cache: keys and values of past positions, owned by one request (or one batch).

A ``KVCache`` is created per request, preallocated to a capacity, and passed into
``Transformer.forward``. The shared model never holds one, so two users of the
same loaded model can never see each other's cache. It also logs which interventions (if any) wrote
which positions, since K/V computed under an intervention are the intervened ones. All rows of a batch share one
write position (left padding keeps them aligned); padded positions are hidden by
``key_padding_mask``. Every layer keeps every position, local (sliding-window) layers
too: no rolling buffer (``ModelConfig.rolling_kv_cache_bytes`` says what one would save).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .config import ModelConfig


class CacheFullError(RuntimeError):
    """Writing would go past the cache's preallocated capacity."""


@dataclass(frozen=True)
class DecodeView:
    """One decode step's view of a cache: which cache row and column each batch row writes, and what it sees."""

    slots: torch.Tensor  # (B,) the cache row (batch row or slot) of each batch row
    columns: torch.Tensor  # (B,) the column its new K/V go to (also where its sliding window ends)
    key_ok: torch.Tensor  # (B, S) bool: the columns it attends to, its new one included
    keys: torch.Tensor  # (L, P, n_kv, C, hd) the whole cache (the step's new column is written after the graph)
    values: torch.Tensor  # (L, P, n_kv, C, hd)


@dataclass(frozen=True)
class PagedDecodeView:
    """One decode step's view of a paged cache (``inference.serving.paged_cache``), as ``decode_graph.PagedStepGraph``
    reads it: the rows' block tables and the pools, read in place; ``store`` writes the step's new K/V."""

    held: torch.Tensor  # (B,) keys each row holds once this step's is written (its position + 1)
    tables: torch.Tensor  # (G, B, W) each layer group's physical block of each row's logical blocks 0..W-1
    pools: tuple[torch.Tensor, ...]  # each group's keys and values, (L_g, n_kv, NB, bs, hd) each
    store: Callable[[torch.Tensor, torch.Tensor], None]  # the new keys and values (B, L, n_kv, hd) into their blocks


class KVCache:
    def __init__(
        self,
        config: ModelConfig,
        capacity: int,
        batch_size: int = 1,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"KV cache capacity must be >= 1, got {capacity}")
        shape = (config.n_layers, batch_size, config.n_kv_heads, capacity, config.head_dim)
        self.keys = torch.zeros(shape, device=device, dtype=dtype)  # (L, B, n_kv, cap, hd)
        self.values = torch.zeros(shape, device=device, dtype=dtype)  # (L, B, n_kv, cap, hd)
        self.key_padding_mask: torch.Tensor | None = None  # (B, cap) True = real token
        self.capacity = capacity
        self.batch_size = batch_size
        self.length = 0  # positions committed so far (same for every row)
        self._pending = 0  # positions written by the forward in progress
        # (start, end, one spec per row): positions written under interventions (none logged: none used)
        self.written_under: list[tuple[int, int, tuple]] = []

    def __len__(self) -> int:
        return self.length

    @property
    def nbytes(self) -> int:
        """Bytes actually allocated for K and V (the full capacity)."""
        return self.keys.nbytes + self.values.nbytes

    @property
    def used_bytes(self) -> int:
        """Bytes of K and V holding committed positions, measured on the tensors' views."""
        keys = self.keys[:, :, :, : self.length]  # (L, B, n_kv, length, hd)
        values = self.values[:, :, :, : self.length]  # (L, B, n_kv, length, hd)
        return (keys.numel() + values.numel()) * self.keys.element_size()

    def set_padding(self, key_padding_mask: torch.Tensor) -> None:
        """Record which of the positions about to be written are real tokens (B, T)."""
        batch, steps = key_padding_mask.shape
        if self.key_padding_mask is None:
            self.key_padding_mask = torch.ones(
                self.batch_size, self.capacity, dtype=torch.bool, device=self.keys.device
            )
        self.key_padding_mask[:batch, self.length : self.length + steps] = key_padding_mask

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write this step's K/V for ``layer`` and return the views of all positions so far."""
        steps = k.shape[2]  # k: (B, n_kv, T, hd)
        end = self.length + steps
        if end > self.capacity:
            raise CacheFullError(
                f"KV cache holds {self.capacity} positions; writing {steps} more after {self.length} would overflow it"
            )
        self.keys[layer, :, :, self.length : end] = k
        self.values[layer, :, :, self.length : end] = v
        self._pending = steps
        return self.keys[layer, :, :, :end], self.values[layer, :, :, :end]  # (B, n_kv, S, hd)

    def decode_view(self, batch: int) -> DecodeView:
        """The tensors a compiled one-token step of ``batch`` rows reads and writes (``decode_graph.py``).

        Every row writes column ``length`` of its own row and attends to the columns up to it that hold
        real tokens; ``commit()`` afterwards makes the position part of the cache, as after a forward.
        """
        if self.length >= self.capacity:
            raise CacheFullError(f"KV cache holds {self.capacity} positions; all are in use")
        device = self.keys.device
        if self.key_padding_mask is not None:
            key_ok = self.key_padding_mask[:batch, : self.length + 1]  # (B, S)
        else:
            key_ok = torch.ones(batch, self.length + 1, dtype=torch.bool, device=device)  # (B, S)
        rows = torch.arange(batch, device=device)  # (B,)
        self._pending = 1
        return DecodeView(rows, torch.full_like(rows, self.length), key_ok, self.keys, self.values)

    def note_interventions(self, specs: tuple) -> None:
        """Log that the positions the forward in progress writes were computed under ``specs`` (one per row)."""
        end = self.length + self._pending
        if self.written_under and self.written_under[-1][1] == self.length and self.written_under[-1][2] == specs:
            self.written_under[-1] = (self.written_under[-1][0], end, specs)  # the same request, one more step
        else:
            self.written_under.append((self.length, end, specs))

    def interventions_at(self, position: int) -> tuple | None:
        """The specs (one per row) that wrote ``position``'s K/V, or None when it was written without any."""
        for start, end, specs in reversed(self.written_under):
            if start <= position < end:
                return specs
        return None

    def commit(self) -> None:
        """Make the positions written by the last forward part of the cache."""
        self.length += self._pending
        self._pending = 0

    def truncate(self, length: int) -> None:
        """Forget every position from ``length`` on (rewind, or branch from an earlier step)."""
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot truncate a cache of length {self.length} to {length}")
        self.length = length
        self.written_under = [
            (start, min(end, length), specs) for start, end, specs in self.written_under if start < length
        ]

    def layer_views(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V of the committed positions for one layer, each (B, n_kv, length, hd)."""
        return (
            self.keys[layer, :, :, : self.length],
            self.values[layer, :, :, : self.length],
        )

    def attention_mask(self, query_len: int, window: int | None = None) -> torch.Tensor | None:
        """Boolean mask (B, 1, T, S) for the forward in progress, or ``None`` without padding.

        ``window``: a local layer's sliding window (keys that far back or further are hidden too).
        """
        if self.key_padding_mask is None:
            return None
        return causal_padding_mask(self.key_padding_mask[:, : self.length + query_len], self.length, window)


def causal_padding_mask(key_ok: torch.Tensor, query_start: int, window: int | None = None) -> torch.Tensor:
    """Causal mask that also hides padded keys: (B, S) real-token flags -> (B, 1, T, S).

    The queries are the last ``T = S - query_start`` positions. A padded query row would
    otherwise see no key at all (softmax of nothing is NaN), so every position always
    sees itself; the output at a padded position is never used. With a ``window`` (a
    local layer), a query sees only the ``window`` keys ending at itself. Left padding
    sits before a row's tokens, so distances between its real tokens are the same in
    cache columns as in positions.
    """
    total = key_ok.shape[1]
    query_pos = torch.arange(query_start, total, device=key_ok.device)  # (T,)
    key_pos = torch.arange(total, device=key_ok.device)  # (S,)
    causal = key_pos[None, :] <= query_pos[:, None]  # (T, S)
    if window is not None:
        causal &= key_pos[None, :] > query_pos[:, None] - window  # (T, S) the sliding window
    diagonal = key_pos[None, :] == query_pos[:, None]  # (T, S)
    mask = (causal[None, :, :] & key_ok[:, None, :]) | diagonal[None, :, :]  # (B, T, S)
    return mask[:, None, :, :]  # (B, 1, T, S)
