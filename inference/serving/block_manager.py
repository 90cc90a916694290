"""Paged KV bookkeeping: which fixed-size physical block holds which positions of which sequence.

Owns ``BlockManager``: a pool of ``num_blocks`` blocks of ``block_size`` positions, a free list,
a reference count per block and a block table per sequence (logical block i -> physical block).
It never touches a tensor (nano-vllm's ``BlockManager`` is the model); the paged cache
(``paged_cache.py``) turns its answers into reads, writes and copies of K/V.

What it does beside allocation:

- **Automatic prefix caching.** A block that fills up is keyed by a hash of its tokens and of
  the hash before it (so the key names the whole prefix). A later sequence whose prompt starts
  with the same full blocks shares them (reference count + 1) instead of computing them again.
  A block whose count falls to 0 keeps its key and its contents on the free list until it is
  handed out again (least recently freed first, blocks holding nothing reusable before those).
- **Copy-on-write.** Only a sequence's last, partly filled block is ever written. If it is
  shared (after a ``fork``), the writer gets a fresh copy first: ``reserve`` returns the
  (source, target) pairs the caller must copy before writing.
- **Parallel sampling.** ``fork`` gives a child the parent's table, sharing every block.
- **Preemption.** ``free`` gives all of a sequence's blocks back; the caller recomputes it later
  (whatever of its prefix is still cached is a hit then).
- **Sliding windows.** ``release_before`` drops a sequence's blocks that lie wholly before a
  position (a local layer's window has slid past them); its table keeps ``None`` there. A model
  with local and global layers uses one manager per layer group (the paged cache does), so the
  global layers keep every block. Simplification: a prefix hit needs the whole chain of blocks
  from the start, so in the local group a hit past the window happens only while the blocks
  that slid out are still cached on the free list.

A sequence that must not share (its K/V written under interventions) is added with
``shareable=False``: it takes no hits and registers no keys.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field


class OutOfBlocksError(RuntimeError):
    """The pool has too few free blocks for the request (the caller preempts or waits)."""


@dataclass
class Block:
    block_id: int
    ref_count: int = 0
    key: bytes | None = None  # prefix-cache key of a full block (None: not full, or not shareable)
    token_ids: tuple[int, ...] = ()  # the tokens under that key (checked on a hit, against hash collisions)


@dataclass
class BlockTable:
    """One sequence's view of the pool."""

    blocks: list[int | None] = field(default_factory=list)  # logical -> physical; None: released (slid out)
    token_ids: list[int] = field(default_factory=list)  # tokens whose K/V are written, in order
    keys: list[bytes] = field(default_factory=list)  # the key of each full logical block (a chain)
    shareable: bool = True
    reserved: int = 0  # positions reserved (blocks in place) beyond token_ids, for the write in progress

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)


