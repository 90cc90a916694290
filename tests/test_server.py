"""The shared engine server: many callers, one worker thread, no cross-talk, bounded, cancellable."""

from __future__ import annotations

import dataclasses
import gc
import threading
import time

import pytest

from inference import (
    BusyError,
    EngineServer,
    PromptError,
    SamplingParams,
    ServeConfig,
    Speculation,
    SpeculationError,
    TokenEvent,
    run_continuous,
    run_static,
)
from tests.test_batching import PROMPTS, greedy, solo, tiny_engine

WAIT = 60.0  # generous upper bound for a wait on a busy machine; never a performance assertion


@pytest.fixture(scope="module")
def tiny():
    return tiny_engine("llama")


class StepGate:
    """Lets the test decide when the worker may run each step (wraps ``batcher.step``)."""

    def __init__(self, server: EngineServer) -> None:
        self.permits = threading.Semaphore(0)
        self._step = server.batcher.step
        server.batcher.step = self._gated_step

    def _gated_step(self):
        self.permits.acquire()
        return self._step()

    def allow(self, steps: int) -> None:
        for _ in range(steps):
            self.permits.release()


def wait_until(condition) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "the server did not get there"
        time.sleep(0.005)


def test_stream_of_one_request_equals_solo(tiny):
    with EngineServer(tiny, ServeConfig(n_slots=2)) as server:
        check_stream_equals_solo(tiny, server)


def check_stream_equals_solo(tiny, server) -> None:
    """One streamed request: its events are a solo run's tokens, its text the result's (any server kind)."""
    params = greedy(7, stop_on_eos=False)
    handle = server.submit(PROMPTS[2], params)
    events = list(handle)
    assert all(isinstance(e, TokenEvent) for e in events)
    assert [e.token_id for e in events] == solo(tiny, PROMPTS[2], params)[0]
    assert [e.finish_reason for e in events][-2:] == [None, "length"]
    assert "".join(e.text for e in events) == handle.result().text
    assert handle.result().time_to_first_token is not None


def test_threads_submitting_at_once_each_get_their_own_tokens(tiny):
    requests = [
        (PROMPTS[i % 4], SamplingParams(temperature=0.9, top_k=30, seed=i, max_new_tokens=3 + 2 * i, stop_on_eos=False))
        for i in range(8)
    ]
    expected = [solo(tiny, prompt, params)[0] for prompt, params in requests]
    got: dict[int, list[int]] = {}
    start = threading.Barrier(len(requests))

    def caller(i: int) -> None:
        start.wait()
        handle = server.submit(*requests[i])
        got[i] = [event.token_id for event in handle]

    with EngineServer(tiny, ServeConfig(n_slots=3, max_waiting=8)) as server:
        threads = [threading.Thread(target=caller, args=(i,)) for i in range(len(requests))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT)
        assert server.in_flight == 0
        assert max(step.cache_slots_in_use for step in server.recent_steps) <= 3
    assert [got[i] for i in range(len(requests))] == expected


def test_full_queue_answers_busy_instead_of_growing(tiny):
    with EngineServer(tiny, ServeConfig(n_slots=1, max_waiting=1)) as server:
        gate = StepGate(server)
        first = server.submit(PROMPTS[0], greedy(3, stop_on_eos=False))
        second = server.submit(PROMPTS[1], greedy(2, stop_on_eos=False))
        with pytest.raises(BusyError, match="busy"):
            server.submit(PROMPTS[2], greedy(2))
        gate.allow(1000)
        assert len(first.result(WAIT).token_ids) == 3
        assert len(second.result(WAIT).token_ids) == 2
        wait_until(lambda: server.in_flight == 0)
        assert server.submit(PROMPTS[2], greedy(2)).result(WAIT).finish_reason == "length"  # room again


def test_cancel_stops_a_request_and_frees_its_slot(tiny):
    with EngineServer(tiny, ServeConfig(n_slots=1, max_waiting=4)) as server:
        gate = StepGate(server)
        doomed = server.submit(PROMPTS[1], greedy(100, stop_on_eos=False))
        waiting = server.submit(PROMPTS[0], greedy(4, stop_on_eos=False))
        gate.allow(3)
        stream = iter(doomed)
        first_tokens = [next(stream).token_id for _ in range(3)]
        doomed.cancel()
        gate.allow(1000)
        result = doomed.result(WAIT)
        assert result.finish_reason == "cancelled"
        assert result.token_ids[:3] == first_tokens and len(result.token_ids) < 100
        assert waiting.result(WAIT).token_ids == solo(tiny, PROMPTS[0], greedy(4, stop_on_eos=False))[0]


