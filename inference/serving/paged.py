"""Continuous batching on paged KV blocks: admission by free blocks, preemption, and parallel samples by fork.

Owns ``PagedBatcher``, the runner that ties waiting and running ``Sequence``s to a ``PagedKVCache``
and the shared model, and ``run_paged``, which serves a fixed list of prompts with it. Its ``step()``
is the nano-vllm loop, one forward per call:

1. schedule: a prefill of the waiting sequences whose prompts fit the free blocks (their cached
   start, a prefix hit, is not fed again; one whose next block this step's prefill computes for
   another waits a step and shares it: a class on one prompt computes it once), or else a decode of every running sequence. When a decode
   step lacks blocks, the newest running sequence gives all of its blocks back and waits again
   (preemption by recompute, vLLM's default); on its return it feeds its prompt and outputs so far;
2. run: one forward over those rows through the paged cache;
3. postprocess: sample each row with its own settings and seeded stream (draw i from (seed, i):
   ``generator_for``), retire the finished sequences and free their blocks.

A preempted sequence's output is what it would have been uncontested: its draws depend on (seed, i)
alone, and its K/V are recomputed from the same tokens. ``add_parallel`` asks for several answers to
one prompt: the prompt is computed once, then each further answer forks the first's block table
(sharing every block, copy-on-write on the partly filled last one) and samples from the same logits.

The slot cache (``continuous.py``) stays for the pages that compare the two.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import TYPE_CHECKING

import torch

from ..generation.sampling import SamplingParams, finish_reason, generator_for, sample
from .padding import left_pad
from .paged_cache import PagedKVCache, PagedWrite
from .scheduler import Sequence, SequenceStatus

if TYPE_CHECKING:
    from ..generation.engine import Engine


class PagedBatcher:
    def __init__(
        self,
        engine: Engine,
        num_blocks: int,
        block_size: int = 16,
        max_prefill_tokens: int = 4096,
        keep_logits: bool = False,
    ) -> None:
        self.engine = engine
        self.cache = PagedKVCache(engine.config, num_blocks, block_size, engine.device, engine.dtype)
        self.position_limit = engine.config.max_seq_len
        self.max_prefill_tokens = max_prefill_tokens
        self.waiting: list[Sequence] = []
        self.running: list[Sequence] = []  # in admission order: the last is preempted first
        self.forks: dict[Sequence, list[Sequence]] = {}  # first answer -> the answers forked from it after prefill
        self.preemptions = 0
        self.logits: dict[Sequence, list[torch.Tensor]] | None = {} if keep_logits else None  # (V,) per token
        self._order = itertools.count()
        self._admitted: dict[Sequence, int] = {}

    def add(self, prompt_ids: list[int], params: SamplingParams | None = None) -> Sequence:
        """Queue an encoded prompt; it joins at the next step whose free blocks hold it."""
        return self.add_parallel(prompt_ids, [params or SamplingParams()])[0]

    def add_parallel(self, prompt_ids: list[int], params_list: list[SamplingParams]) -> list[Sequence]:
        """Queue one prompt for ``len(params_list)`` answers (each with its own settings and seed) that share
        the prompt's blocks; the sequences, in order."""
        if not prompt_ids or not params_list:
            raise ValueError("a request needs a non-empty prompt and at least one answer")
        longest = len(prompt_ids) + max(params.max_new_tokens for params in params_list)
        needed = self.cache.groups[0].manager.blocks_for(min(longest, self.position_limit))
        if len(prompt_ids) >= self.position_limit or needed > self.cache.num_blocks:
            raise ValueError(
                f"a {len(prompt_ids)}-token prompt with {longest - len(prompt_ids)} new tokens needs {needed} blocks "
                f"of {self.cache.block_size} (the pool has {self.cache.num_blocks}) and fewer than "
                f"{self.position_limit} positions"
            )
        sequences = [Sequence(list(prompt_ids), params) for params in params_list]
        self.waiting.append(sequences[0])
        if len(sequences) > 1:
            self.forks[sequences[0]] = sequences[1:]
        return sequences

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def step(self) -> tuple[str, list[Sequence]] | None:
        """Schedule, run, postprocess; the phase and the sequences that ran, or None when idle."""
        phase, rows = self._schedule()
        if not rows:
            return None
        logits = self._run(phase, rows)  # (B, V)
        self._postprocess(rows, logits)
        return phase, rows

    # 1. schedule -------------------------------------------------------------------------
    def _schedule(self) -> tuple[str, list[Sequence]]:
        admitted, budget, computing = [], self.max_prefill_tokens, set()
        size = self.cache.block_size
        while self.waiting:
            seq = self.waiting[0]
            if not self.cache.can_add(seq.all_ids):
                break
            hits = self.cache.prefix_hits(seq.all_ids)
            next_block = tuple(seq.all_ids[: (hits + 1) * size]) if len(seq.all_ids) > (hits + 1) * size else None
            if next_block is not None and next_block in computing:
                break  # a start this step computes: wait one step and share its blocks instead of copying them
            to_compute = len(seq.all_ids) - hits * size
            if admitted and to_compute > budget:
                break
            self.waiting.pop(0)
            seq.cached = self.cache.add(seq.request_id, seq.all_ids)
            if not self.cache.can_write({s.request_id: len(s.pending_ids) for s in [*admitted, seq]}):
                self.cache.free(seq.request_id)  # the hits fit but not the rest with this step's others
                self.waiting.insert(0, seq)
                break
            seq.status = SequenceStatus.RUNNING
            if next_block is not None:
                computing.add(next_block)
            self._admitted[seq] = next(self._order)
            budget -= to_compute
            admitted.append(seq)
        if admitted:
            self.running.extend(admitted)
            return "prefill", admitted
        while self.running and not self.cache.can_write({s.request_id: 1 for s in self.running}):
            self._preempt(max(self.running, key=self._admitted.__getitem__))
        return "decode", list(self.running)

    def _preempt(self, seq: Sequence) -> None:
        """``seq`` gives back its blocks and waits at the front; it is recomputed when it returns."""
        self.cache.free(seq.request_id)
        self.running.remove(seq)
        seq.status, seq.cached = SequenceStatus.WAITING, 0
        self.waiting.insert(0, seq)
        self.preemptions += 1

    # 2. run ------------------------------------------------------------------------------
    def _run(self, phase: str, rows: list[Sequence]) -> torch.Tensor:
        pending = [seq.pending_ids for seq in rows]
        ids = left_pad(pending)[0].to(self.engine.device)  # (B, T); the paged cache sets positions and masks
        positions = self.cache.begin_step([PagedWrite(seq.request_id, p) for seq, p in zip(rows, pending)])  # (B, T)
        if phase == "prefill":
            return self.engine.prefill_batch(ids, self.cache, positions)  # (B, V)
        return self.engine.decode_batch(ids, self.cache, positions)  # (B, V)

    # 3. postprocess ----------------------------------------------------------------------
    def _postprocess(self, rows: list[Sequence], logits: torch.Tensor) -> None:
        for seq, row_logits in zip(rows, logits):
            seq.cached += len(seq.pending_ids)
            for child in self.forks.pop(seq, []):  # parallel answers: share the prompt, sample the same logits
                self.cache.fork(seq.request_id, child.request_id)
                child.cached, child.status = seq.cached, SequenceStatus.RUNNING
                self._admitted[child] = next(self._order)
                self.running.append(child)
                self._emit(child, row_logits)
            self._emit(seq, row_logits)

    def _emit(self, seq: Sequence, logits: torch.Tensor) -> None:
        params = seq.params
        if self.logits is not None:
            self.logits.setdefault(seq, []).append(logits.clone())
        choice = sample(logits, params, generator_for(params, len(seq.output_ids)), previous_ids=seq.all_ids)
        seq.output_ids.append(choice.token_id)
        seq.output_probs.append(choice.probability)
        reason = finish_reason(params, self.engine.eos_ids, seq.output_ids, len(seq.all_ids), self.position_limit)
        if reason is not None:
            self.cache.free(seq.request_id)
            self.running.remove(seq)
            self._admitted.pop(seq)
            seq.status, seq.finish_reason = SequenceStatus.FINISHED, reason


