"""Shared prefixes: a prompt reuses the K/V of a start another request already computed.

The scheduler's bookkeeping is checked on its own (which slot, how many positions, copies and twins);
the batcher's tokens and logits are checked against solo runs, as every batched run is
(``tests/test_batching.py``: within the derived float32 bound, tokens equal unless a near-tie), on tiny
random Llama, GPT-2 and Gemma 3 (an 8-key sliding window, shorter than the shared prefixes here).
"""

from __future__ import annotations

import pytest

from inference import ContinuousBatcher, EngineServer, SamplingParams, ServeConfig
from inference.model.interventions import Interventions
from inference.serving.scheduler import Scheduler, Sequence
from tests.test_batching import assert_batched_equals_solo, greedy, solo, tiny_engine

START = [(i * 29 + 3) % 97 for i in range(20)]  # 20 tokens many prompts begin with
TAILS = [[5], [60, 17], [40, 41, 42], [8]]


def sharing(n_slots: int = 4) -> Scheduler:
    return Scheduler(n_slots, slot_capacity=128, max_seq_len=256, share_prefixes=True)


def seq(prompt: list[int], max_new_tokens: int = 4, interventions=None) -> Sequence:
    s = Sequence(list(prompt), greedy(max_new_tokens, stop_on_eos=False))
    s.interventions = interventions
    return s


def run_step(scheduler: Scheduler):
    step = scheduler.schedule()
    scheduler.postprocess(step, [1] * len(step.sequences))
    return step


# -- the scheduler's bookkeeping ----------------------------------------------------------
def test_a_prompt_reuses_the_start_a_running_request_holds():
    scheduler = sharing()
    first = seq(START + TAILS[0])
    scheduler.add(first)
    run_step(scheduler)
    later = seq(START + TAILS[1])
    scheduler.add(later)
    step = scheduler.schedule()
    assert step.phase == "prefill" and step.sequences == [later]
    assert step.copies == [(first.slot, later.slot, len(START))] and later.slot != first.slot
    assert later.cached == len(START) and later.pending_ids == TAILS[1]
    assert step.reused == {later.request_id: len(START)}


def test_the_last_prompt_token_is_always_fed():
    scheduler = sharing()
    first = seq(START)
    scheduler.add(first)
    run_step(scheduler)
    again = seq(START)
    scheduler.add(again)
    scheduler.schedule()
    assert again.cached == len(START) - 1 and again.pending_ids == START[-1:]


def test_a_finished_requests_slot_is_reused_in_place():
    scheduler = sharing()
    first = seq(START + TAILS[0], max_new_tokens=1)
    scheduler.add(first)
    run_step(scheduler)  # its one token: finished, slot free, K/V still there
    assert first.is_finished and first.slot in scheduler.free_slots and scheduler.holder[first.slot] is first
    later = seq(START + TAILS[2])
    scheduler.add(later)
    step = scheduler.schedule()
    assert later.slot == first.slot and step.copies == [] and later.cached == len(START)


def test_the_same_prompt_in_one_step_is_computed_once():
    scheduler = sharing()
    four = [seq(START + TAILS[0]) for _ in range(4)]
    for s in four:
        scheduler.add(s)
    step = scheduler.schedule()
    assert step.sequences == four and step.copies == []
    assert step.twins == {s: four[0] for s in four[1:]}
    assert step.reused == {s.request_id: len(START) + 1 for s in four[1:]}


def test_interventions_neither_reuse_nor_lend():
    scheduler = sharing()
    edited = seq(START + TAILS[0], interventions=Interventions())
    scheduler.add(edited)
    run_step(scheduler)
    plain = seq(START + TAILS[1])
    scheduler.add(plain)
    assert scheduler.schedule().copies == [] and plain.cached == 0
    run_step(scheduler)
    edited_too = seq(START + TAILS[2], interventions=Interventions())
    scheduler.add(edited_too)
    assert scheduler.schedule().copies == [] and edited_too.cached == 0


