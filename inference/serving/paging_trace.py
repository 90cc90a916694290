"""A replay of paged KV serving: the real ``PagedBatcher`` on the real model, recorded step by step as plain data.

Owns ``run_paged_traced``, which serves a list of prompts through ``PagedBatcher`` as ``PagedKV`` asks
and takes a snapshot of the pool after every scheduler step, as the records of ``paging_records.py``.

Nothing here schedules or computes: the batcher, its ``PagedKVCache`` and their ``BlockManager`` do,
exactly as the server would. The recording is a ``BlockManager`` subclass put in place of the first
layer group's manager before any request arrives (the global layers' group; a model with sliding-window
layers keeps a second pool of the same layout for its local layers, which frees the blocks that slid out
of the window, but runs shorter than the window lay out both pools alike). It notes each allocation,
prefix-cache hit, fork, copy-on-write and free as it happens; after the step the trace names a free
as a finish or a preemption from the sequence's status, and an admission of a preempted sequence as
its resumption.

Sequences are numbered by answer: with ``samples`` answers per prompt, answer j of prompt i is sequence
``i * samples + j`` (the order of ``BatchRun.results``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..generation.sampling import SamplingParams
from .block_manager import BlockManager
from .paged import PagedBatcher, parallel_params
from .paging_records import PagedKV, PagingEvent, PagingStep, PagingTrace
from .requests import BatchResult, BatchRun, BatchStep, check_batch_inputs, encode_each
from .scheduler import SequenceStatus
from .slot_cache import SlotKVCache

if TYPE_CHECKING:
    from ..generation.engine import Engine
    from .scheduler import Sequence


class _RecordingManager(BlockManager):
    """A ``BlockManager`` that notes (kind, request id, blocks) for everything it does to a table."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        super().__init__(num_blocks, block_size)
        self.log: list[tuple[str, int, tuple[int, ...]]] = []
        self.forked = 0  # blocks a forked sequence shares with the one whose prefill it rides, over the run

    def add(self, seq_id: int, token_ids: list[int], hits: int = 0, shareable: bool = True) -> int:
        cached = super().add(seq_id, token_ids, hits, shareable)
        self.log.append(("admit", seq_id, tuple(self.tables[seq_id].blocks[:hits])))
        return cached

    def reserve(self, seq_id: int, n_new: int) -> list[tuple[int, int]]:
        held = len(self.tables[seq_id].blocks)
        copies = super().reserve(seq_id, n_new)
        for source, target in copies:
            self.log.append(("copy_on_write", seq_id, (source, target)))
        new = tuple(self.tables[seq_id].blocks[held:])
        if new:
            self.log.append(("allocate", seq_id, new))
        return copies

    def fork(self, parent_id: int, child_id: int) -> None:
        super().fork(parent_id, child_id)
        shared = tuple(b for b in self.tables[child_id].blocks if b is not None)
        self.forked += len(shared)
        self.log.append(("fork", child_id, shared))

    def free(self, seq_id: int) -> None:
        blocks = tuple(b for b in self.tables[seq_id].blocks if b is not None)
        super().free(seq_id)
        self.log.append(("free", seq_id, blocks))