def parse_kv(text: str) -> int | None:
    """The command line's ``--kv``: "contiguous" (None) or "paged" / "paged:BLOCK" (the block size, default 16)."""
    kind, _, block = text.partition(":")
    if kind == "contiguous" and not block:
        return None
    if kind == "paged":
        if not block:
            return 16
        if block.isdigit() and int(block) >= 1:
            return int(block)
    raise ValueError(f"--kv must be contiguous, paged or paged:BLOCK (a block size >= 1), got {text!r}")


def parallel_params(params: SamplingParams, n: int) -> list[SamplingParams]:
    """``n`` answers' settings: answer i draws from seed + i (a fresh seed each when ``params.seed`` is None)."""
    if n < 1:
        raise ValueError(f"--n must be at least 1, got {n}")
    return [replace(params, seed=None if params.seed is None else params.seed + i) for i in range(n)]


def run_paged(
    engine: Engine,
    prompts: list[list[int]],
    params_list: list[SamplingParams | None] | None = None,
    num_blocks: int | None = None,
    block_size: int = 16,
) -> list[Sequence]:
    """Serve encoded prompts (all arriving at once) on paged blocks; the finished sequences, in order.

    ``num_blocks`` defaults to enough blocks for every prompt and its whole answer at once."""
    params_list = params_list or [None] * len(prompts)
    params_list = [params or SamplingParams() for params in params_list]
    if num_blocks is None:
        num_blocks = sum(-(-(len(p) + params.max_new_tokens) // block_size) for p, params in zip(prompts, params_list))
    batcher = PagedBatcher(engine, num_blocks, block_size)
    sequences = [batcher.add(prompt, params) for prompt, params in zip(prompts, params_list)]
    while batcher.has_work:
        batcher.step()
    return sequences