def test_request_is_cancelled_when_its_caller_goes_away(tiny):
    with EngineServer(tiny, ServeConfig(n_slots=1, max_waiting=1)) as server:
        gate = StepGate(server)
        handle = server.submit(PROMPTS[1], greedy(100, stop_on_eos=False))
        gate.allow(2)
        del handle
        gc.collect()
        gate.allow(1000)
        wait_until(lambda: server.in_flight == 0)
        assert len(server.recent_steps) < 100  # stopped long before its 100 tokens


def test_bad_prompt_raises_for_its_caller_only(tiny):
    with EngineServer(tiny, ServeConfig(n_slots=2, slot_capacity=64)) as server:
        with pytest.raises(PromptError, match="no tokens"):
            server.submit([], greedy(2))
        with pytest.raises(PromptError, match="cache slots hold 64"):
            server.submit(PROMPTS[3], greedy(2))  # 90 tokens
        assert server.submit(PROMPTS[0], greedy(2)).result(WAIT).ok
        assert server.in_flight == 0


def test_closed_server_refuses_and_releases_waiters(tiny):
    server = EngineServer(tiny, ServeConfig(n_slots=1))
    gate = StepGate(server)
    handle = server.submit(PROMPTS[0], greedy(50, stop_on_eos=False))
    gate.allow(1)
    closer = threading.Thread(target=server.close)
    closer.start()
    gate.allow(1000)
    closer.join(WAIT)
    with pytest.raises(RuntimeError, match="closed"):
        handle.result(WAIT)
    with pytest.raises(RuntimeError, match="closed"):
        server.submit(PROMPTS[0], greedy(2))


def test_each_result_reports_how_many_requests_shared_its_forward(tiny):
    """Callers that overlap in time are batched: their results say so; a request alone says 1."""
    with EngineServer(tiny, ServeConfig(n_slots=4, max_waiting=4)) as server:
        gate = StepGate(server)
        handles = [server.submit(PROMPTS[i], greedy(6, stop_on_eos=False)) for i in range(3)]
        gate.allow(1000)
        # the three are prefilled within two steps, then decoded together (none ends before 6 tokens)
        assert [handle.result(WAIT).max_batch_size for handle in handles] == [3, 3, 3]
        wait_until(lambda: server.in_flight == 0)
        assert server.submit(PROMPTS[0], greedy(3)).result(WAIT).max_batch_size == 1
        assert max(len(step.request_ids) for step in server.recent_steps) == 3  # agrees with the step records


def test_batch_size_is_bounded_by_the_slots_and_static_batches_report_all_rows(tiny):
    prompts = [PROMPTS[i % 4] for i in range(5)]
    continuous = run_continuous(tiny, prompts, [greedy(4, stop_on_eos=False)] * 5, n_slots=2)
    # two at a time finish together; the fifth runs alone
    assert [result.max_batch_size for result in continuous.results] == [2, 2, 2, 2, 1]
    static = run_static(tiny, prompts, [greedy(4, stop_on_eos=False)] * 5)
    assert {result.max_batch_size for result in static.results} == {5}


# -- speculative requests: at batch 1, beside batched ones --------------------------------------------------
REPEATING = [3, 14, 15, 92, 65, 35, 3, 14, 15, 92, 65, 35, 3, 14, 15]  # prompt lookup finds its drafts here


def check_speculative_beside_plain(tiny, server) -> None:
    """A speculative request among plain ones: each gets exactly what it gets alone (any server kind)."""
    for params in (greedy(12, stop_on_eos=False), SamplingParams(0.8, seed=3, max_new_tokens=12, stop_on_eos=False)):
        speculation = Speculation("lookup", 4)
        handles = [
            server.submit(PROMPTS[0], params),
            server.submit(REPEATING, params, speculate=speculation),
            server.submit(PROMPTS[1], params),
        ]
        events = list(handles[1])
        results = [handle.result(timeout=WAIT) for handle in handles]
        alone = tiny.complete(REPEATING, params, speculate=speculation)
        assert results[1].token_ids == [e.token_id for e in events] == alone.token_ids
        assert "".join(e.text for e in events) == results[1].text == alone.text
        assert results[1].finish_reason == events[-1].finish_reason == "length"
        assert results[1].max_batch_size == 1 and len(results[1].probabilities) == 12
        assert results[1].speculation.drafted > 0 and results[1].speculation.token_ids == alone.token_ids
        for result, prompt in ((results[0], PROMPTS[0]), (results[2], PROMPTS[1])):
            assert result.token_ids == solo(tiny, prompt, params)[0]
    assert server.in_flight == 0


def test_a_speculative_request_runs_alone_beside_batched_ones(tiny):
    with EngineServer(tiny, ServeConfig(n_slots=2)) as server:
        check_speculative_beside_plain(tiny, server)


