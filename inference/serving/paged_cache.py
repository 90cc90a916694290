"""A paged KV cache: K/V live in fixed-size blocks of a shared pool, found through each sequence's block table.

Owns ``PagedKVCache``: the pool tensors, one ``BlockManager`` per layer group (the bookkeeping:
tables, reference counts, prefix caching, copy-on-write, fork, preemption; ``block_manager.py``),
and the per-step plan that turns the tables into the indices one forward writes and reads. It plugs
into ``Transformer.forward`` through the same methods as ``SlotKVCache`` (``append``,
``attention_mask``, ``commit``, after ``begin_step``); the model is unchanged.

Reading is a gather: for each row, the blocks its queries can see are gathered from the pool into
a dense (B, n_kv, S, hd) tensor, in logical order, and scaled_dot_product_attention runs on it with
a mask that hides the columns past the row's end (and outside a local layer's window). The same
code runs on CPU and CUDA. A model loaded with its compiled step reads the blocks in place on a decode step instead
(``decode_view``: the rows' block tables and the pools, for ``decode_graph.PagedStepGraph``).

Layer groups: a model with sliding-window layers (Gemma 3) keeps two pools and two managers, one for
the global layers and one for the local ones. After each step the local group gives back the blocks
that slid wholly out of the window (``BlockManager.release_before``) while the global group keeps
every block, so past the window a sequence's local layers hold about ``window`` positions, not all
(``used_bytes`` against ``bytes_without_release`` is what that saves).
Each group's pool has ``num_blocks`` blocks. A prefix hit needs the same blocks cached in every group.

Each sequence writes positions 0, 1, 2, ... of its own; within one forward the new tokens are laid
out left-padded (each row's last column is its newest token), and pad columns are never written.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..model.config import ModelConfig
from ..model.kv_cache import PagedDecodeView
from .block_manager import BlockManager, OutOfBlocksError


@dataclass(frozen=True)
class PagedWrite:
    """One batch row of a step: sequence ``seq_id`` feeds ``token_ids`` after its cached positions."""

    seq_id: int
    token_ids: list[int]


@dataclass
class _LayerGroup:
    layers: tuple[int, ...]  # model layer indices, in order
    window: int | None  # keys a query sees (itself included); None: every earlier key
    manager: BlockManager
    keys: torch.Tensor  # (L_group, n_kv, num_blocks, block_size, hd)
    values: torch.Tensor  # (L_group, n_kv, num_blocks, block_size, hd)


@dataclass
class _GroupPlan:
    read: torch.Tensor  # (B * W,) the physical block of each row's W logical blocks read (pad: block 0, masked)
    key_len: int  # S: the columns a row reads, at most W * block_size (the longest row's held keys, as the slot cache)
    mask: torch.Tensor  # (B, 1, T, S)


@dataclass
class _StepPlan:
    rows: list[PagedWrite]
    write: list[tuple[torch.Tensor, torch.Tensor]]  # per group: (N,) block and (N,) offset of each real new token
    real: torch.Tensor  # (B, T) True at the columns holding real new tokens
    all_real: bool
    groups: list[_GroupPlan]
    held: list[int]  # each row's keys once the step is written


class PagedKVCache:
    decode_graph = "paged"  # the compiled step's graph that reads this cache (``decode_view``)

    def __init__(
        self,
        config: ModelConfig,
        num_blocks: int,
        block_size: int = 16,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError(f"a paged cache needs num_blocks >= 1 and block_size >= 1, got {num_blocks}, {block_size}")
        self.config = config
        self.block_size = block_size
        self.num_blocks = num_blocks
        self.device = torch.device(device)
        self.groups: list[_LayerGroup] = []
        for window, layers in config.layer_groups():
            # Head-major blocks: a gathered row is one contiguous (S, hd) matrix per head, as SDPA reads it.
            shape = (len(layers), config.n_kv_heads, num_blocks, block_size, config.head_dim)
            self.groups.append(
                _LayerGroup(
                    layers,
                    window,
                    BlockManager(num_blocks, block_size),
                    torch.zeros(shape, device=device, dtype=dtype),  # (L_group, n_kv, blocks, bs, hd)
                    torch.zeros(shape, device=device, dtype=dtype),  # (L_group, n_kv, blocks, bs, hd)
                )
            )
        self._where = config.layer_places()  # the groups above are config.layer_groups(), in order
        self._layer_ids = [torch.tensor(group.layers, device=self.device) for group in self.groups]  # (L_g,) each
        self._plan: _StepPlan | None = None
        self.length = 0  # longest cached row of the step in progress (the model reads it only for traces)

    # -- sizes --------------------------------------------------------------------------
    @property
    def nbytes(self) -> int:
        """Bytes of the pools (every group), allocated whether used or not."""
        return sum(group.keys.nbytes + group.values.nbytes for group in self.groups)

    @property
    def used_bytes(self) -> int:
        """Bytes of the blocks in use (held by a sequence), every group."""
        return sum(self._block_bytes(group) * group.manager.num_used for group in self.groups)

    @property
    def bytes_without_release(self) -> int:
        """Bytes the blocks in use would take if the sliding-window layers kept every block, as the global
        layers do: each group at the block count of a group that releases nothing (the tables, hits and
        forks of every group are the same but for the released blocks). Equals ``used_bytes`` without windows."""
        keeping = [group for group in self.groups if group.window is None]
        if keeping:
            blocks = keeping[0].manager.num_used
        else:  # every layer local: each table's blocks as if none were released (a shared one once per table)
            blocks = sum(len(table.blocks) for table in self.groups[0].manager.tables.values())
        return sum(self._block_bytes(group) * blocks for group in self.groups)

    def _block_bytes(self, group: _LayerGroup) -> int:
        """Bytes of one block of ``group``: K and V of its positions in every layer of the group."""
        return group.keys[:, :, 0].numel() * 2 * group.keys.element_size()

    # -- sequences ----------------------------------------------------------------------
    def prefix_hits(self, token_ids: list[int]) -> int:
        """Leading blocks of ``token_ids`` cached in every group."""
        return min(group.manager.prefix_hits(token_ids) for group in self.groups)

    def can_add(self, token_ids: list[int], shareable: bool = True) -> bool:
        """Whether ``token_ids`` can be admitted and their uncached positions written now."""
        hits = self.prefix_hits(token_ids) if shareable else 0
        return all(g.manager.blocks_to_admit(token_ids, hits) <= g.manager.num_free for g in self.groups)

    def add(self, seq_id: int, token_ids: list[int], shareable: bool = True) -> int:
        """Give ``seq_id`` a block table (sharing the cached start of ``token_ids`` if ``shareable``);
        returns how many positions are already cached (the caller feeds the rest)."""
        hits = self.prefix_hits(token_ids) if shareable else 0
        cached = [group.manager.add(seq_id, token_ids, hits, shareable) for group in self.groups]
        return cached[0]

    def blocks_to_write(self, seq_id: int, n_new: int) -> int:
        """The most free blocks any group needs for ``seq_id``'s next ``n_new`` positions."""
        return max(group.manager.blocks_to_reserve(seq_id, n_new) for group in self.groups)

    def can_write(self, writes: dict[int, int]) -> bool:
        """Whether every sequence ``seq_id -> n_new`` of one step can reserve its positions together."""
        return all(
            sum(group.manager.blocks_to_reserve(s, n) for s, n in writes.items()) <= group.manager.num_free
            for group in self.groups
        )

    def fork(self, parent_id: int, child_id: int) -> None:
        """``child_id`` shares every block of ``parent_id`` (parallel sampling)."""
        for group in self.groups:
            group.manager.fork(parent_id, child_id)

    def free(self, seq_id: int) -> None:
        """Give back every block of ``seq_id`` (finished, cancelled, or preempted: recomputed later)."""
        for group in self.groups:
            group.manager.free(seq_id)

    def num_tokens(self, seq_id: int) -> int:
        return self.groups[0].manager.tables[seq_id].num_tokens

    def has(self, seq_id: int) -> bool:
        return seq_id in self.groups[0].manager.tables

    # -- one forward --------------------------------------------------------------------
    def begin_step(self, rows: list[PagedWrite]) -> torch.Tensor:
        """Reserve the rows' new positions (copy-on-write done here) and plan the forward; returns the position
        ids (B, T) to pass to the model. Raises ``OutOfBlocksError`` (nothing reserved) when the pool is short."""
        if not rows:
            raise ValueError("a step needs at least one row")
        if any(not row.token_ids for row in rows):
            raise ValueError("a row must bring at least one token")
        if not self.can_write({row.seq_id: len(row.token_ids) for row in rows}):
            raise OutOfBlocksError("the pool has too few free blocks for this step; preempt a sequence first")
        cached = [self.num_tokens(row.seq_id) for row in rows]
        for group in self.groups:
            for row in rows:
                for source, target in group.manager.reserve(row.seq_id, len(row.token_ids)):
                    self._copy_block(group, source, target)
        steps = max(len(row.token_ids) for row in rows)
        new = torch.tensor([len(row.token_ids) for row in rows], device=self.device)  # (B,)
        start = torch.tensor(cached, device=self.device)  # (B,)
        column = torch.arange(steps, device=self.device)  # (T,)
        pad = steps - new  # (B,)
        real = column[None, :] >= pad[:, None]  # (B, T) left padding within the step
        positions = torch.where(real, start[:, None] + column[None, :] - pad[:, None], 0)  # (B, T)
        write = []
        for group in self.groups:
            targets = [target for row in rows for target in group.manager.write_targets(row.seq_id)]
            blocks_offsets = torch.tensor(targets, device=self.device, dtype=torch.long)  # (N, 2)
            write.append((blocks_offsets[:, 0], blocks_offsets[:, 1]))
        held = [start + len(row.token_ids) for row, start in zip(rows, cached)]  # each row's keys after this step
        plans = [self._plan_reads(group, rows, cached, held, positions, real) for group in self.groups]
        self._plan = _StepPlan(rows, write, real, bool(real.all()), plans, held)
        self.length = max(cached)
        return positions

    def _plan_reads(self, group, rows, cached, held, positions, real) -> _GroupPlan:
        """The blocks each batch row reads for ``group`` (the window's first to the row's last), and the mask over them."""
        size = self.block_size
        first, last = [], []
        for start, end in zip(cached, held):
            first_key = 0 if group.window is None else max(0, start - group.window + 1)
            first.append(first_key // size)
            last.append((end - 1) // size)
        width = max(b - a + 1 for a, b in zip(first, last))
        tables = []
        for row, a, b in zip(rows, first, last):
            blocks = group.manager.tables[row.seq_id].blocks[a : b + 1]
            tables.append(blocks + [0] * (width - len(blocks)))
        physical = torch.tensor(tables, device=self.device)  # (B, W)
        logical = torch.tensor(first, device=self.device)[:, None] + torch.arange(width, device=self.device)  # (B, W)
        offset = torch.arange(size, device=self.device)  # (bs,)
        key_pos = (logical[:, :, None] * size + offset).reshape(len(rows), width * size)  # (B, S)
        ends = torch.tensor(held, device=self.device)  # (B,)
        # The columns past every row's last held key are cut off: a global layer then reads exactly the slot
        # cache's S columns (the longest row's keys), so attention sums over the same shapes as there.
        key_len = max(end - a * size for end, a in zip(held, first))
        key_pos = key_pos[:, :key_len]  # (B, S)
        key_ok = key_pos < ends[:, None]  # (B, S): held positions (pad blocks lie past the end)
        sees = key_pos[:, None, :] <= positions[:, :, None]  # (B, T, S) causal
        if group.window is not None:
            sees &= key_pos[:, None, :] > positions[:, :, None] - group.window  # (B, T, S) the sliding window
        # A pad query (never used) sees every held key, so no softmax row is empty.
        mask = key_ok[:, None, :] & (sees | ~real[:, :, None])  # (B, T, S)
        return _GroupPlan(physical.reshape(-1), key_len, mask[:, None])  # read: (B * W,); mask: (B, 1, T, S)

    def _copy_block(self, group: _LayerGroup, source: int, target: int) -> None:
        group.keys[:, :, target] = group.keys[:, :, source]  # (L_group, n_kv, bs, hd)
        group.values[:, :, target] = group.values[:, :, source]  # (L_group, n_kv, bs, hd)

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write this step's real K/V (B, n_kv, T, hd) into their blocks; return each row's visible keys and values."""
        plan = self._require_plan()
        g, index = self._where[layer]
        group, reads = self.groups[g], plan.groups[g]
        if plan.all_real and k.shape[2] == 1:  # decode: one token per row, no gather of pad columns
            new_k, new_v = k[:, :, 0], v[:, :, 0]  # (B, n_kv, hd)
        else:
            new_k = k.transpose(1, 2)[plan.real]  # (N, n_kv, hd)
            new_v = v.transpose(1, 2)[plan.real]  # (N, n_kv, hd)
        blocks, offsets = plan.write[g]
        group.keys[index][:, blocks, offsets] = new_k.transpose(0, 1)  # (n_kv, N, hd)
        group.values[index][:, blocks, offsets] = new_v.transpose(0, 1)  # (n_kv, N, hd)
        batch, n_kv, head_dim = k.shape[0], k.shape[1], k.shape[3]
        keys = group.keys[index].index_select(1, reads.read)  # (n_kv, B * W, bs, hd)
        values = group.values[index].index_select(1, reads.read)  # (n_kv, B * W, bs, hd)
        width = reads.read.numel() // batch * self.block_size  # W * block_size
        keys = keys.view(n_kv, batch, width, head_dim)[:, :, : reads.key_len].transpose(0, 1)  # (B, n_kv, S, hd)
        values = values.view(n_kv, batch, width, head_dim)[:, :, : reads.key_len].transpose(0, 1)  # (B, n_kv, S, hd)
        return keys, values

    def decode_view(self, batch: int) -> PagedDecodeView | None:
        """The planned step as the compiled paged step reads it (``inference.model.decode_graph.PagedStepGraph``): each
        row's table from its logical block 0 (a block released from a window reads as block 0, outside the window's
        mask), or None when the step is not one new token per row."""
        plan = self._require_plan()
        if not plan.all_real or plan.real.shape[1] != 1 or len(plan.rows) != batch:
            return None
        size = self.block_size
        width = -(-max(plan.held) // size)  # W: the longest row's blocks
        tables = []
        for group in self.groups:
            for row, held in zip(plan.rows, plan.held):
                blocks = group.manager.tables[row.seq_id].blocks[: -(-held // size)]
                tables.append([0 if block is None else block for block in blocks] + [0] * (width - len(blocks)))
        tables = torch.tensor(tables, device=self.device).view(len(self.groups), batch, width)  # (G, B, W)
        held = torch.tensor(plan.held, device=self.device)  # (B,)
        pools = tuple(pool for group in self.groups for pool in (group.keys, group.values))
        return PagedDecodeView(held, tables, pools, self._store_decoded)

    def _store_decoded(self, new_keys: torch.Tensor, new_values: torch.Tensor) -> None:
        """Write a compiled step's new keys and values (B, L, n_kv, hd) into the blocks ``begin_step`` reserved."""
        plan = self._require_plan()
        for g, group in enumerate(self.groups):
            blocks, offsets = plan.write[g]  # (B,) each: one new token per row
            layers = self._layer_ids[g]
            whole = len(self.groups) == 1
            keys = new_keys if whole else new_keys.index_select(1, layers)  # (B, L_g, n_kv, hd)
            values = new_values if whole else new_values.index_select(1, layers)  # (B, L_g, n_kv, hd)
            group.keys[:, :, blocks, offsets] = keys.permute(1, 2, 0, 3)  # (L_g, n_kv, B, hd)
            group.values[:, :, blocks, offsets] = values.permute(1, 2, 0, 3)  # (L_g, n_kv, B, hd)

    def attention_mask(self, query_len: int, window: int | None = None) -> torch.Tensor:
        """Boolean mask (B, 1, T, S) over the key columns ``append`` returns for layers with ``window``."""
        plan = self._require_plan()
        g = next((g for g, group in enumerate(self.groups) if group.window == window), None)
        if g is None:
            raise ValueError(f"no layer group has the window {window}")
        mask = plan.groups[g].mask
        if mask.shape[2] != query_len:
            raise ValueError(f"the step was planned for {mask.shape[2]} columns, the forward has {query_len}")
        return mask

    def commit(self) -> None:
        """The step's positions hold their K/V now: key the full blocks, release what slid out of a window."""
        plan = self._require_plan()
        for group in self.groups:
            for row in plan.rows:
                group.manager.commit(row.seq_id, row.token_ids)
                if group.window is not None:
                    held = group.manager.tables[row.seq_id].num_tokens
                    group.manager.release_before(row.seq_id, held - group.window + 1)
        self._plan = None

    def _require_plan(self) -> _StepPlan:
        if self._plan is None:
            raise RuntimeError("PagedKVCache.begin_step(rows) must be called before each forward")
        return self._plan
