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

Shared prefixes (``share_prefixes``, vLLM's automatic prefix caching in slot form):
a slot's first positions hold the K/V of the tokens its sequence has fed, and they
stay valid after it finishes, until the slot is written again. A request admitted
whose prompt starts with tokens some slot already holds reuses them: it takes that
slot if it is free, or a free slot and a copy of those positions (``ScheduledStep.copies``),
and feeds only the rest (always at least its last token, whose logits it needs). A
request whose whole prompt equals one admitted in the same step is its twin: the
runner computes the prompt once and copies it (``ScheduledStep.twins``). The K/V a
sequence wrote under interventions are its own: it neither reuses nor lends them.
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
    params: SamplingParams
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
    interventions: Interventions | None = None  # this request's own edits; its slot's K/V are written under them

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
    copies: list[tuple[int, int, int]] = field(default_factory=list)  # (from slot, to slot, positions), before
    twins: dict[Sequence, Sequence] = field(default_factory=dict)  # twin -> the row computing its prompt
    reused: dict[int, int] = field(default_factory=dict)  # request -> prompt positions it did not compute

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
        share_prefixes: bool = False,
    ) -> None:
        self.free_slots = list(range(n_slots))  # lowest first keeps busy slots contiguous
        self.position_limit = min(slot_capacity, max_seq_len)
        self.eos_ids = eos_ids
        self.max_prefill_tokens = max_prefill_tokens
        self.share_prefixes = share_prefixes
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.holder: dict[int, Sequence] = {}  # slot -> the sequence whose K/V it holds (running or finished)

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
        step = self._admit()
        if step.sequences:
            step.sequences.sort(key=lambda s: s.slot)
            return step
        if self.running:
            return ScheduledStep("decode", sorted(self.running, key=lambda s: s.slot))
        return None

    def _admit(self) -> ScheduledStep:
        step = ScheduledStep("prefill", [])
        budget = self.max_prefill_tokens
        while self.waiting and self.free_slots:
            seq = self.waiting[0]
            twin = self._twin(seq, step.sequences)
            source, reuse = (None, 0) if twin is not None else self._longest_prefix(seq)
            to_compute = 0 if twin is not None else len(seq.prompt_ids) - reuse
            if step.sequences and to_compute > budget:
                break  # the first one always goes, however long, so nothing waits forever
            self.waiting.popleft()
            self.free_slots.sort()
            slot = source if source in self.free_slots else self.free_slots[0]
            self.free_slots.remove(slot)
            seq.slot, seq.status, seq.cached = slot, SequenceStatus.RUNNING, reuse
            if reuse and source != slot:
                step.copies.append((source, slot, reuse))
            if twin is not None:
                step.twins[seq] = twin
            if reuse or twin is not None:
                step.reused[seq.request_id] = reuse or len(seq.prompt_ids)
            self.holder[slot] = seq
            budget -= to_compute
            step.sequences.append(seq)
            self.running.append(seq)
        return step

    def _twin(self, seq: Sequence, admitted: list[Sequence]) -> Sequence | None:
        """A sequence admitted in this step with exactly ``seq``'s prompt (it computes it for both), if any."""
        if not self.share_prefixes or seq.interventions is not None:
            return None
        # the first one admitted with this prompt is never a twin itself (none before it matched)
        return next(
            (other for other in admitted if other.interventions is None and other.prompt_ids == seq.prompt_ids), None
        )

    def _longest_prefix(self, seq: Sequence) -> tuple[int | None, int]:
        """The slot holding the longest start of ``seq``'s prompt, and how many positions of it to reuse
        (at most all but the prompt's last token, which the forward must feed for its logits)."""
        if not self.share_prefixes or seq.interventions is not None:
            return None, 0
        best, length = None, 0
        for slot, holder in self.holder.items():
            if holder.interventions is not None:
                continue
            held = holder.all_ids[: holder.cached]  # positions whose K/V are in the slot
            n = _common_length(held, seq.prompt_ids, limit=len(seq.prompt_ids) - 1)
            if n > length or (n == length and n and slot in self.free_slots and best not in self.free_slots):
                best, length = slot, n  # on a tie, a free slot: reused in place, no copy
        return best, length

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


def _common_length(held: list[int], prompt: list[int], limit: int) -> int:
    """How many leading tokens ``held`` and ``prompt`` share, at most ``limit``."""
    n = 0
    for a, b in zip(held[:limit], prompt[:limit]):
        if a != b:
            break
        n += 1
    return n
