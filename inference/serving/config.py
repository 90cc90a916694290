"""``ServeConfig``: every serving default in one dataclass, for the continuous batchers and the server.

The server keeps its K/V in paged blocks (``kv_block_size``): a pool of as many positions as
``n_slots`` slots of ``slot_capacity`` would hold, of which each request takes only the blocks it
fills; ``n_slots`` still bounds how many requests run at once and ``slot_capacity`` how long one may be.
``kv_positions`` makes the pool smaller than that: what paging frees is reservation, so short requests fit
in far fewer positions, and a request that finds no free block is preempted and recomputed.

The defaults are the shared class server's (the app uses them as they are); a test or
a benchmark passes its own. Why these numbers: ``docs/batching.md`` and
``docs/classroom.md`` give the measurements behind them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServeConfig:
    n_slots: int = 16  # requests that run at once (on the slot cache each in its own slot)
    slot_capacity: int = 1024  # positions one request may hold: prompt + answer (a slot's size)
    max_waiting: int = 160  # requests that may queue for a slot; one more gets BusyError at once
    max_prefill_tokens: int = 4096  # prompt tokens admitted into one prefill step (the first always goes)
    keep_steps: int = 256  # batch-step records the server keeps for the explorer
    threads: int | None = None  # torch threads the server's worker sets for itself (None: leave as is)
    share_prefixes: bool = True  # a prompt reuses the K/V of a start another request already computed
    kv_block_size: int | None = 16  # the server's K/V in paged blocks of this many positions; None: the slot cache
    # positions the paged pool holds; None: as many as n_slots slots would reserve (nobody is ever preempted). Fewer
    # saves memory where requests are short (a class's): one that finds no free block waits or is preempted, then
    # recomputed, with the same output
    kv_positions: int | None = None
    coalesce: bool = True  # a request identical to one in flight (same prompt, same seeded or greedy settings) rides it

    def __post_init__(self) -> None:
        for name in ("n_slots", "slot_capacity", "max_prefill_tokens", "keep_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"ServeConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.kv_block_size is not None and self.kv_block_size < 1:
            raise ValueError(f"ServeConfig.kv_block_size must be >= 1 or None, got {self.kv_block_size}")
        if self.kv_positions is not None and self.kv_positions < self.slot_capacity:
            raise ValueError(
                f"ServeConfig.kv_positions must be >= slot_capacity ({self.slot_capacity}: one request's whole length)"
                f" or None, got {self.kv_positions}"
            )
        if self.max_waiting < 0:
            raise ValueError(f"ServeConfig.max_waiting must be >= 0, got {self.max_waiting}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"ServeConfig.threads must be >= 1 or None, got {self.threads}")
