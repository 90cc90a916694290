"""A KV cache for continuous batching: a preallocated pool of per-request slots.

Owns the K/V tensors of a pool of ``n_slots`` slots, each holding up to
``capacity`` positions of one request, and the per-step plan that says which slot
each batch row reads and writes. It plugs into ``Transformer.forward`` through the
same three methods as ``KVCache`` (``append``, ``attention_mask``, ``commit``); the
model is unchanged.

Why slots rather than paged blocks (vLLM / nano-vllm)? Our attention is PyTorch's
``scaled_dot_product_attention`` over dense (B, n_kv, S, hd) tensors with a mask, not
a paged-attention kernel. With one slot per request, a row's keys are one contiguous
slice of the pool, so reading them is a view (or one gather), and "who owns which
memory" is a single integer per request, easy to show in the explorer. The price is
internal fragmentation: a slot reserves ``capacity`` positions however short its
request is; paged blocks would reserve only what is used. The step records report
both numbers (positions used vs reserved) so the waste is visible, not hidden.

Each slot has its own length and positions: a request always starts at position 0
in its slot, whatever its batch mates do, so no left padding is stored. The cache
itself holds no bookkeeping between steps: the caller (the continuous runner) says,
for each row, which slot, how many positions are already cached there, and how many
new tokens arrive (``begin_step``). Within one forward the new tokens are laid out
left-padded (each row's last column is its newest token, so ``last_only`` works);
pad columns are never written to the pool.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..model.config import ModelConfig
from ..model.kv_cache import CacheFullError, DecodeView


@dataclass(frozen=True)
class SlotWrite:
    """One batch row of a step: ``new_tokens`` tokens go into ``slot`` after ``cached`` positions."""

    slot: int
    cached: int
    new_tokens: int


@dataclass
class _StepPlan:
    slots: torch.Tensor  # (B,) slot of each row
    contiguous_from: int | None  # first slot when rows are slots lo..lo+B-1 in order (read is a view)
    write_slots: torch.Tensor  # (N,) slot of each real new token
    write_positions: torch.Tensor  # (N,) its position in the slot
    real: torch.Tensor  # (B, T) True at the columns holding real new tokens
    all_real: bool  # no pad column at all (every row brings T tokens)
    key_len: int  # S: positions read per row (longest row after this step)
    mask: torch.Tensor  # (B, 1, T, S)
    positions: torch.Tensor  # (B, T) each column's position in its slot (pads: 0)


class SlotKVCache:
    def __init__(
        self,
        config: ModelConfig,
        n_slots: int,
        capacity: int,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> None:
        if n_slots < 1 or capacity < 1:
            raise ValueError(f"a slot pool needs n_slots >= 1 and capacity >= 1, got {n_slots} and {capacity}")
        shape = (config.n_layers, n_slots, config.n_kv_heads, capacity, config.head_dim)
        self.keys = torch.zeros(shape, device=device, dtype=dtype)  # (L, slots, n_kv, cap, hd)
        self.values = torch.zeros(shape, device=device, dtype=dtype)  # (L, slots, n_kv, cap, hd)
        self.n_slots = n_slots
        self.capacity = capacity
        self.device = torch.device(device)
        self._plan: _StepPlan | None = None
        self.length = 0  # longest row of the step in progress (the model reads it only for traces)

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + self.values.nbytes

    def begin_step(self, rows: list[SlotWrite]) -> torch.Tensor:
        """Plan the next forward for ``rows``; returns the position ids (B, T) to pass to the model."""
        if not rows:
            raise ValueError("a step needs at least one row")
        for row in rows:
            self._check_row(row)
        steps = max(row.new_tokens for row in rows)
        pad = torch.tensor([steps - row.new_tokens for row in rows], device=self.device)  # (B,)
        cached = torch.tensor([row.cached for row in rows], device=self.device)  # (B,)
        column = torch.arange(steps, device=self.device)  # (T,)
        real = column[None, :] >= pad[:, None]  # (B, T) left padding within the step
        positions = torch.where(real, cached[:, None] + column[None, :] - pad[:, None], 0)  # (B, T)
        slots = torch.tensor([row.slot for row in rows], device=self.device)  # (B,)
        key_len = max(row.cached + row.new_tokens for row in rows)
        key_pos = torch.arange(key_len, device=self.device)  # (S,)
        # A real query sees its own slot up to itself; a pad query sees only position 0 (never NaN).
        mask = key_pos[None, None, :] <= positions[:, :, None]  # (B, T, S)
        first = rows[0].slot
        in_order = [row.slot for row in rows] == list(range(first, first + len(rows)))
        self._plan = _StepPlan(
            slots=slots,
            contiguous_from=first if in_order else None,
            write_slots=slots[:, None].expand_as(real)[real],
            write_positions=positions[real],
            real=real,
            all_real=bool(real.all()),
            key_len=key_len,
            mask=mask[:, None],  # (B, 1, T, S)
            positions=positions,
        )
        self.length = max(row.cached for row in rows)
        return positions

    def _check_row(self, row: SlotWrite) -> None:
        if not 0 <= row.slot < self.n_slots:
            raise ValueError(f"slot {row.slot} is outside the pool (0..{self.n_slots - 1})")
        if row.new_tokens < 1:
            raise ValueError(f"a row must bring at least one token, slot {row.slot} brings {row.new_tokens}")
        if row.cached + row.new_tokens > self.capacity:
            raise CacheFullError(
                f"slot {row.slot} holds {self.capacity} positions; writing {row.new_tokens} after "
                f"{row.cached} would overflow it"
            )

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write this step's real K/V (B, n_kv, T, hd) into the slots; return each row's keys and values."""
        plan = self._require_plan()
        if plan.all_real and k.shape[2] == 1:  # decode: one token per row, no gather of pad columns
            new_k, new_v = k[:, :, 0], v[:, :, 0]  # (B, n_kv, hd)
        else:
            new_k = k.transpose(1, 2)[plan.real]  # (N, n_kv, hd)
            new_v = v.transpose(1, 2)[plan.real]  # (N, n_kv, hd)
        self.keys[layer][plan.write_slots, :, plan.write_positions] = new_k
        self.values[layer][plan.write_slots, :, plan.write_positions] = new_v
        return self._read(self.keys[layer], plan), self._read(self.values[layer], plan)

    @staticmethod
    def _read(pool: torch.Tensor, plan: _StepPlan) -> torch.Tensor:
        """Rows' first S positions from ``pool`` (slots, n_kv, cap, hd) -> (B, n_kv, S, hd)."""
        if plan.contiguous_from is not None:
            first = plan.contiguous_from
            return pool[first : first + plan.slots.numel(), :, : plan.key_len]  # a view, no copy
        return pool[:, :, : plan.key_len].index_select(0, plan.slots)  # (B, n_kv, S, hd)

    def decode_view(self, batch: int) -> DecodeView | None:
        """The planned step as a compiled one-token step reads it (``inference.model.decode_graph``), or None
        when the step is not one new token per row."""
        plan = self._require_plan()
        if not plan.all_real or plan.real.shape[1] != 1 or plan.slots.numel() != batch:
            return None
        return DecodeView(plan.slots, plan.positions[:, 0], plan.mask[:, 0, 0], self.keys, self.values)

    def copy_positions(self, source: int, target: int, n: int) -> None:
        """Copy slot ``source``'s first ``n`` positions into slot ``target`` (a shared prefix), every layer."""
        for slot in (source, target):
            self._check_row(SlotWrite(slot, 0, max(n, 1)))
        self.keys[:, target, :, :n] = self.keys[:, source, :, :n]  # (L, n_kv, n, hd)
        self.values[:, target, :, :n] = self.values[:, source, :, :n]  # (L, n_kv, n, hd)

    def attention_mask(self, query_len: int, window: int | None = None) -> torch.Tensor:
        """Boolean mask (B, 1, T, S): each row sees only its own slot's positions up to itself.

        ``window``: a local layer's sliding window; a slot's position is the token's own
        position, so the window is measured in slot positions.
        """
        plan = self._require_plan()
        if plan.mask.shape[2] != query_len:
            raise ValueError(f"the step was planned for {plan.mask.shape[2]} columns, the forward has {query_len}")
        if window is None or plan.key_len <= window:
            return plan.mask
        key_pos = torch.arange(plan.key_len, device=self.device)  # (S,)
        inside = key_pos[None, None, :] > plan.positions[:, :, None] - window  # (B, T, S); each query keeps itself
        return plan.mask & inside[:, None]  # (B, 1, T, S)

    def commit(self) -> None:
        """End the step; the caller advances each request's cached length by its new tokens."""
        self._plan = None

    def _require_plan(self) -> _StepPlan:
        if self._plan is None:
            raise RuntimeError("SlotKVCache.begin_step(rows) must be called before each forward")
        return self._plan
