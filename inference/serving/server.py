"""One engine shared by many concurrent users: a background worker that batches them.

Owns ``EngineServer`` (a bounded intake, one worker thread running a continuous
batcher) and ``RequestHandle`` (what each caller holds: an iterator of its own tokens,
``result()``, ``cancel()``). Only the worker thread touches the model and the cache;
callers talk to it through thread-safe queues.

- Paged K/V: the batcher is a ``PagedBatcher`` (``ServeConfig.kv_block_size``, 16 positions a
  block): a request holds the blocks it has filled, not a whole slot, and prompts with a common
  start share its blocks. A request with interventions runs on the slot cache instead (a
  ``ContinuousBatcher``, its pool allocated the first time one arrives): the paged batcher refuses them. Its
  tokens are what they would be on either; the step records say which cache ran (``slots`` is
  filled on the slot path only). ``kv_block_size=None`` runs every request on the slot cache.
- No cross-talk: every request has its own id, its own output queue, its own blocks (or
  slot) and its own seeded draws; a caller can only read its own queue.
- Bounded: at most ``n_slots`` requests run and ``max_waiting`` more wait (``ServeConfig``); one more
  ``submit`` raises ``BusyError`` at once instead of growing memory.
- Cancellation: ``handle.cancel()``, or the handle being garbage-collected (the
  caller, e.g. a closed browser session, went away) frees the request's blocks (or slot)
  at the next step.
- Coalescing: a request identical to one in flight (the same prompt ids and the same settings, greedy or
  seeded, no interventions, no speculation) rides it instead of taking a row: it gets that request's tokens
  so far, then each later one, then the same result (``coalesced=True``). A class following its teacher sends
  the same request from every tab; the server computes it once (``coalesced`` counts the riders). An unseeded
  request never rides: it must draw its own numbers. A caller that leaves takes only itself away.
- Observable batching: each result's ``max_batch_size`` is the most requests that
  shared one forward with it, so a caller can see it was batched with others.
- Speculative requests (``submit(..., speculate=Speculation(...))``) run at batch 1: the worker
  alternates one batched step of the others with one speculative step (one forward: draft, verify,
  keep) of each speculative request, in the request's own ``KVCache``. They do not share forwards:
  rows of a batch keep different numbers of drafts per step, and the caches keep one write position
  for every row (``generation/speculative.py``). Their steps are not in ``recent_steps`` (those are
  batched forwards); the result's ``speculation`` holds every one.

Typical use from Streamlit: build the server once with ``st.cache_resource`` around
the cached engine, then in a page ``for event in server.submit(prompt, params): ...``.
"""

from __future__ import annotations

import queue
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ..generation.engine import PromptError
from ..generation.sampling import SamplingParams
from ..generation.speculative import Speculation, SpeculationError, SpeculativeRun, SpeculativeStep, speculate
from ..model.interventions import Interventions
from ..model.tokenizer import StreamDecoder
from ..threads import set_threads
from .config import ServeConfig
from .continuous import ContinuousBatcher
from .paged import PagedBatcher
from .requests import BatchResult, BatchStep
from .scheduler import Sequence, new_request_id

if TYPE_CHECKING:
    from ..generation.engine import Engine


class BusyError(RuntimeError):
    """The server already holds as many requests as it accepts; try again shortly."""


@dataclass(frozen=True)
class TokenEvent:
    token_id: int
    text: str  # what this token adds to the streamed text (UTF-8 safe)
    finish_reason: str | None = None  # set on the request's last token


@dataclass
class _Submission:
    request_id: int
    prompt_ids: list[int]
    params: SamplingParams
    outbox: queue.SimpleQueue  # TokenEvent..., then the final BatchResult (or an Exception)
    submitted_at: float = field(default_factory=time.perf_counter)
    interventions: Interventions | None = None  # prepared against the prompt
    given_interventions: Interventions | None = None  # as the caller gave them (what a process server sends on)
    speculation: Speculation | None = None  # decode speculatively, alone (see the module docstring)


