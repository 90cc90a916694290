"""Continuous batching on paged KV blocks: admission by free blocks, preemption, and parallel samples by fork.

Owns ``PagedBatcher``, the runner that ties waiting and running ``Sequence``s to a ``PagedKVCache``
and the shared model, and ``run_paged``, which serves a fixed list of prompts with it. Its ``step()``
is the nano-vllm loop, one forward per call:

1. schedule: a prefill of the waiting sequences whose prompts fit the free blocks (their cached
   start, a prefix hit, is not fed again; one whose next block this step's prefill computes for
   another waits a step and shares it: a class on one prompt computes it once; one whose whole prompt
   another of this step's prefills feeds is forked from it, as ``add_parallel``'s answers are: the
   Sampling page's four settings on one prompt compute it once), or else a decode of every running
   sequence. When a decode step lacks blocks, the newest running sequence gives all of its blocks back
   and waits again (preemption by recompute, vLLM's default); on its return it feeds its prompt and
   outputs so far;
2. run: one forward over those rows through the paged cache;
3. postprocess: sample each row with its own settings and seeded stream (draw i from (seed, i):
   ``generator_for``), retire the finished sequences and free their blocks.

A preempted sequence's output is what it would have been uncontested: its draws depend on (seed, i)
alone, and its K/V are recomputed from the same tokens. ``add_parallel`` asks for several answers to
one prompt: the prompt is computed once, then each further answer forks the first's block table
(sharing every block, copy-on-write on the partly filled last one) and samples from the same logits.

With ``share_agreeing`` (the server's batcher), an answer is forked only when its token differs: answers on one
row that drew the same token go on riding that row, since their next logits are the row's. Answers on one seed (the
Sampling page's four settings) draw the same u at each step, so they agree wherever u falls in the same token's
range under each one's settings, and each agreeing token is one row fewer in the forward. A rider is given the logits
of its own tokens at its own positions, read from the same blocks: what a row of its own would compute.

``PagedBatcher.for_server`` is the shared engine server's batcher (``server.py``): at most ``n_slots``
sequences run, on a pool of the positions those slots would reserve. The slot cache (``continuous.py``)
stays for the pages that compare the two, and for requests with interventions, which this batcher refuses.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import replace
from typing import TYPE_CHECKING

import torch

from ..generation.sampling import SamplingParams, finish_reason, generator_for, sample
from ..number_text import NumberError, whole
from .config import ServeConfig
from .padding import left_pad
from .paged_cache import PagedKVCache, PagedWrite
from .requests import BatchResult, BatchStep, finished_result
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
        *,
        max_running: int | None = None,
        position_limit: int | None = None,
        share_prefixes: bool = True,
        share_agreeing: bool = False,
    ) -> None:
        """``max_running`` bounds the sequences that run at once (None: as many as the blocks hold);
        ``position_limit`` a sequence's prompt + answer (None: the model's context); ``share_prefixes``
        off: no prefix hits, every prompt computed whole (its blocks never keyed); ``share_agreeing``: answers
        forked from one row share it while they draw the same tokens (off: each is forked after its first)."""
        if max_running is not None and max_running < 1:
            raise ValueError(f"max_running must be >= 1 or None, got {max_running}")
        self.engine = engine
        self.cache = PagedKVCache(engine.config, num_blocks, block_size, engine.device, engine.dtype)
        self.position_limit = min(position_limit or engine.config.max_seq_len, engine.config.max_seq_len)
        self.max_prefill_tokens = max_prefill_tokens
        self.max_running = max_running
        self.share_prefixes = share_prefixes
        self.share_agreeing = share_agreeing
        self.waiting: list[Sequence] = []
        self.running: list[Sequence] = []  # in admission order: the last is preempted first
        self.forks: dict[Sequence, list[Sequence]] = {}  # a row -> the answers riding it (forked when they part)
        self.preemptions = 0
        self.logits: dict[Sequence, list[torch.Tensor]] | None = {} if keep_logits else None  # (V,) per token
        self.steps_done = 0
        self._order = itertools.count()
        self._admitted: dict[Sequence, int] = {}

    @classmethod
    def for_server(cls, engine: Engine, config: ServeConfig, keep_logits: bool = False) -> PagedBatcher:
        """The server's batcher: ``config.n_slots`` requests at once of at most ``config.slot_capacity`` positions,
        on a pool of ``config.kv_positions`` positions, or (None) as many as those slots would reserve, so that no
        request is ever preempted."""
        if config.kv_block_size is None:
            raise ValueError("this ServeConfig asks for the slot cache (kv_block_size=None), not paged blocks")
        limit = min(config.slot_capacity, engine.config.max_seq_len)
        per_request = -(-limit // config.kv_block_size)
        blocks = config.n_slots * per_request
        if config.kv_positions is not None:  # at least one whole request (ServeConfig checks it), at most the slots'
            blocks = min(blocks, -(-config.kv_positions // config.kv_block_size))
        return cls(
            engine,
            blocks,
            config.kv_block_size,
            config.max_prefill_tokens,
            keep_logits,
            max_running=config.n_slots,
            position_limit=limit,
            share_prefixes=config.share_prefixes,
            share_agreeing=True,
        )

    def add(
        self,
        prompt_ids: list[int],
        params: SamplingParams | None = None,
        request_id: int | None = None,
        interventions: None = None,
    ) -> Sequence:
        """Queue an encoded prompt; it joins at the next step whose free blocks hold it (``ContinuousBatcher``'s
        signature; interventions run on the slot cache only, whose key columns are positions)."""
        if interventions is not None:
            raise ValueError("interventions run on the slot cache (ContinuousBatcher), not on paged blocks")
        seq = self.add_parallel(prompt_ids, [params or SamplingParams()])[0]
        if request_id is not None:
            seq.request_id = request_id
        return seq

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

    def cancel(self, request_id: int) -> Sequence | None:
        """Stop a request wherever it is (its blocks given back; the answers riding on it go on without it); it, or
        None if unknown or already finished."""
        for seq in [*self.waiting, *self.running]:
            if seq.request_id == request_id:
                riders = self.forks.pop(seq, [])
                if riders and seq in self.waiting:  # the first rider waits in its place
                    self.waiting[self.waiting.index(seq)] = riders[0]
                    self.forks[riders[0]] = riders[1:]
                elif riders:  # the first rider takes over its row (a fork of its table)
                    self._fork(seq, riders[0])
                    self.forks[riders[0]] = riders[1:]
                if seq in self.waiting:
                    self.waiting.remove(seq)
                self._finish(seq, "cancelled")
                return seq
        for children in self.forks.values():  # an answer riding another
            for child in children:
                if child.request_id == request_id:
                    children.remove(child)
                    self._finish(child, "cancelled")
                    return child
        return None

    def step(self) -> BatchStep | None:
        """Schedule, run, postprocess; the record of what happened, or None when idle."""
        tick = time.perf_counter()
        phase, rows = self._schedule()
        if not rows:
            return None
        fed = {seq.request_id: len(seq.pending_ids) for seq in rows}
        reused = {seq.request_id: seq.cached for seq in rows if phase == "prefill" and seq.cached}
        # the requests this forward serves: its rows and the answers riding them
        served = len(rows) + sum(len(self.forks.get(seq, [])) for seq in rows)
        for seq in rows:
            for member in [seq, *self.forks.get(seq, [])]:
                member.max_batch_size = max(member.max_batch_size, served)
        logits = self._run(phase, rows)  # (B, V)
        sampled, finished = self._postprocess(rows, logits)
        self.steps_done += 1
        width = max(fed.values())
        return BatchStep(
            index=self.steps_done - 1,
            phase=phase,
            request_ids=list(sampled),
            new_tokens={**fed, **{r: 0 for r in sampled if r not in fed}},  # forked answers fed nothing
            sampled=sampled,
            batch_positions=width * len(rows),
            wasted_positions=width * len(rows) - sum(fed.values()),
            cache_slots_in_use=len(self.running) + self._riding(),  # the answers riding rows hold seats too
            cache_slots_total=self.max_running or len(self.running),
            cache_positions_in_use=sum(seq.cached for seq in self.running),
            cache_positions_reserved=self.cache.groups[0].manager.num_used * self.cache.block_size,
            finished=[seq.request_id for seq in finished],
            seconds=time.perf_counter() - tick,
            reused_positions=reused,
            kv_bytes_held=self.cache.used_bytes,
            kv_bytes_without_release=self.cache.bytes_without_release,
        )

    def result(self, seq: Sequence, index: int) -> BatchResult:
        """A finished (or cancelled) sequence as a ``BatchResult``."""
        return finished_result(
            seq,
            index,
            self.engine.tokenizer.decode(seq.output_ids),
            self.logits.pop(seq, []) if self.logits is not None else None,
        )

    # 1. schedule -------------------------------------------------------------------------
    def _schedule(self) -> tuple[str, list[Sequence]]:
        admitted, budget, computing = [], self.max_prefill_tokens, set()
        size, share = self.cache.block_size, self.share_prefixes
        seats = self.max_running - len(self.running) - self._riding() if self.max_running is not None else None
        feeding: dict[tuple[int, ...], Sequence] = {}  # this step's prefills by the positions they hold after it
        while self.waiting:
            seq = self.waiting[0]
            needs = 1 + len(self.forks.get(seq, []))  # its forked answers run beside it from the next step
            if seats is not None and needs > seats and (self.running or admitted):
                break  # (alone, a request of more answers than seats still runs, so nothing waits forever)
            twin = feeding.get(tuple(seq.all_ids)) if share else None
            if twin is not None:  # the same positions as a prefill of this step: forked from it, sampled from its row
                self.waiting.pop(0)
                self.forks.setdefault(twin, []).extend([seq, *self.forks.pop(seq, [])])
                if seats is not None:
                    seats -= needs
                continue
            if not self.cache.can_add(seq.all_ids, share):
                break
            hits = self.cache.prefix_hits(seq.all_ids) if share else 0
            following = len(seq.all_ids) > (hits + 1) * size
            next_block = tuple(seq.all_ids[: (hits + 1) * size]) if share and following else None
            if next_block is not None and next_block in computing:
                break  # a start this step computes: wait one step and share its blocks instead of copying them
            to_compute = len(seq.all_ids) - hits * size
            if admitted and to_compute > budget:
                break
            self.waiting.pop(0)
            seq.cached = self.cache.add(seq.request_id, seq.all_ids, share)
            if not self.cache.can_write({s.request_id: len(s.pending_ids) for s in [*admitted, seq]}):
                self.cache.free(seq.request_id)  # the hits fit but not the rest with this step's others
                self.waiting.insert(0, seq)
                break
            seq.status = SequenceStatus.RUNNING
            if next_block is not None:
                computing.add(next_block)
            feeding[tuple(seq.all_ids)] = seq
            self._admitted[seq] = next(self._order)
            budget -= to_compute
            if seats is not None:
                seats -= needs
            admitted.append(seq)
        if admitted:
            self.running.extend(admitted)
            return "prefill", admitted
        while self.running and not self.cache.can_write({s.request_id: 1 for s in self.running}):
            self._preempt(max(self.running, key=self._admitted.__getitem__))
        if not self.running and self.waiting:  # all preempted: the oldest comes back alone (it always fits)
            return self._schedule()
        return "decode", list(self.running)

    def _riding(self) -> int:
        """The answers served on running rows that are not their own."""
        return sum(len(self.forks.get(seq, [])) for seq in self.running)

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
    def _postprocess(self, rows: list[Sequence], logits: torch.Tensor) -> tuple[dict[int, int], list[Sequence]]:
        """Sample every row (and the answers riding it); the tokens by request and the finished sequences."""
        now = time.perf_counter()
        sampled, finished = {}, []
        for seq, row_logits in zip(rows, logits):
            seq.cached += len(seq.pending_ids)
            riders = self.forks.pop(seq, [])
            if not self.share_agreeing:  # each answer a row of its own from the next step
                for child in riders:
                    self._fork(seq, child)
            for member in [*riders, seq]:  # parallel answers: share the prompt, sample the same logits
                sampled[member.request_id] = self._draw(member, row_logits, now)
            done = {}
            for member in [seq, *riders]:
                reason = finish_reason(
                    member.params, self.engine.eos_ids, member.output_ids, len(member.all_ids), self.position_limit
                )
                if reason is not None:
                    done[member] = reason
            if self.share_agreeing:
                self._seat(seq, [member for member in [seq, *riders] if member not in done])
            for member, reason in done.items():
                self._finish(member, reason, now)
                finished.append(member)
        return sampled, finished

    def _seat(self, row: Sequence, going: list[Sequence]) -> None:
        """The answers of ``row``'s forward that go on (``row`` first if it does), grouped by the token they drew:
        ``row``'s group stays on it; each other group's first answer takes a fork of ``row``'s table, the rest ride."""
        groups: dict[int, list[Sequence]] = {}
        for member in going:
            groups.setdefault(member.output_ids[-1], []).append(member)
        for head, *rest in groups.values():
            if head is not row:
                self._fork(row, head)
            if rest:
                self.forks[head] = rest

    def _fork(self, row: Sequence, child: Sequence) -> None:
        """``child`` runs on a row of its own from the next step, on a fork of ``row``'s table (every block shared)."""
        self.cache.fork(row.request_id, child.request_id)
        child.cached, child.status = row.cached, SequenceStatus.RUNNING
        child.max_batch_size = max(child.max_batch_size, row.max_batch_size)
        self._admitted[child] = next(self._order)
        self.running.append(child)

    def _draw(self, seq: Sequence, logits: torch.Tensor, now: float) -> int:
        params = seq.params
        if self.logits is not None:
            self.logits.setdefault(seq, []).append(logits.clone())
        choice = sample(logits, params, generator_for(params, len(seq.output_ids)), previous_ids=seq.all_ids)
        seq.output_ids.append(choice.token_id)
        seq.output_probs.append(choice.probability)
        if seq.first_token_at is None:
            seq.first_token_at = now
        return choice.token_id

    def _finish(self, seq: Sequence, reason: str, now: float | None = None) -> None:
        if seq in self.running:
            self.running.remove(seq)
            self.cache.free(seq.request_id)
        self._admitted.pop(seq, None)
        seq.status, seq.finish_reason = SequenceStatus.FINISHED, reason
        seq.finished_at = time.perf_counter() if now is None else now


def parse_kv(text: str) -> int | None:
    """The command line's ``--kv``: "contiguous" (None) or "paged" / "paged:BLOCK" (the block size, default 16)."""
    kind, _, block = text.partition(":")
    if kind == "contiguous" and not block:
        return None
    if kind == "paged":
        if not block:
            return 16
        try:
            return whole(block, low=1)
        except NumberError:
            pass
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
