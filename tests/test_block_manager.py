"""The block manager on its own (no tensors): a seeded random loop over 1,000 request lifecycles, and a few
named cases (prefix hit, copy-on-write, fork, sliding-window release, preempt and resume).

The loop keeps a model of the pool's memory: every write puts the written token into (block, offset), so a
sequence's table must always read back its own tokens (a wrong share, a missing copy-on-write or a block handed
out while in use would show as another sequence's token). After every event: no block leaked (free + used ==
pool, each reference count equals the tables that point at the block), no count below zero, every cached key
names a block holding exactly its tokens; every write lands in a block no one else holds.
"""

from __future__ import annotations

import random

import pytest

from inference.serving.block_manager import BlockManager, OutOfBlocksError

PREFIXES = [[7] * 40, list(range(100, 137)), [5, 6] * 12]  # shared starts, so prefix hits happen


class Simulation:
    """A block manager driven by random events, with the pool's memory and its invariants checked."""

    def __init__(self, seed: int, num_blocks: int, block_size: int) -> None:
        self.rng = random.Random(seed)
        self.manager = BlockManager(num_blocks, block_size)
        self.memory: dict[tuple[int, int], int] = {}  # (block, offset) -> the token whose K/V are there
        self.tokens: dict[int, list[int]] = {}  # live sequence -> its tokens (committed or not)
        self.preempted: list[list[int]] = []  # token lists to resume
        self.next_id = 0
        self.finished = 0
        self.expected_hits = 0
        self.hits = 0

    # -- events -------------------------------------------------------------------------
    def arrive(self, token_ids: list[int] | None = None) -> bool:
        rng, manager = self.rng, self.manager
        if token_ids is None:
            token_ids = rng.choice(PREFIXES)[: rng.randint(0, 40)] + [
                rng.randrange(1000) for _ in range(rng.randint(1, 30))
            ]
        shareable = rng.random() > 0.1  # a few requests with interventions: no sharing
        hits = manager.prefix_hits(token_ids) if shareable else 0
        live_hits = self._live_shared_blocks(token_ids)
        if shareable:
            assert hits >= live_hits, "a prefix held by a live sequence must be a hit"
            self.expected_hits += live_hits
            self.hits += hits
        if manager.blocks_to_admit(token_ids, hits) > manager.num_free:
            return False
        seq_id, self.next_id = self.next_id, self.next_id + 1
        cached = manager.add(seq_id, token_ids, hits, shareable)
        assert cached == hits * manager.block_size < len(token_ids)
        self.tokens[seq_id] = list(token_ids)
        self.write(seq_id, token_ids[cached:])
        return True

    def _live_shared_blocks(self, token_ids: list[int]) -> int:
        """The most leading full blocks of ``token_ids`` that some live shareable table holds, committed."""
        size, best = self.manager.block_size, 0
        limit = (len(token_ids) - 1) // size
        for table in self.manager.tables.values():
            if not table.shareable:
                continue
            n = 0
            while n < min(limit, table.num_tokens // size) and table.blocks[n] is not None:
                if table.token_ids[n * size : (n + 1) * size] != token_ids[n * size : (n + 1) * size]:
                    break
                n += 1
            best = max(best, n)
        return best

    def write(self, seq_id: int, new_tokens: list[int], commit: bool = True) -> None:
        manager = self.manager
        while manager.blocks_to_reserve(seq_id, len(new_tokens)) > manager.num_free:
            victim = max(self.tokens)  # the newest sequence gives its blocks back (vLLM's preemption)
            self.preempt(victim)
            if victim == seq_id:
                return
        for source, target in manager.reserve(seq_id, len(new_tokens)):
            assert manager.blocks[target].ref_count == 1
            for offset in range(manager.block_size):
                if (source, offset) in self.memory:
                    self.memory[(target, offset)] = self.memory[(source, offset)]
        for (block, offset), token in zip(manager.write_targets(seq_id), new_tokens, strict=True):
            assert manager.blocks[block].ref_count == 1, "a block was written while shared"
            assert manager.blocks[block].key is None, "a cached block was written"
            self.memory[(block, offset)] = token
        if commit:
            manager.commit(seq_id, new_tokens)

    def grow(self, seq_id: int) -> None:
        new = [self.rng.randrange(1000) for _ in range(self.rng.choice([1, 1, 1, 3, 17]))]
        self.tokens[seq_id] += new
        self.write(seq_id, new)

    def fork(self, seq_id: int) -> None:
        child, self.next_id = self.next_id, self.next_id + 1
        self.manager.fork(seq_id, child)
        self.tokens[child] = list(self.tokens[seq_id])

    def preempt(self, seq_id: int) -> None:
        self.manager.free(seq_id)
        self.preempted.append(self.tokens.pop(seq_id))

    def finish(self, seq_id: int) -> None:
        self.manager.free(seq_id)
        del self.tokens[seq_id]
        self.finished += 1

    def abort_mid_write(self, seq_id: int) -> None:
        """Cancelled between reserving and committing a write."""
        if self.manager.blocks_to_reserve(seq_id, 2) <= self.manager.num_free:
            self.write(seq_id, [1, 2], commit=False)
        if seq_id in self.tokens:
            self.finish(seq_id)

    def slide(self, seq_id: int) -> None:
        table = self.manager.tables[seq_id]
        self.manager.release_before(seq_id, max(0, table.num_tokens - self.rng.randint(1, 48)))

    # -- the loop -----------------------------------------------------------------------
    def run(self, lifecycles: int) -> None:
        rng = self.rng
        while self.finished < lifecycles:
            live = sorted(self.tokens)
            event = rng.random()
            if not live or event < 0.15:
                self.arrive(self.preempted.pop(0) if self.preempted and rng.random() < 0.5 else None)
            elif event < 0.65:
                self.grow(rng.choice(live))
            elif event < 0.72:
                self.fork(rng.choice(live))
            elif event < 0.76:
                self.preempt(rng.choice(live))
            elif event < 0.8:
                self.slide(rng.choice(live))
            elif event < 0.95:
                self.finish(rng.choice(live))
            else:
                self.abort_mid_write(rng.choice(live))
            self.check()
        for seq_id in sorted(self.tokens):
            self.finish(seq_id)
        self.check()
        assert self.manager.num_free == self.manager.num_blocks

    def check(self) -> None:
        manager = self.manager
        owners = {block.block_id: 0 for block in manager.blocks}
        for seq_id, table in manager.tables.items():
            assert table.token_ids == self.tokens[seq_id][: table.num_tokens]
            for index, block in enumerate(table.blocks):
                if block is None:
                    continue
                owners[block] += 1
                for offset in range(manager.block_size):
                    position = index * manager.block_size + offset
                    if position < table.num_tokens:
                        assert self.memory[(block, offset)] == table.token_ids[position], "a table reads wrong K/V"
        used = {block for block, count in owners.items() if count}
        assert manager.num_free + len(used) == manager.num_blocks, "a block leaked"
        assert set(manager.free_ids) == set(owners) - used
        for block in manager.blocks:
            assert block.ref_count >= 0
            assert block.ref_count == owners[block.block_id]
        for key, holders in manager.cached.items():
            for block in holders:
                assert manager.blocks[block].key == key
                contents = tuple(self.memory[(block, offset)] for offset in range(manager.block_size))
                assert contents == manager.blocks[block].token_ids


@pytest.mark.parametrize(("seed", "num_blocks", "block_size"), [(0, 48, 16), (1, 100, 1), (2, 30, 5)])
def test_a_thousand_random_lifecycles_leak_nothing(seed, num_blocks, block_size):
    simulation = Simulation(seed, num_blocks, block_size)
    simulation.run(1000)
    assert simulation.hits >= simulation.expected_hits > 0
    assert simulation.manager.hits > 0
    assert simulation.manager.copies > 0 or block_size == 1  # one-position blocks are never partly filled


def _admit(manager: BlockManager, seq_id: int, tokens: list[int]) -> int:
    cached = manager.add(seq_id, tokens, manager.prefix_hits(tokens))
    manager.reserve(seq_id, len(tokens) - cached)
    manager.commit(seq_id, tokens[cached:])
    return cached


def test_a_second_request_with_the_same_start_shares_its_full_blocks():
    manager = BlockManager(16, block_size=4)
    _admit(manager, 0, list(range(10)))  # blocks: [0..3] [4..7] [8, 9]
    assert _admit(manager, 1, list(range(8)) + [50, 51]) == 8
    assert manager.tables[1].blocks[:2] == manager.tables[0].blocks[:2]
    assert manager.tables[1].blocks[2] != manager.tables[0].blocks[2]
    assert manager.num_used == 4
    # the last token is always fed again, so a prompt of exactly two blocks shares only the first
    assert _admit(manager, 2, list(range(8))) == 4


def test_cached_blocks_outlive_their_sequence_until_handed_out_again():
    manager = BlockManager(4, block_size=4)
    _admit(manager, 0, list(range(9)))  # two full blocks (cached) and a partial one
    _admit(manager, 1, [42, 43])  # a partial block
    manager.free(0)
    manager.free(1)
    assert manager.num_free == 4 and manager.prefix_hits(list(range(9))) == 2
    _admit(manager, 2, [99] * 8)  # takes the two blocks that held nothing reusable first
    assert manager.prefix_hits(list(range(9))) == 2
    _admit(manager, 3, [98] * 8)  # now the cached ones are needed
    assert manager.prefix_hits(list(range(9))) == 0


def test_fork_shares_every_block_and_copies_the_last_on_write():
    manager = BlockManager(8, block_size=4)
    _admit(manager, 0, list(range(6)))
    manager.fork(0, 1)
    assert manager.tables[1].blocks == manager.tables[0].blocks and manager.num_used == 2
    assert manager.reserve(1, 1) == [(manager.tables[0].blocks[1], manager.tables[1].blocks[1])]
    assert manager.tables[1].blocks[0] == manager.tables[0].blocks[0]
    manager.commit(1, [60])
    assert manager.reserve(0, 1) == []  # the parent holds its last block alone now: written in place
    manager.commit(0, [70])


def test_release_before_drops_only_blocks_wholly_before_the_position():
    manager = BlockManager(8, block_size=4)
    _admit(manager, 0, list(range(14)))
    assert manager.release_before(0, 9) == 2  # blocks 0-3 and 4-7; 8-11 holds position 9
    assert manager.tables[0].blocks[:2] == [None, None] and manager.num_used == 2
    manager.free(0)
    assert manager.num_free == 8


def test_running_out_of_blocks_raises_and_changes_nothing():
    manager = BlockManager(2, block_size=4)
    manager.add(0, [1] * 9)
    with pytest.raises(OutOfBlocksError, match="3 blocks needed, 2 free"):
        manager.reserve(0, 9)
    assert manager.num_free == 2 and manager.tables[0].blocks == []


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError, match="block_size >= 1"):
        BlockManager(4, block_size=0)