@dataclass
class _Speculating:
    """A speculative request in the worker: its submission, its steps so far and what is left of them."""

    sub: _Submission
    steps: Iterator[SpeculativeStep]
    run: SpeculativeRun
    decoder: StreamDecoder
    first_token_at: float | None = None


class RequestHandle:
    """One caller's view of its request: iterate for tokens as they come, or wait for ``result()``."""

    def __init__(self, server: EngineServer, request_id: int, outbox: queue.SimpleQueue) -> None:
        self.request_id = request_id
        self._outbox = outbox
        self._result: BatchResult | None = None
        # If the caller drops the handle without finishing, the request is cancelled.
        self._finalizer = weakref.finalize(self, server._request_cancel, request_id)

    def __iter__(self) -> Iterator[TokenEvent]:
        while self._result is None:
            item = self._outbox.get()
            if isinstance(item, TokenEvent):
                yield item
            else:
                self._finish(item)

    def result(self, timeout: float | None = None) -> BatchResult:
        """Wait for the end of the request (tokens not yet iterated are skipped); raises on failure."""
        while self._result is None:
            try:
                item = self._outbox.get(timeout=timeout)
            except queue.Empty:
                raise TimeoutError(f"request {self.request_id} did not finish within {timeout} s") from None
            if not isinstance(item, TokenEvent):
                self._finish(item)
        return self._result

    def _finish(self, item: BatchResult | Exception) -> None:
        self._finalizer.detach()
        if isinstance(item, Exception):
            raise RuntimeError(f"request {self.request_id} failed: {item}") from item
        self._result = item

    @property
    def done(self) -> bool:
        return self._result is not None

    def cancel(self) -> None:
        """Stop generating; what was produced so far stays readable, finish_reason 'cancelled'."""
        self._finalizer()


class _ServerFront:
    """The caller side every server shares: checking a prompt, the bound, handles, the step records.

    A subclass delivers a checked ``_Submission`` (``_send``) and a cancellation (``_request_cancel``)
    to wherever its worker runs; its worker answers through ``_step_done`` and ``_end``.
    """

    def __init__(self, engine: Engine, config: ServeConfig | None = None) -> None:
        self.engine = engine
        self.config = config = config or ServeConfig()
        self.max_in_flight = config.n_slots + config.max_waiting
        self.position_limit = min(config.slot_capacity, engine.config.max_seq_len)  # as the scheduler's
        self._recent_steps: deque[BatchStep] = deque(maxlen=config.keep_steps)
        self._lock = threading.Lock()
        self._in_flight = 0
        self._closed = False

    def submit(
        self,
        prompt: str | list[int],
        params: SamplingParams | None = None,
        chat: bool = False,
        interventions: Interventions | None = None,
        speculate: Speculation | None = None,
    ) -> RequestHandle:
        """Queue a request (with its own interventions, if any; decoded speculatively with ``speculate``);
        raises ``PromptError`` for a bad prompt, ``InterventionError`` for a bad spec, ``SpeculationError``
        for a speculation that cannot run on this model, ``BusyError`` when full."""
        params = params or SamplingParams()
        if speculate is not None:
            if not isinstance(speculate, Speculation):
                raise SpeculationError(f"speculate must be a Speculation, got {type(speculate).__name__}")
            speculate.check(self.engine.config.n_layers)
        ids = self.engine.encode_prompt(prompt, chat=chat)
        spec = self.engine.prepare_interventions(interventions, ids)
        if len(ids) >= self.position_limit:
            raise PromptError(
                f"the prompt is {len(ids)} tokens but this server's cache slots hold "
                f"{self.position_limit} (and one more is needed for the answer): shorten it"
            )
        with self._lock:
            if self._closed:
                raise RuntimeError("the engine server is closed")
            if self._in_flight >= self.max_in_flight:
                raise BusyError(
                    f"the server is busy: {self._in_flight} requests are running or waiting "
                    f"(limit {self.max_in_flight}); try again in a moment"
                )
            self._in_flight += 1
        request_id = new_request_id()
        outbox: queue.SimpleQueue = queue.SimpleQueue()
        handle = RequestHandle(self, request_id, outbox)
        self._send(
            _Submission(
                request_id,
                ids,
                params,
                outbox,
                interventions=spec,
                given_interventions=interventions,
                speculation=speculate,
            )
        )
        return handle

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    @property
    def recent_steps(self) -> list[BatchStep]:
        """The last ``keep_steps`` batch steps, oldest first (a copy, safe to read from any thread)."""
        with self._lock:
            return list(self._recent_steps)

    def _send(self, sub: _Submission) -> None:
        raise NotImplementedError

    def _request_cancel(self, request_id: int) -> None:
        raise NotImplementedError

    def _step_done(self, step: BatchStep) -> None:
        with self._lock:
            self._recent_steps.append(step)

    def _end(self, outbox, outcome: BatchResult | Exception) -> None:
        outbox.put(outcome)
        with self._lock:
            self._in_flight -= 1

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self, timeout: float | None = 10.0) -> None:
        raise NotImplementedError