def block_key(previous: bytes | None, token_ids: tuple[int, ...]) -> bytes:
    """The key of a full block: a digest of the previous block's key and this block's tokens."""
    digest = hashlib.blake2b(previous or b"", digest_size=16)
    digest.update(b"".join(t.to_bytes(8, "little", signed=True) for t in token_ids))
    return digest.digest()


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int = 16) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError(f"a block pool needs num_blocks >= 1 and block_size >= 1, got {num_blocks}, {block_size}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.free_ids: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))  # first = next handed out
        self.cached: dict[bytes, list[int]] = {}  # key -> the blocks holding it (two sequences may compute one)
        self.tables: dict[int, BlockTable] = {}
        self.hits = 0  # blocks shared through the prefix cache, since the start
        self.copies = 0  # copy-on-write copies, since the start

    # -- counts -------------------------------------------------------------------------
    @property
    def num_free(self) -> int:
        return len(self.free_ids)

    @property
    def num_used(self) -> int:
        return self.num_blocks - len(self.free_ids)

    def blocks_for(self, n_tokens: int) -> int:
        return -(-n_tokens // self.block_size)

    # -- admission ----------------------------------------------------------------------
    def prefix_hits(self, token_ids: list[int]) -> int:
        """How many leading full blocks of ``token_ids`` are cached. The last token is never counted
        (the forward must feed it for its logits), so at most ``(len - 1) // block_size`` blocks."""
        previous, hits = None, 0
        for i in range((len(token_ids) - 1) // self.block_size):
            tokens = tuple(token_ids[i * self.block_size : (i + 1) * self.block_size])
            previous = block_key(previous, tokens)
            holders = self.cached.get(previous)
            if not holders or self.blocks[holders[0]].token_ids != tokens:
                break
            hits += 1
        return hits

    def blocks_to_admit(self, token_ids: list[int], hits: int) -> int:
        """Free blocks that admitting ``token_ids`` with ``hits`` shared blocks takes off the free list."""
        revived = sum(block_id in self.free_ids for block_id, _ in self._hit_chain(token_ids, hits))
        return revived + self.blocks_for(len(token_ids)) - hits

    def add(self, seq_id: int, token_ids: list[int], hits: int = 0, shareable: bool = True) -> int:
        """Start a table for ``seq_id`` sharing its first ``hits`` cached blocks (from ``prefix_hits``);
        returns the positions already cached. The rest is reserved by ``reserve`` before it is written."""
        if seq_id in self.tables:
            raise ValueError(f"sequence {seq_id} already has a block table")
        if hits and not shareable:
            raise ValueError("a sequence that does not share cannot take prefix hits")
        table = BlockTable(shareable=shareable)
        for block_id, key in self._hit_chain(token_ids, hits):
            self._take(block_id)
            table.blocks.append(block_id)
            table.keys.append(key)
        table.token_ids = list(token_ids[: hits * self.block_size])
        self.hits += hits
        self.tables[seq_id] = table
        return hits * self.block_size

    def _hit_chain(self, token_ids: list[int], hits: int) -> list[tuple[int, bytes]]:
        """The block to share for each of the first ``hits`` logical blocks (one in use if any), with its key."""
        chain, previous = [], None
        for i in range(hits):
            previous = block_key(previous, tuple(token_ids[i * self.block_size : (i + 1) * self.block_size]))
            holders = self.cached[previous]
            chain.append((next((b for b in holders if self.blocks[b].ref_count > 0), holders[0]), previous))
        return chain

    # -- writing ------------------------------------------------------------------------
    def blocks_to_reserve(self, seq_id: int, n_new: int) -> int:
        """Free blocks ``reserve(seq_id, n_new)`` would take (new blocks, plus one for a copy-on-write)."""
        table = self.tables[seq_id]
        end = table.num_tokens + n_new
        needed = self.blocks_for(end) - len(table.blocks)
        return max(needed, 0) + int(self._must_copy(table, n_new))

    def reserve(self, seq_id: int, n_new: int) -> list[tuple[int, int]]:
        """Make room for the next ``n_new`` positions of ``seq_id``; the (source, target) block copies the
        caller must make first (copy-on-write of a shared last block). Raises ``OutOfBlocksError``."""
        if n_new < 1:
            raise ValueError(f"a write brings at least one position, got {n_new}")
        if self.blocks_to_reserve(seq_id, n_new) > self.num_free:
            raise OutOfBlocksError(f"{self.blocks_to_reserve(seq_id, n_new)} blocks needed, {self.num_free} free")
        table = self.tables[seq_id]
        copies = []
        if self._must_copy(table, n_new):
            last = len(table.blocks) - 1
            source, target = table.blocks[last], self._allocate()
            self._release(source)
            table.blocks[last] = target
            copies.append((source, target))
            self.copies += 1
        while len(table.blocks) < self.blocks_for(table.num_tokens + n_new):
            table.blocks.append(self._allocate())
        table.reserved = n_new
        return copies

    def _must_copy(self, table: BlockTable, n_new: int) -> bool:
        """Whether the next write lands in a partly filled last block that another sequence shares."""
        if table.num_tokens % self.block_size == 0 or n_new < 1:
            return False
        last = table.blocks[table.num_tokens // self.block_size]
        return last is not None and self.blocks[last].ref_count > 1

    def write_targets(self, seq_id: int) -> list[tuple[int, int]]:
        """(block, offset) of each reserved position, in order: where its K/V go."""
        table = self.tables[seq_id]
        start = table.num_tokens
        return [(table.blocks[p // self.block_size], p % self.block_size) for p in range(start, start + table.reserved)]

    def commit(self, seq_id: int, token_ids: list[int]) -> None:
        """The reserved positions now hold the K/V of ``token_ids``; key every block that became full."""
        table = self.tables[seq_id]
        if len(token_ids) != table.reserved:
            raise ValueError(f"{table.reserved} positions were reserved for sequence {seq_id}, {len(token_ids)} given")
        table.token_ids.extend(token_ids)
        table.reserved = 0
        for index in range(len(table.keys), table.num_tokens // self.block_size):
            tokens = tuple(table.token_ids[index * self.block_size : (index + 1) * self.block_size])
            key = block_key(table.keys[-1] if table.keys else None, tokens)
            table.keys.append(key)
            block_id = table.blocks[index]
            if table.shareable and block_id is not None and self.blocks[block_id].key is None:
                self.blocks[block_id].key, self.blocks[block_id].token_ids = key, tokens
                self.cached.setdefault(key, []).append(block_id)

    # -- sharing and freeing ------------------------------------------------------------
    def fork(self, parent_id: int, child_id: int) -> None:
        """Give ``child_id`` the parent's table; every block is shared (written later: copy-on-write)."""
        if child_id in self.tables:
            raise ValueError(f"sequence {child_id} already has a block table")
        parent = self.tables[parent_id]
        if parent.reserved:
            raise ValueError(f"sequence {parent_id} has a write in progress; fork after its commit")
        for block_id in parent.blocks:
            if block_id is not None:
                self.blocks[block_id].ref_count += 1
        self.tables[child_id] = BlockTable(
            list(parent.blocks), list(parent.token_ids), list(parent.keys), parent.shareable
        )

    def release_before(self, seq_id: int, position: int) -> int:
        """Give back the blocks of ``seq_id`` that lie wholly before ``position``; how many were released."""
        table = self.tables[seq_id]
        released = 0
        for index in range(min(position // self.block_size, len(table.blocks))):
            block_id = table.blocks[index]
            if block_id is not None:
                table.blocks[index] = None
                self._release(block_id)
                released += 1
        return released

    def free(self, seq_id: int) -> None:
        """Give back every block of ``seq_id`` (finished, aborted, or preempted to be recomputed later)."""
        table = self.tables.pop(seq_id)
        for block_id in reversed(table.blocks):  # the tail is handed out again before the shared head
            if block_id is not None:
                self._release(block_id)

    # -- the pool -----------------------------------------------------------------------
    def _allocate(self) -> int:
        block_id, _ = self.free_ids.popitem(last=False)
        block = self.blocks[block_id]
        if block.key is not None:  # its cached contents are about to be overwritten
            holders = self.cached[block.key]
            holders.remove(block_id)
            if not holders:
                del self.cached[block.key]
        block.key, block.token_ids, block.ref_count = None, (), 1
        return block_id

    def _take(self, block_id: int) -> None:
        """One more owner of a cached block (revived from the free list when it had none)."""
        block = self.blocks[block_id]
        if block.ref_count == 0:
            del self.free_ids[block_id]
        block.ref_count += 1

    def _release(self, block_id: int) -> None:
        block = self.blocks[block_id]
        if block.ref_count < 1:
            raise RuntimeError(f"block {block_id} released with reference count {block.ref_count}")
        block.ref_count -= 1
        if block.ref_count == 0:
            self.free_ids[block_id] = None
            if block.key is None:  # nothing reusable: hand it out before the cached ones
                self.free_ids.move_to_end(block_id, last=False)
