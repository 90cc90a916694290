"""The engine server in a child process: the same tokens as a solo run, bounded, cancellable, and a child that
dies fails its requests with a clear error and is replaced; other reads of its engine by name, with plain
arguments only (no function ever travels)."""

from __future__ import annotations

import gc
import io
import os
import pickle
import signal
import threading

import numpy as np
import pytest

from inference import (
    BusyError,
    EngineClient,
    HeadEdit,
    Interventions,
    ProcessServer,
    PromptError,
    SamplingParams,
    ServeConfig,
    load_engine,
)
from inference.serving.process import _PlainUnpickler, check_plain
from tests.test_batching import PROMPTS, greedy, solo
from tests.test_server import check_speculative_beside_plain, check_stream_equals_solo, wait_until
from tests.tiny_models import save_folder, tiny_llama

WAIT = 120.0  # a child's start (torch's import) on a busy machine; never a performance assertion


@pytest.fixture(scope="module")
def tiny_load(tmp_path_factory, tokenizer_folder) -> dict:
    """``load_engine``'s plain arguments for a tiny random Llama written as a folder: the caller and the child
    load the same model from them."""
    folder = save_folder(tiny_llama(), tmp_path_factory.mktemp("tiny") / "llama", tokenizer_folder)
    return {"model": str(folder), "device": "cpu", "dtype": "float32"}


@pytest.fixture(scope="module")
def tiny(tiny_load):
    return load_engine(**tiny_load)


@pytest.fixture
def server(tiny, tiny_load):
    with ProcessServer(tiny, tiny_load, ServeConfig(n_slots=3, max_waiting=8)) as running:
        yield running


def test_a_streamed_request_equals_a_solo_run_in_this_process(tiny, server):
    check_stream_equals_solo(tiny, server)


def test_a_speculative_request_runs_alone_in_the_child_beside_batched_ones(tiny, server):
    check_speculative_beside_plain(tiny, server)


def test_threads_submitting_at_once_each_get_their_own_tokens(tiny, server):
    requests = [
        (PROMPTS[i % 4], SamplingParams(temperature=0.9, top_k=30, seed=i, max_new_tokens=3 + 2 * i, stop_on_eos=False))
        for i in range(6)
    ]
    results: list = [None] * len(requests)

    def one(i: int) -> None:
        results[i] = server.submit(*requests[i]).result(timeout=WAIT)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for (prompt, params), result in zip(requests, results):
        assert result.token_ids == solo(tiny, prompt, params)[0]
    wait_until(lambda: server.in_flight == 0)
    steps = server.recent_steps  # the child's step records, sent to this process
    assert steps and max(step.cache_slots_in_use for step in steps) <= 3
    assert max(len(step.request_ids) for step in steps) > 1, "the child batched the requests"


def test_the_bound_and_bad_prompts_are_checked_here(tiny, tiny_load):
    config = ServeConfig(n_slots=1, max_waiting=1, slot_capacity=64)
    with ProcessServer(tiny, tiny_load, config) as server:
        long = greedy(60, stop_on_eos=False)
        handles = [server.submit(PROMPTS[0], long), server.submit(PROMPTS[1], long)]
        with pytest.raises(BusyError, match="limit 2"):
            server.submit(PROMPTS[2], long)
        with pytest.raises(PromptError, match="cache slots hold"):
            server.submit([5] * server.position_limit, long)
        for handle in handles:
            handle.cancel()
        wait_until(lambda: server.in_flight == 0)
        assert server.submit(PROMPTS[2], greedy(3)).result(timeout=WAIT).ok  # room again


def test_a_dropped_handle_cancels_its_request_in_the_child(server):
    handle = server.submit(PROMPTS[0], greedy(200, stop_on_eos=False))
    wait_until(lambda: len(server.recent_steps) > 0)
    del handle
    gc.collect()
    wait_until(lambda: server.in_flight == 0)
    assert len(server.recent_steps) < 200  # stopped long before its 200 tokens