Batcher = PagedBatcher | ContinuousBatcher


class EngineServer(_ServerFront):
    def __init__(self, engine: Engine, config: ServeConfig | None = None) -> None:
        """Start the worker; ``config`` (default ``ServeConfig()``) bounds requests, queue and the worker's threads,
        and says where K/V live (paged blocks, or slots with ``kv_block_size=None``)."""
        super().__init__(engine, config)
        paged = self.config.kv_block_size is not None
        self.batcher: Batcher = (
            PagedBatcher.for_server(engine, self.config) if paged else ContinuousBatcher(engine, self.config)
        )
        self.slot_batcher: ContinuousBatcher | None = None if paged else self.batcher  # made on first need when paged
        self._inbox: queue.SimpleQueue[_Submission] = queue.SimpleQueue()
        self._cancels: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._live: dict[int, tuple[Sequence, _Submission, StreamDecoder, Batcher]] = {}  # worker thread only
        self._speculating: dict[int, _Speculating] = {}  # worker thread only
        # Coalescing (worker thread only): a request identical to one in flight rides it: same tokens, computed once.
        self._riders: dict[int, list[_Submission]] = {}  # running request -> the identical ones riding it
        self._ride_of: dict[int, int] = {}  # a rider's request id -> the request it rides
        self._running_key: dict[tuple, int] = {}  # (prompt ids, canonical params) -> the request computing it
        self._sent: dict[int, list[TokenEvent]] = {}  # running request -> its events so far (for a late rider)
        self.coalesced = 0  # requests answered by another's computation, since the start
        self._worker = threading.Thread(target=self._serve, name="engine-server", daemon=True)
        self._worker.start()

    # -- caller side (any thread) ------------------------------------------------
    def _send(self, sub: _Submission) -> None:
        self._inbox.put(sub)
        self._wake.set()

    def _accept(self, sub: _Submission) -> None:
        """Queue a submission checked and counted elsewhere (by the caller side of a process server)."""
        with self._lock:
            self._in_flight += 1
        self._send(sub)

    def _request_cancel(self, request_id: int) -> None:
        self._cancels.put(request_id)
        self._wake.set()

    def close(self, timeout: float | None = 10.0) -> None:
        """Stop the worker; requests still in flight end with an error."""
        with self._lock:
            self._closed = True
        self._wake.set()
        self._worker.join(timeout)

    # -- worker side (the one background thread) ---------------------------------
    def _serve(self) -> None:
        if self.config.threads is not None:
            set_threads(self.config.threads)  # an entry point: the worker thread's own setting
        while not self._closed:
            self._take_submissions()
            self._take_cancels()
            busy = [batcher for batcher in self._batchers() if batcher.has_work]
            if not (busy or self._speculating):
                self._wake.wait(timeout=0.5)
                self._wake.clear()
                continue
            for batcher in busy:
                try:
                    step = batcher.step()
                except Exception as exc:  # never leave callers waiting forever
                    self._fail_all(exc)
                    break
                if step is not None:
                    self._step_done(step)
                    self._deliver(step, batcher)
            self._speculate_once()
        self._take_submissions()
        self._fail_all(RuntimeError("the engine server was closed"))

    def _coalesce_key(self, sub: _Submission) -> tuple | None:
        """What makes two requests' answers identical, or None for a request that must run on its own: one with
        interventions or speculation, or one whose draws are unseeded (each must draw its own numbers)."""
        deterministic = sub.params.temperature == 0 or sub.params.seed is not None
        if not self.config.coalesce or sub.interventions is not None or sub.speculation is not None:
            return None
        return (tuple(sub.prompt_ids), sub.params.canonical()) if deterministic else None

    def _ride(self, sub: _Submission, key: tuple | None) -> bool:
        """Let ``sub`` ride the identical request in flight, if there is one: it gets that request's events so far,
        then every later one, then its result."""
        leader = self._running_key.get(key) if key is not None else None
        if leader is None or leader not in self._live:
            return False
        self._riders.setdefault(leader, []).append(sub)
        self._ride_of[sub.request_id] = leader
        for event in self._sent.get(leader, ()):
            sub.outbox.put(event)
        self.coalesced += 1
        return True

    def _take_submissions(self) -> None:
        for sub in _drain(self._inbox):
            key = self._coalesce_key(sub)
            if self._ride(sub, key):
                continue
            if sub.speculation is not None:
                given = sub.given_interventions if sub.given_interventions is not None else sub.interventions
                steps = speculate(self.engine, sub.prompt_ids, sub.params, sub.speculation, interventions=given)
                run = SpeculativeRun(sub.speculation)
                self._speculating[sub.request_id] = _Speculating(sub, steps, run, StreamDecoder(self.engine.tokenizer))
                continue
            batcher = self._batcher_for(sub)
            try:
                seq = batcher.add(sub.prompt_ids, sub.params, sub.request_id, sub.interventions)
            except ValueError as exc:
                self._end(sub.outbox, exc)
                continue
            seq.arrived_at = sub.submitted_at  # time to first token counts the wait in the queue
            self._live[sub.request_id] = (seq, sub, StreamDecoder(self.engine.tokenizer), batcher)
            if key is not None:
                self._running_key[key] = sub.request_id
                self._sent[sub.request_id] = []

    def _batchers(self) -> list[Batcher]:
        """The batchers in use: the server's, and the slot cache's beside it once a request needed that."""
        if self.slot_batcher is None or self.slot_batcher is self.batcher:
            return [self.batcher]
        return [self.batcher, self.slot_batcher]

    def _batcher_for(self, sub: _Submission) -> Batcher:
        """Where ``sub`` runs: the server's batcher, or the slot cache for what paged blocks cannot do (interventions)."""
        if sub.interventions is None or not isinstance(self.batcher, PagedBatcher):
            return self.batcher
        if self.slot_batcher is None:
            self.slot_batcher = ContinuousBatcher(self.engine, self.config)
        return self.slot_batcher

    def _forget(self, request_id: int) -> list[_Submission]:
        """A finished (or failed) request's coalescing records gone; the riders it still had."""
        riders = self._riders.pop(request_id, [])
        for rider_id in [r for r, running in self._ride_of.items() if running == request_id]:
            del self._ride_of[rider_id]
        self._sent.pop(request_id, None)
        for key in [k for k, v in self._running_key.items() if v == request_id]:
            del self._running_key[key]
        return riders

    def _leave(self, running: int, request_id: int) -> None:
        """One of several callers of the computation ``running`` leaves (its tokens so far, 'cancelled'); the
        computation goes on for the others (when the first caller leaves, the first rider takes its place)."""
        seq, first, decoder, batcher = self._live[running]
        riders = self._riders[running]
        if first.request_id == request_id:
            leaving = first
            self._live[running] = (seq, riders.pop(0), decoder, batcher)
        else:
            leaving = next(rider for rider in riders if rider.request_id == request_id)
            riders.remove(leaving)
        self._ride_of.pop(request_id, None)
        self._end(leaving.outbox, replace(batcher.result(seq, index=0), finish_reason="cancelled"))

    def _take_cancels(self) -> None:
        for request_id in _drain(self._cancels):
            running = self._ride_of.get(request_id, request_id)  # the computation this caller waits on
            if running in self._live and self._riders.get(running):
                self._leave(running, request_id)
            elif request_id in self._speculating:
                request = self._speculating.pop(request_id)
                self._end(request.sub.outbox, self._speculative_result(request, "cancelled"))
            elif running in self._live and self._live[running][3].cancel(running) is not None:
                seq, sub, _, batcher = self._live.pop(running)
                self._forget(running)
                self._end(sub.outbox, batcher.result(seq, index=0))

    def _deliver(self, step: BatchStep, batcher: Batcher) -> None:
        """Send each request its own new token; close the finished ones."""
        finished = set(step.finished)
        for request_id, token_id in step.sampled.items():
            seq, sub, decoder, _ = self._live[request_id]
            done = request_id in finished
            text = decoder.push(token_id) + (decoder.flush() if done else "")
            event = TokenEvent(token_id, text, seq.finish_reason if done else None)
            riders = self._riders.get(request_id, [])
            for outbox in [sub.outbox] + [rider.outbox for rider in riders]:
                outbox.put(event)
            if request_id in self._sent:
                self._sent[request_id].append(event)
            if done:
                del self._live[request_id]
                result = batcher.result(seq, index=0)
                self._end(sub.outbox, result)
                for rider in self._forget(request_id):
                    self._end(rider.outbox, replace(result, coalesced=True))

    def _speculate_once(self) -> None:
        """One step (one forward, alone) of each speculative request; send its tokens, close the finished."""
        for request_id in list(self._speculating):
            request = self._speculating[request_id]
            try:
                step = next(request.steps)
            except Exception as exc:  # this request's own failure: the others go on
                del self._speculating[request_id]
                self._end(request.sub.outbox, exc)
                continue
            request.run.steps.append(step)
            if request.first_token_at is None:
                request.first_token_at = time.perf_counter()
            for i, token_id in enumerate(step.token_ids):
                last = step.finish_reason is not None and i == len(step.token_ids) - 1
                text = request.decoder.push(token_id) + (request.decoder.flush() if last else "")
                request.sub.outbox.put(TokenEvent(token_id, text, step.finish_reason if last else None))
            if step.finish_reason is not None:
                del self._speculating[request_id]
                self._end(request.sub.outbox, self._speculative_result(request, step.finish_reason))

    def _speculative_result(self, request: _Speculating, finish_reason: str) -> BatchResult:
        run, sub, now = request.run, request.sub, time.perf_counter()
        tokens = run.token_ids
        probabilities = []
        for step in run.steps:
            kept = [check.p for check in step.checks if check.accepted]
            final = step.final.probability if step.final.kind in ("bonus", "plain") else None
            probabilities += (kept + [final])[: len(step.token_ids)]
        started = request.first_token_at
        return BatchResult(
            index=0,
            prompt_ids=sub.prompt_ids,
            token_ids=tokens,
            probabilities=probabilities,
            text=self.engine.tokenizer.decode(tokens),
            finish_reason=finish_reason,
            time_to_first_token=None if started is None else started - sub.submitted_at,
            time_per_output_token=(now - started) / (len(tokens) - 1) if started and len(tokens) > 1 else None,
            max_batch_size=1 if run.steps else None,
            speculation=run,
        )

    def _fail_all(self, exc: Exception) -> None:
        for request_id in list(self._speculating):
            self._end(self._speculating.pop(request_id).sub.outbox, exc)
        for request_id in list(self._live):
            seq, sub, _, batcher = self._live.pop(request_id)
            batcher.cancel(request_id)
            self._end(sub.outbox, exc)
            for rider in self._forget(request_id):
                self._end(rider.outbox, exc)


def _drain(inbox: queue.SimpleQueue) -> Iterator:
    """Everything a queue holds right now, without waiting."""
    while True:
        try:
            yield inbox.get_nowait()
        except queue.Empty:
            return
