"""Who runs at each step of continuous batching: sequences, their status, and the scheduler.

Owns ``Sequence`` (one request's own state: status, prompt and output ids, cache
slot, cached length, timings) and ``Scheduler`` (admits waiting sequences into free
slots, retires finished ones, cancels). Pure Python bookkeeping: it never touches a
tensor (its one outside rule, ``finish_reason``, comes from the sampler); the runner (``continuous.py``) does the
forwards and hands back the sampled token ids.

The policy is nano-vllm's: if a waiting request fits (a free slot, and the step's
prefill token budget), the step is a prefill of the newly admitted requests;
otherwise it is a decode step of every running request. Prefill and decode are
not mixed in one forward because a mixed step pads every decode row to the longest
prompt, which on dense attention costs more than it saves.
"""
from __future__ import annotations

import itertools
import time
from collections import deque
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

from ..generation.sampling import finish_reason

if TYPE_CHECKING:
    import torch

    from ..generation.sampling import SamplingParams
    from ..model.interventions import Interventions


class SequenceStatus(Enum):
    WAITING = "waiting"  # queued, no cache slot yet
    RUNNING = "running"  # holds a slot, produces one token per step
    FINISHED = "finished"  # done (eos, length, context or cancelled); slot released


_request_ids = itertools.count()


def new_request_id() -> int:
    """A process-wide unique request id (never reused, so two callers can never collide)."""
    return next(_request_ids)


@dataclass(eq=False)
class Sequence:
    prompt_ids: list[int]
    params: "SamplingParams"
    generator: "torch.Generator | None" = None  # the request's own random stream
    request_id: int = field(default_factory=new_request_id)
    status: SequenceStatus = SequenceStatus.WAITING
    output_ids: list[int] = field(default_factory=list)
    output_probs: list[float] = field(default_factory=list)  # each output token's probability when drawn
    slot: int | None = None
    cached: int = 0  # positions of this sequence already in its slot
    finish_reason: str | None = None  # "eos", "length", "context" or "cancelled"
    arrived_at: float = field(default_factory=time.perf_counter)
    first_token_at: float | None = None
    finished_at: float | None = None
    max_batch_size: int = 0  # the most sequences that shared one forward with this one (itself included)
    interventions: "Interventions | None" = None  # this request's own edits; its slot's K/V are written under them

    @property
    def all_ids(self) -> list[int]:
        return self.prompt_ids + self.output_ids

    @property
    def pending_ids(self) -> list[int]:
        """The tokens the next forward must feed: the whole prompt, then the last output token."""
        return self.all_ids[self.cached :]

    @property
    def is_finished(self) -> bool:
        return self.status is SequenceStatus.FINISHED

    @property
    def time_to_first_token(self) -> float | None:
        return None if self.first_token_at is None else self.first_token_at - self.arrived_at

    @property
    def time_per_output_token(self) -> float | None:
        """Mean seconds between output tokens after the first (None with fewer than two)."""
        if self.finished_at is None or self.first_token_at is None or len(self.output_ids) < 2:
            return None
        return (self.finished_at - self.first_token_at) / (len(self.output_ids) - 1)


@dataclass
class ScheduledStep:
    phase: str  # "prefill" or "decode"
    sequences: list[Sequence]  # in slot order

    @property
    def new_token_counts(self) -> list[int]:
        return [len(seq.pending_ids) for seq in self.sequences]


class Scheduler:
    def __init__(
        self,
        n_slots: int,
        slot_capacity: int,
        max_seq_len: int,
        eos_ids: frozenset[int] = frozenset(),
        max_prefill_tokens: int = 4096,
    ) -> None:
        self.free_slots = list(range(n_slots))  # lowest first keeps busy slots contiguous
        self.position_limit = min(slot_capacity, max_seq_len)
        self.eos_ids = eos_ids
        self.max_prefill_tokens = max_prefill_tokens
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []

    def add(self, seq: Sequence) -> None:
        if len(seq.prompt_ids) >= self.position_limit:
            raise ValueError(
                f"the prompt is {len(seq.prompt_ids)} tokens but a cache slot holds {self.position_limit} "
                f"(and one more is needed for the answer)"
            )
        seq.status = SequenceStatus.WAITING
        self.waiting.append(seq)

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self) -> ScheduledStep | None:
        """The next step: a prefill of newly admitted sequences if any fit, else a decode of all running."""
        admitted = self._admit()
        if admitted:
            return ScheduledStep("prefill", sorted(admitted, key=lambda s: s.slot))
        if self.running:
            return ScheduledStep("decode", sorted(self.running, key=lambda s: s.slot))
        return None

    def _admit(self) -> list[Sequence]:
        admitted: list[Sequence] = []
        budget = self.max_prefill_tokens
        while self.waiting and self.free_slots:
            prompt_len = len(self.waiting[0].prompt_ids)
            if admitted and prompt_len > budget:
                break  # the first one always goes, however long, so nothing waits forever
            seq = self.waiting.popleft()
            self.free_slots.sort()
            seq.slot, seq.status, seq.cached = self.free_slots.pop(0), SequenceStatus.RUNNING, 0
            budget -= prompt_len
            admitted.append(seq)
            self.running.append(seq)
        return admitted

    def postprocess(self, step: ScheduledStep, token_ids: list[int], now: float | None = None) -> list[Sequence]:
        """Record each sequence's new token, retire those that are done; returns the finished ones."""
        now = time.perf_counter() if now is None else now
        finished = []
        for seq, token_id in zip(step.sequences, token_ids, strict=True):
            seq.cached += len(seq.pending_ids)
            seq.output_ids.append(token_id)
            if seq.first_token_at is None:
                seq.first_token_at = now
            reason = finish_reason(seq.params, self.eos_ids, seq.output_ids, len(seq.all_ids), self.position_limit)
            if reason is not None:
                self._retire(seq, reason, now)
                finished.append(seq)
        return finished

    def cancel(self, request_id: int) -> Sequence | None:
        """Stop a request wherever it is; returns it, or None if it is unknown or already finished."""
        for seq in itertools.chain(self.waiting, self.running):
            if seq.request_id == request_id:
                if seq.status is SequenceStatus.WAITING:
                    self.waiting.remove(seq)
                self._retire(seq, "cancelled", time.perf_counter())
                return seq
        return None

    def _retire(self, seq: Sequence, reason: str, now: float) -> None:
        if seq in self.running:
            self.running.remove(seq)
            self.free_slots.append(seq.slot)
        seq.status, seq.finish_reason, seq.finished_at = SequenceStatus.FINISHED, reason, now

    @property
    def slots_in_use(self) -> int:
        return len(self.running)

    @property
    def positions_in_use(self) -> int:
        return sum(seq.cached for seq in self.running)
