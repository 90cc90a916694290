"""Continuous batching: requests join and leave the batch at every step.

Owns ``ContinuousBatcher``, the runner that ties a ``Scheduler`` (who runs) to a
``SlotKVCache`` (where their keys and values live) and the shared model (the
forward). Its ``step()`` is the nano-vllm loop, one forward per call:

1. schedule: the scheduler picks a prefill of newly admitted requests, or a decode
   of every running one (pure bookkeeping, no tensors);
2. run: one forward over those rows, each reading and writing only its own slot;
3. postprocess: sample each row with its own settings and seeded stream (draw i of a
   request from (seed, i): ``generator_for``), hand the token ids back to the scheduler, which retires the finished requests and
   frees their slots for the next step's admissions.

Each step returns a ``BatchStep`` record (rows, tokens fed per request, padding,
slots and positions in use); each request's ``BatchResult`` carries its time to
first token and time per output token. A request may bring its own interventions
(``add(..., interventions=)``): its ``Sequence`` carries them, every forward passes one
spec per row, and its slot's K/V are written under them alone. ``run_continuous`` serves a fixed list of
prompts this way (the explorer's Batching page, the tests, the benchmark);
``server.py`` drives the same runner from a background thread for many callers.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

import torch

from ..generation.sampling import SamplingParams, generator_for, sample
from ..model.interventions import Interventions
from .config import ServeConfig
from .padding import left_pad
from .requests import (
    BatchResult,
    BatchRun,
    BatchStep,
    check_batch_inputs,
    encode_each,
    finished_result,
    prepare_each,
    row_specs,
)
from .scheduler import ScheduledStep, Scheduler, Sequence
from .slot_cache import SlotKVCache, SlotWrite

if TYPE_CHECKING:
    from ..generation.engine import Engine


class ContinuousBatcher:
    def __init__(self, engine: Engine, config: ServeConfig | None = None, keep_logits: bool = False) -> None:
        config = config or ServeConfig()
        self.engine = engine
        self.cache = SlotKVCache(engine.config, config.n_slots, config.slot_capacity, engine.device, engine.dtype)
        self.scheduler = Scheduler(
            config.n_slots,
            config.slot_capacity,
            engine.config.max_seq_len,
            engine.eos_ids,
            config.max_prefill_tokens,
            share_prefixes=config.share_prefixes,
        )
        self.keep_logits = keep_logits
        self.logits: dict[int, list[torch.Tensor]] = {}  # request -> (V,) per token, with keep_logits
        self.steps_done = 0

    def add(
        self,
        prompt_ids: list[int],
        params: SamplingParams | None = None,
        request_id: int | None = None,
        interventions: Interventions | None = None,
    ) -> Sequence:
        """Queue an encoded prompt (with its own interventions, if any); it joins at the next step with a free slot."""
        params = params or SamplingParams()
        seq = Sequence(list(prompt_ids), params)
        seq.interventions = self.engine.prepare_interventions(interventions, seq.prompt_ids)
        if request_id is not None:
            seq.request_id = request_id
        self.scheduler.add(seq)
        return seq

    def cancel(self, request_id: int) -> Sequence | None:
        return self.scheduler.cancel(request_id)

    @property
    def has_work(self) -> bool:
        return self.scheduler.has_work

    def step(self) -> BatchStep | None:
        """Schedule, run, postprocess; the record of what happened, or None when idle."""
        scheduled = self.scheduler.schedule()
        if scheduled is None:
            return None
        tick = time.perf_counter()
        fed = {
            seq.request_id: 0 if seq in scheduled.twins else n
            for seq, n in zip(scheduled.sequences, scheduled.new_token_counts)
        }
        for seq in scheduled.sequences:
            seq.max_batch_size = max(seq.max_batch_size, len(scheduled.sequences))
        logits = self._run(scheduled)  # (B, V)
        token_ids = [self._sample(seq, logits[row]) for row, seq in enumerate(scheduled.sequences)]
        finished = self.scheduler.postprocess(scheduled, token_ids)
        record = self._record(scheduled, fed, token_ids, finished, time.perf_counter() - tick)
        self.steps_done += 1
        return record

    def _run(self, scheduled: ScheduledStep) -> torch.Tensor:
        """One forward over the scheduled rows (left-padded within the step); last-position logits (B, V).

        Shared prefixes first: the positions a row reuses are copied into its slot, and only the rest is fed;
        a twin (the same prompt as another row of this step) gets that row's slot contents and logits."""
        for source, target, n in scheduled.copies:
            self.cache.copy_positions(source, target, n)
        computed = [seq for seq in scheduled.sequences if seq not in scheduled.twins]
        pending = [seq.pending_ids for seq in computed]
        ids = left_pad(pending)[0].to(self.engine.device)  # (R, T); the slot cache sets positions and masks
        rows = [SlotWrite(seq.slot, seq.cached, len(p)) for seq, p in zip(computed, pending)]
        positions = self.cache.begin_step(rows)  # (R, T)
        specs = row_specs([seq.interventions for seq in computed])
        if scheduled.phase == "prefill":
            logits = self.engine.prefill_batch(ids, self.cache, positions, interventions=specs)  # (R, V)
        else:
            logits = self.engine.decode_batch(ids, self.cache, positions, interventions=specs)  # (R, V)
        if not scheduled.twins:
            return logits
        for twin, primary in scheduled.twins.items():
            self.cache.copy_positions(primary.slot, twin.slot, len(twin.prompt_ids))
        row_of = {seq: row for row, seq in enumerate(computed)}
        return logits[[row_of[scheduled.twins.get(seq, seq)] for seq in scheduled.sequences]]  # (B, V)

    def _sample(self, seq: Sequence, logits: torch.Tensor) -> int:
        if self.keep_logits:
            self.logits.setdefault(seq.request_id, []).append(logits.clone())
        choice = sample(logits, seq.params, generator_for(seq.params, len(seq.output_ids)), previous_ids=seq.all_ids)
        seq.output_probs.append(choice.probability)
        return choice.token_id

    def _record(
        self,
        scheduled: ScheduledStep,
        fed: dict[int, int],
        token_ids: list[int],
        finished: list[Sequence],
        seconds: float,
    ) -> BatchStep:
        width = max(fed.values())
        computed = sum(n > 0 for n in fed.values())  # rows of the forward (a twin is not one)
        scheduler = self.scheduler
        return BatchStep(
            index=self.steps_done,
            phase=scheduled.phase,
            request_ids=[seq.request_id for seq in scheduled.sequences],
            new_tokens=fed,
            sampled={seq.request_id: t for seq, t in zip(scheduled.sequences, token_ids)},
            batch_positions=width * computed,
            wasted_positions=width * computed - sum(fed.values()),
            cache_slots_in_use=scheduler.slots_in_use,
            cache_slots_total=self.cache.n_slots,
            cache_positions_in_use=scheduler.positions_in_use,
            cache_positions_reserved=scheduler.slots_in_use * self.cache.capacity,
            finished=[seq.request_id for seq in finished],
            seconds=seconds,
            slots={seq.request_id: seq.slot for seq in scheduled.sequences},
            reused_positions=dict(scheduled.reused),
        )

    def result(self, seq: Sequence, index: int) -> BatchResult:
        """A finished (or cancelled) sequence as a ``BatchResult``."""
        return finished_result(
            seq,
            index,
            self.engine.tokenizer.decode(seq.output_ids),
            self.logits.pop(seq.request_id, []) if self.keep_logits else None,
        )