def test_a_speculative_request_can_be_cancelled_and_bad_speculation_is_refused(tiny):
    with EngineServer(tiny, ServeConfig(n_slots=2)) as server:
        handle = server.submit(REPEATING, greedy(200, stop_on_eos=False), speculate=Speculation("self", 2, layers=1))
        first = next(iter(handle))
        handle.cancel()
        result = handle.result(timeout=WAIT)
        assert result.finish_reason == "cancelled" and result.token_ids[0] == first.token_id
        assert len(result.token_ids) < 200
        with pytest.raises(SpeculationError, match="speculate must be a Speculation"):
            server.submit(REPEATING, greedy(4), speculate="lookup")
        with pytest.raises(SpeculationError, match=r"choose 1\.\.1 layers, got 2"):
            server.submit(REPEATING, greedy(4), speculate=Speculation("self", layers=2))
        wait_until(lambda: server.in_flight == 0)


# ---- coalescing: identical requests in flight are computed once ------------------------------------------------
def test_identical_seeded_requests_in_flight_are_computed_once_and_each_gets_every_token(tiny):
    """A class following its teacher sends the same prompt and settings many times: the server computes it once.
    A request that arrives while its twin runs still gets the whole stream (the tokens so far, then the rest)."""
    params = SamplingParams(temperature=0.9, top_k=30, seed=5, max_new_tokens=6, stop_on_eos=False)
    expected = solo(tiny, PROMPTS[1], params)[0]
    with EngineServer(tiny, ServeConfig(n_slots=4, max_waiting=8)) as server:
        gate = StepGate(server)
        first = server.submit(PROMPTS[1], params)
        second = server.submit(PROMPTS[1], params)
        gate.allow(3)  # the prefill and two decode steps: the twins have 3 tokens
        stream = iter(first)
        assert [next(stream).token_id for _ in range(3)] == expected[:3]
        late = server.submit(PROMPTS[1], params)  # arrives mid-way
        other = server.submit(PROMPTS[1], dataclasses.replace(params, seed=6))  # another seed: its own
        gate.allow(1000)
        results = [h.result(WAIT) for h in (first, second, late)]
        assert [r.token_ids for r in results] == [expected] * 3
        assert [event.token_id for event in late] == []  # (already read by result: nothing left over)
        assert [r.coalesced for r in results] == [False, True, True]
        assert other.result(WAIT).token_ids == solo(tiny, PROMPTS[1], dataclasses.replace(params, seed=6))[0]
        assert server.coalesced == 2
        rows = {rid for step in server.recent_steps for rid in step.request_ids}
        assert rows == {first.request_id, other.request_id}  # the riders never took a row of the batch
        wait_until(lambda: server.in_flight == 0)


def test_a_late_rider_streams_the_tokens_it_missed_first(tiny):
    params = greedy(5, stop_on_eos=False)
    with EngineServer(tiny, ServeConfig(n_slots=2)) as server:
        gate = StepGate(server)
        first = server.submit(PROMPTS[0], params)
        gate.allow(2)
        wait_until(lambda: len(server.recent_steps) == 2)
        late = server.submit(PROMPTS[0], params)
        gate.allow(1000)
        assert [event.token_id for event in late] == solo(tiny, PROMPTS[0], params)[0]
        assert first.result(WAIT).token_ids == late.result(WAIT).token_ids


def test_unseeded_requests_are_never_coalesced_and_a_leaving_caller_leaves_the_others_their_answer(tiny):
    with EngineServer(tiny, ServeConfig(n_slots=4)) as server:
        unseeded = SamplingParams(temperature=1.0, seed=None, max_new_tokens=4, stop_on_eos=False)
        handles = [server.submit(PROMPTS[2], unseeded) for _ in range(3)]
        assert all(not h.result(WAIT).coalesced for h in handles) and server.coalesced == 0
        gate = StepGate(server)
        params = greedy(8, stop_on_eos=False)
        first, second, third = (server.submit(PROMPTS[0], params) for _ in range(3))
        gate.allow(2)
        first.cancel()  # the caller computing it leaves: the riders go on without it
        gate.allow(2)
        third.cancel()
        gate.allow(1000)
        assert first.result(WAIT).finish_reason == "cancelled" and third.result(WAIT).finish_reason == "cancelled"
        assert second.result(WAIT).token_ids == solo(tiny, PROMPTS[0], params)[0]
        wait_until(lambda: server.in_flight == 0)
        assert server.coalesced == 2


def test_coalescing_can_be_switched_off(tiny):
    with EngineServer(tiny, ServeConfig(n_slots=4, coalesce=False)) as server:
        handles = [server.submit(PROMPTS[0], greedy(3)) for _ in range(2)]
        assert [h.result(WAIT).coalesced for h in handles] == [False, False] and server.coalesced == 0