def run_paged_traced(
    engine: Engine, prompts: list[str | list[int]], params_list: list[SamplingParams | None], paged: PagedKV
) -> BatchRun:
    """Serve ``prompts`` (all arriving at once) through ``PagedBatcher`` and record every step; the run with its
    ``paging`` trace. Results are per answer (``paged.samples`` per prompt, see the module docstring)."""
    all_params = check_batch_inputs(prompts, params_list)
    encoded = encode_each(engine, prompts)
    samples = paged.samples
    answers = {r.index: parallel_params(all_params[r.index], samples) for r in encoded if r.ok}
    results = [
        BatchResult(r.index * samples + j, r.prompt_ids, finish_reason=r.finish_reason, error=r.error)
        for r in encoded
        for j in range(samples)
    ]
    if not answers:
        return BatchRun(results, [])
    size = paged.block_size
    longest = min(
        engine.config.max_seq_len,
        max(len(encoded[i].prompt_ids) + p.max_new_tokens for i, ps in answers.items() for p in ps),
    )
    num_blocks = paged.num_blocks or sum(
        -(-(len(encoded[i].prompt_ids) + p.max_new_tokens) // size) for i, ps in answers.items() for p in ps
    )
    batcher = PagedBatcher(engine, num_blocks, size)
    recorder = _RecordingManager(num_blocks, size)
    batcher.cache.groups[0].manager = recorder  # empty either way; the other groups keep their own
    sequences = {}  # answer index -> Sequence
    for index, params in answers.items():
        try:
            for j, seq in enumerate(batcher.add_parallel(encoded[index].prompt_ids, params)):
                sequences[index * samples + j] = seq
        except ValueError as exc:
            for j in range(samples):
                results[index * samples + j].finish_reason, results[index * samples + j].error = "error", exc
    number = {seq.request_id: answer for answer, seq in sequences.items()}
    by_id = {seq.request_id: seq for seq in sequences.values()}
    slot_bytes = SlotKVCache(engine.config, 1, longest, "meta", engine.dtype).nbytes
    position_bytes = batcher.cache.nbytes // (num_blocks * size)
    steps, records, preempted = [], [], set()
    while batcher.has_work:
        running_before = {seq.request_id for seq in batcher.running}
        record = batcher.step()
        if record is None:
            break
        records.append(record)
        events = _events(recorder, number, by_id, running_before, preempted)
        used = (batcher.cache.used_bytes, slot_bytes * len(batcher.running))
        steps.append(_snapshot(record, recorder, number, len(results), events, used, position_bytes))
    for answer, seq in sequences.items():
        results[answer] = batcher.result(seq, answer)
    trace = PagingTrace(
        block_size=size,
        num_blocks=num_blocks,
        position_bytes=position_bytes,
        slot_capacity=longest,
        prompt_of=tuple(answer // samples for answer in range(len(results))),
        prompt_lengths=tuple(len(r.prompt_ids) for r in results),
        steps=tuple(steps),
        prefix_hits=recorder.hits,
        forked=recorder.forked,
        copies=recorder.copies,
        preemptions=batcher.preemptions,
    )
    return BatchRun(results, records, paging=trace)


def _events(
    recorder: _RecordingManager,
    number: dict[int, int],
    by_id: dict[int, Sequence],
    running_before: set[int],
    preempted: set[int],
) -> tuple[PagingEvent, ...]:
    """The manager's log of one step as events, each free named by what became of its sequence."""
    events = []
    for kind, request_id, blocks in recorder.log:
        if kind == "admit":
            if request_id in preempted:
                preempted.discard(request_id)
                kind = "resume"
            elif blocks:
                kind = "prefix_hit"
            else:
                continue  # a fresh table; its blocks come with the "allocate" that follows
        elif kind == "free":
            if by_id[request_id].status is SequenceStatus.FINISHED:
                kind = "finish"
            elif request_id in running_before:
                kind = "preempt"
                preempted.add(request_id)
            else:
                kind = "deferred"  # admitted and put back in one step: this step's others took the blocks
        events.append(PagingEvent(kind, number[request_id], blocks))
    recorder.log.clear()
    return tuple(events)


def _snapshot(
    record: BatchStep,
    manager: BlockManager,
    number: dict[int, int],
    n_sequences: int,
    events: tuple[PagingEvent, ...],
    paged_and_slot_bytes: tuple[int, int],
    position_bytes: int,
) -> PagingStep:
    size = manager.block_size
    ref_counts = np.array([block.ref_count for block in manager.blocks], dtype=np.int64)  # (N,)
    owners = np.full(manager.num_blocks, -1, dtype=np.int64)  # (N,)
    filled = np.zeros(manager.num_blocks, dtype=np.int64)  # (N,)
    cached = np.array([block.ref_count == 0 and block.key is not None for block in manager.blocks])  # (N,)
    tables = [np.zeros(0, dtype=np.int64)] * n_sequences
    held = np.zeros(n_sequences, dtype=np.int64)  # (S,)
    for request_id, table in manager.tables.items():
        answer = number[request_id]
        tables[answer] = np.array([-1 if b is None else b for b in table.blocks], dtype=np.int64)
        held[answer] = table.num_tokens
        for logical, block in enumerate(table.blocks):
            if block is None:
                continue
            owners[block] = answer if owners[block] < 0 else min(owners[block], answer)
            filled[block] = max(filled[block], min(size, table.num_tokens - logical * size))
    return PagingStep(
        index=record.index,
        phase=record.phase,
        rows=tuple(number[r] for r in record.request_ids if record.new_tokens.get(r)),
        fed=tuple(record.new_tokens[r] for r in record.request_ids if record.new_tokens.get(r)),
        ref_counts=ref_counts,
        owners=owners,
        filled=filled,
        cached=cached,
        tables=tuple(tables),
        held=held,
        events=events,
        paged_bytes=int(paged_and_slot_bytes[0]),
        slot_bytes=int(paged_and_slot_bytes[1]),
        used_bytes=int(held.sum()) * position_bytes,
        distinct_bytes=int(filled.sum()) * position_bytes,
    )