def run_continuous(
    engine: Engine,
    prompts: list[str | list[int]],
    params_list: list[SamplingParams | None] | None = None,
    n_slots: int | None = None,
    slot_capacity: int | None = None,
    chat: bool = False,
    keep_logits: bool = False,
    interventions_list: list[Interventions | None] | None = None,
    share_prefixes: bool = False,
) -> BatchRun:
    """Serve a fixed list of prompts by continuous batching (all arrive at once).

    ``n_slots`` (default: one per prompt, at most ``ServeConfig``'s) bounds how many run
    together; the rest wait and join as slots free up. ``slot_capacity`` defaults to
    the longest prompt plus its answer. ``share_prefixes`` (off: every prompt computed
    whole, as the Batching page counts it) reuses the K/V of prompt starts already computed.
    """
    all_params = check_batch_inputs(prompts, params_list)
    results = encode_each(engine, prompts, chat)
    specs = prepare_each(engine, results, interventions_list)
    live = [r for r in results if r.ok]
    if not live:
        return BatchRun(results, [])
    if slot_capacity is None:
        slot_capacity = min(
            engine.config.max_seq_len, max(len(r.prompt_ids) + all_params[r.index].max_new_tokens for r in live)
        )
    config = replace(ServeConfig(), slot_capacity=slot_capacity)
    config = replace(config, n_slots=n_slots or min(len(live), config.n_slots), share_prefixes=share_prefixes)
    batcher = ContinuousBatcher(engine, config, keep_logits=keep_logits)
    sequences = {}
    for result in live:
        try:
            sequences[result.index] = batcher.add(
                result.prompt_ids, all_params[result.index], result.index, specs[result.index]
            )
        except ValueError as exc:
            result.finish_reason, result.error = "error", exc
    steps = []
    while batcher.has_work:
        steps.append(batcher.step())
    for index, seq in sequences.items():
        results[index] = batcher.result(seq, index)
    return BatchRun(results, steps)