def test_a_child_that_dies_fails_its_requests_and_the_next_request_starts_a_new_one(tiny, server):
    params = greedy(200, stop_on_eos=False)
    handle = server.submit(PROMPTS[0], params)
    wait_until(lambda: len(server.recent_steps) > 0)
    first = server.child_pid
    os.kill(first, signal.SIGKILL)
    with pytest.raises(RuntimeError, match="engine server process stopped"):
        handle.result(timeout=WAIT)
    wait_until(lambda: server.in_flight == 0)
    again = server.submit(PROMPTS[1], greedy(5, stop_on_eos=False)).result(timeout=WAIT)
    assert server.child_pid != first
    assert again.token_ids == solo(tiny, PROMPTS[1], greedy(5, stop_on_eos=False))[0]


def test_a_child_that_cannot_load_says_why(tiny):
    with ProcessServer(tiny, {"model": "/no/such/model.gguf"}) as server:
        handle = server.submit(PROMPTS[0], greedy(3))
        with pytest.raises(RuntimeError, match="could not start: .*/no/such/model.gguf"):
            handle.result(timeout=WAIT)
        assert server.in_flight == 0


def test_closing_stops_the_child(tiny, tiny_load):
    server = ProcessServer(tiny, tiny_load)
    assert server.submit(PROMPTS[0], greedy(2)).result(timeout=WAIT).ok
    server.close()
    assert server._child.proc.poll() is not None
    with pytest.raises(RuntimeError, match="closed"):
        server.submit(PROMPTS[0], greedy(2))


def test_a_server_dropped_without_closing_leaves_no_child(tiny, tiny_load):
    server = ProcessServer(tiny, tiny_load)
    assert server.submit(PROMPTS[0], greedy(2)).result(timeout=WAIT).ok
    proc = server._child.proc
    del server
    gc.collect()
    proc.wait(timeout=WAIT)


def test_call_runs_a_named_method_on_the_childs_engine_and_raises_what_it_raised(tiny, server):
    ids = [5, 9, 3, 7]
    here = EngineClient(tiny)
    assert np.array_equal(server.call("last_logits", ids), here.last_logits(ids))  # the same model, exactly
    with pytest.raises(PromptError, match="context holds"):  # the child's exception, of its own type
        server.call("attention", ids * tiny.config.max_seq_len)
    with pytest.raises(ValueError, match="not a call the engine's child runs"):  # named methods only
        server.call("stepper", ids, SamplingParams(), 4)
    with pytest.raises(TypeError, match="not a plain value"):  # a function never travels: refused here
        server.call("last_logits", lambda: ids)
    arrays = server.call("attention", ids)  # still serving
    assert np.array_equal(arrays.probs, here.attention(ids).probs)
    spec = Interventions(heads=(HeadEdit(1, 2),))  # a spec and arrays travel as plain values
    assert np.array_equal(server.call("next_token_probs", ids, spec), here.next_token_probs(ids, spec))
    traced = server.call("trace", ids, keep_from=1)
    assert np.array_equal(traced.lens.top_ids, here.trace(ids, 1).lens.top_ids)


def test_only_plain_values_cross_and_the_child_builds_no_function():
    check_plain(({"model": "x.gguf", "quant": None}, [1, 2], np.zeros(3), SamplingParams(), ServeConfig()))
    for bad in (print, lambda: 0, np.array([object()]), threading.Lock(), io.BytesIO()):
        with pytest.raises(TypeError, match="not a plain value|does not travel"):
            check_plain(("call", bad))
    plain = pickle.dumps(("call", 1, "last_logits", ([1, 2], np.arange(3.0), SamplingParams(seed=3)), {}))
    assert _PlainUnpickler(io.BytesIO(plain)).load()[3][2] == SamplingParams(seed=3)
    for hostile in (os.system, print, pickle.loads, load_engine):  # a function's global, of any module
        with pytest.raises(pickle.UnpicklingError, match="not a plain value"):
            _PlainUnpickler(io.BytesIO(pickle.dumps(("call", 1, "last_logits", (hostile,), {})))).load()