def test_sharing_off_computes_every_prompt_whole():
    scheduler = Scheduler(4, 128, 256)
    for prompt in (START + TAILS[0], START + TAILS[0], START + TAILS[1]):
        scheduler.add(seq(prompt))
    step = scheduler.schedule()
    assert step.copies == [] and step.twins == {} and all(s.cached == 0 for s in step.sequences)


def test_the_prefill_budget_counts_only_the_positions_computed():
    scheduler = Scheduler(4, 128, 256, max_prefill_tokens=len(START) + 4, share_prefixes=True)
    scheduler.add(seq(START + TAILS[0]))
    run_step(scheduler)
    for tail in TAILS[1:]:
        scheduler.add(seq(START + tail))
    step = scheduler.schedule()
    assert len(step.sequences) == 3  # 2 + 3 + 1 new positions fit a budget one full prompt would fill


# -- the tokens and logits -----------------------------------------------------------------
@pytest.fixture(scope="module", params=["llama", "gpt2", "gemma3"])
def tiny(request):
    return tiny_engine(request.param)


def test_shared_starts_give_each_request_its_solo_tokens_and_logits(tiny):
    """A running holder, a finished holder, twins, and a prompt that is another's start plus nothing."""
    batcher = ContinuousBatcher(tiny, ServeConfig(n_slots=4, slot_capacity=128), keep_logits=True)
    prompts, requests = [], []

    def add(prompt, n):
        prompts.append(prompt)
        requests.append(batcher.add(prompt, greedy(n, stop_on_eos=False)))

    add(START + TAILS[0], 3)  # finishes early: its slot is a free holder later
    add(START + TAILS[1], 12)
    batcher.step()
    add(START + TAILS[2], 6)  # reuses a running request's start
    add(START + TAILS[2], 6)  # ... and its twin
    batcher.step()
    for _ in range(4):
        batcher.step()
    add(START + TAILS[3], 5)  # a finished request's slot, in place
    add(START[:12], 4)  # a shorter start
    reused = []
    while batcher.has_work:
        reused.append(sum(batcher.step().reused_positions.values()))
    assert sum(reused) > 0
    for prompt, request in zip(prompts, requests):
        tokens, logits = solo(tiny, prompt, request.params)
        assert_batched_equals_solo(tiny, request.output_ids, batcher.result(request, 0).logits, tokens, logits)


def test_twins_with_their_own_seeds_draw_their_own_tokens(tiny):
    params = [SamplingParams(temperature=1.0, seed=seed, max_new_tokens=8, stop_on_eos=False) for seed in (1, 2, 3)]
    batcher = ContinuousBatcher(tiny, ServeConfig(n_slots=4, slot_capacity=128))
    requests = [batcher.add(START + TAILS[1], p) for p in params]
    first = batcher.step()
    assert first.new_tokens[requests[1].request_id] == 0 and first.reused_positions  # computed once
    assert first.batch_positions == len(START) + 2  # one row of the forward, not three
    while batcher.has_work:
        batcher.step()
    for request, p in zip(requests, params):
        assert request.output_ids == solo(tiny, START + TAILS[1], p)[0]


def test_the_server_shares_a_class_prompt_across_callers(tiny):
    """Eight callers on one start, as a class typing the teacher's sentence with a word of their own."""
    with EngineServer(tiny, ServeConfig(n_slots=4, max_waiting=8, slot_capacity=128)) as server:
        prompts = [START + [tail % 97] for tail in range(8)]
        handles = [server.submit(p, greedy(4, stop_on_eos=False)) for p in prompts]
        results = [h.result(timeout=60) for h in handles]
        steps = server.recent_steps
    assert sum(sum(s.reused_positions.values()) for s in steps) >= len(START) * 4  # at least half reused
    for prompt, result in zip(prompts, results):
        tokens, logits = solo(tiny, prompt, greedy(4, stop_on_eos=False))
        # the server keeps no logits: its tokens must equal the solo ones up to a near-tie of the solo logits
        assert_batched_equals_solo(tiny, result.token_ids, logits, tokens, logits)
