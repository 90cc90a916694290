"""What a paged run records: the request for paged blocks, and the pool after each scheduler step, as plain data.

Owns ``PagedKV`` (how a batch run asks for paged blocks: block size, pool size, answers per prompt)
and the records of what the block manager did (``PagingEvent``, ``PagingStep``, ``PagingTrace``):
numpy arrays and ints only, frozen, so they pickle, cache and could come over a socket. Filled by
``paging_trace.run_paged_traced``; apart from it so that ``BatchRun`` can name them without importing
the batcher.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EVENT_KINDS = ("allocate", "prefix_hit", "fork", "copy_on_write", "preempt", "resume", "finish", "deferred")


@dataclass(frozen=True)
class PagedKV:
    """Run a batch on paged KV blocks: ``block_size`` positions a block, a pool of ``num_blocks`` (None: enough
    for every answer's whole prompt and answer at once) and ``samples`` answers per prompt, forked from the
    first (answer j draws from the prompt's seed + j)."""

    block_size: int = 16
    num_blocks: int | None = None
    samples: int = 1

    def __post_init__(self) -> None:
        for name in ("block_size", "samples"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"PagedKV.{name} must be a whole number >= 1, got {value!r}")
        if self.num_blocks is not None and (
            not isinstance(self.num_blocks, int) or isinstance(self.num_blocks, bool) or self.num_blocks < 1
        ):
            raise ValueError(f"PagedKV.num_blocks must be a whole number >= 1 or None, got {self.num_blocks!r}")


@dataclass(frozen=True)
class PagingEvent:
    """One thing the block manager did to one sequence's table during a step."""

    kind: str  # one of EVENT_KINDS
    sequence: int  # the answer's index (see the module docstring)
    blocks: tuple[int, ...]  # physical blocks: taken, shared, freed; copy-on-write: (source, target)


@dataclass(frozen=True)
class PagingStep:
    """The pool after one scheduler step (one forward), and what happened in it."""

    index: int
    phase: str  # "prefill" or "decode"
    rows: tuple[int, ...]  # sequences fed in this forward, in batch order
    fed: tuple[int, ...]  # positions each row fed (a resumed sequence feeds its prompt and its output so far)
    ref_counts: np.ndarray  # (num_blocks,) sequences holding each physical block (0: free)
    owners: np.ndarray  # (num_blocks,) the lowest sequence holding each block, -1 when free
    filled: np.ndarray  # (num_blocks,) positions of each block holding K/V (0 when free)
    cached: np.ndarray  # (num_blocks,) bool: free but still keyed by its prefix (a later hit revives it)
    tables: tuple[np.ndarray, ...]  # per sequence: its block table, logical -> physical (empty: holds no blocks)
    held: np.ndarray  # (S,) positions each sequence holds in the cache
    events: tuple[PagingEvent, ...]
    paged_bytes: int  # K/V bytes of the blocks in use (every layer)
    slot_bytes: int  # what a slot cache would reserve for the same resident sequences
    used_bytes: int  # K/V bytes of the positions held, once per sequence (what slots store: shared starts copied)
    distinct_bytes: int  # K/V bytes of the positions held, once per block (shared blocks counted once)

    @property
    def resident(self) -> int:
        return sum(len(table) > 0 for table in self.tables)


@dataclass(frozen=True)
class PagingTrace:
    """Every step of one paged run, with the sizes that turn blocks into bytes."""

    block_size: int
    num_blocks: int
    position_bytes: int  # K and V of one position in every layer
    slot_capacity: int  # positions one slot of the compared slot cache reserves (the longest request)
    prompt_of: tuple[int, ...]  # per sequence: the index of its prompt
    prompt_lengths: tuple[int, ...]  # per sequence
    steps: tuple[PagingStep, ...]
    prefix_hits: int  # blocks shared through the prefix cache, over the run
    forked: int  # blocks shared by forking (one count per forked sequence and block): samples, identical prompts
    copies: int  # copy-on-write copies, over the run
    preemptions: int

    @property
    def n_sequences(self) -> int:
        return len(self.prompt_of)
