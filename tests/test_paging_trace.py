"""The paged replay (``inference/serving/paging_trace.py``) on a tiny random Llama: the events it records are what the
real ``PagedBatcher`` did, and every snapshot is consistent with the tables it shows.

A prefix hit shares the first request's blocks (reference counts up, no copy); forked samples share every block and
copy the partly filled last one on their first write (and copy nothing when the prompt fills whole blocks); a pool
too small for two requests preempts the newest, which resumes and answers exactly as it does uncontested. Each
snapshot: every block's reference count is the number of tables holding it, bytes follow from the blocks in use.
"""

from __future__ import annotations

import numpy as np
import pytest

from inference.api import EVENT_KINDS, PagedKV, SamplingParams
from inference.serving.paging_trace import run_paged_traced
from inference.serving.slot_cache import SlotKVCache
from tests.test_batching import greedy, solo, tiny_engine

VOCAB_IDS = 97  # the tiny engine's id tokenizer
PROMPT = [(i * 29 + 5) % VOCAB_IDS for i in range(22)]  # 22 tokens: 5 full blocks of 4 and 2 positions


@pytest.fixture(scope="module")
def tiny():
    return tiny_engine("llama")


def events(trace, kind: str) -> list[tuple[int, object]]:
    """(step, event) of every event of ``kind``."""
    return [(step.index, e) for step in trace.steps for e in step.events if e.kind == kind]


def assert_consistent(tiny, trace) -> None:
    """Every snapshot agrees with its own tables, and its bytes with its blocks."""
    slot = SlotKVCache(tiny.config, 1, trace.slot_capacity, "meta", tiny.dtype).nbytes
    for step in trace.steps:
        assert all(e.kind in EVENT_KINDS for e in step.events)
        holders = np.zeros(trace.num_blocks, dtype=np.int64)
        for sequence, table in enumerate(step.tables):
            assert len(table) == -(-int(step.held[sequence]) // trace.block_size)
            for block in table:
                holders[block] += 1
                assert step.owners[block] <= sequence
        np.testing.assert_array_equal(step.ref_counts, holders)
        assert ((step.owners >= 0) == (step.ref_counts > 0)).all()
        assert (step.filled <= trace.block_size).all() and (step.filled[step.ref_counts == 0] == 0).all()
        in_use = int((step.ref_counts > 0).sum())
        assert step.paged_bytes == in_use * trace.block_size * trace.position_bytes
        assert step.slot_bytes == step.resident * slot
        assert step.distinct_bytes <= step.used_bytes and step.distinct_bytes <= step.paged_bytes


def test_a_prefix_hit_shares_the_first_requests_blocks(tiny):
    """Three requests on one 20-token start, each with its own last two tokens: the first computes it, the
    others share its 5 full blocks a step later."""
    prompts = [PROMPT, PROMPT[:20] + [3, 4], PROMPT[:20] + [5, 6]]
    run = run_paged_traced(tiny, prompts, [greedy(5, stop_on_eos=False)] * 3, PagedKV(block_size=4))
    trace = run.paging
    assert_consistent(tiny, trace)
    first = trace.steps[0]
    assert first.phase == "prefill" and first.rows == (0,) and first.fed == (22,)
    assert [(e.sequence, e.blocks) for _, e in events(trace, "allocate")][0] == (0, tuple(first.tables[0]))
    hits = events(trace, "prefix_hit")
    shared = tuple(first.tables[0][:5])
    assert [(step, e.sequence, e.blocks) for step, e in hits] == [(1, 1, shared), (1, 2, shared)]
    second = trace.steps[1]
    assert second.fed == (2, 2)  # only the positions past the shared blocks are computed
    assert (second.ref_counts[list(shared)] == 3).all()
    assert trace.prefix_hits == 10 and trace.forked == 0 and trace.copies == 0 and trace.preemptions == 0
    assert second.used_bytes - second.distinct_bytes == 2 * 20 * trace.position_bytes  # two copies not stored
    assert {e.sequence for _, e in events(trace, "finish")} == {0, 1, 2}
    assert trace.steps[-1].paged_bytes == 0  # every block given back
    assert [result.token_ids for result in run.results] == [
        solo(tiny, p, greedy(5, stop_on_eos=False))[0] for p in prompts
    ]


def test_requests_on_one_prompt_in_one_step_are_forked_from_the_first(tiny):
    """Three requests on one prompt at once: the first's prefill computes it, the others are forked from it in the
    same step (every block shared) and copy the partly filled last block on their first write."""
    run = run_paged_traced(tiny, [PROMPT] * 3, [greedy(5, stop_on_eos=False)] * 3, PagedKV(block_size=4))
    trace = run.paging
    assert_consistent(tiny, trace)
    first = trace.steps[0]
    assert first.phase == "prefill" and first.rows == (0,) and first.fed == (22,)
    blocks = tuple(first.tables[0])
    assert [(step, e.sequence, e.blocks) for step, e in events(trace, "fork")] == [(0, 1, blocks), (0, 2, blocks)]
    assert (first.ref_counts[list(blocks)] == 3).all()
    assert trace.prefix_hits == 0 and trace.forked == 2 * 6 and trace.copies == 2 and trace.preemptions == 0
    alone, _ = solo(tiny, PROMPT, greedy(5, stop_on_eos=False))
    assert all(result.token_ids == alone for result in run.results)


def test_forked_samples_copy_the_shared_partial_block_on_their_first_write(tiny):
    params = SamplingParams(temperature=0.9, seed=3, max_new_tokens=6, stop_on_eos=False)
    run = run_paged_traced(tiny, [PROMPT], [params], PagedKV(block_size=4, samples=3))
    trace = run.paging
    assert_consistent(tiny, trace)
    forks = events(trace, "fork")
    prompt_blocks = tuple(trace.steps[0].tables[0])
    assert [(step, e.sequence, e.blocks) for step, e in forks] == [(0, 1, prompt_blocks), (0, 2, prompt_blocks)]
    assert trace.forked == 2 * len(prompt_blocks) and trace.prefix_hits == 0  # shared by the fork, not the cache
    assert (trace.steps[0].ref_counts[list(prompt_blocks)] == 3).all()
    copies = events(trace, "copy_on_write")
    last = prompt_blocks[-1]  # holds positions 20-21: partly filled, shared by all three
    assert [step for step, _ in copies] == [1, 1]  # the first decode: two writers copy, the last writes in place
    assert all(e.blocks[0] == last and e.blocks[1] not in prompt_blocks for _, e in copies)
    after = trace.steps[1]
    assert len({int(table[5]) for table in after.tables}) == 3  # three last blocks now, one each
    assert (after.ref_counts[list(prompt_blocks[:5])] == 3).all()  # the full blocks stay shared
    assert trace.copies == 2
    for answer, result in enumerate(run.results):  # answer j draws from seed + j, as when run alone
        alone, _ = solo(tiny, PROMPT, SamplingParams(**{**vars(params), "seed": 3 + answer}))
        assert result.token_ids == alone


def test_samples_copy_nothing_when_the_prompt_fills_whole_blocks(tiny):
    params = SamplingParams(temperature=0.9, seed=3, max_new_tokens=6, stop_on_eos=False)
    trace = run_paged_traced(tiny, [PROMPT[:20]], [params], PagedKV(block_size=4, samples=3)).paging
    assert_consistent(tiny, trace)
    assert trace.copies == 0 and not events(trace, "copy_on_write")


def test_a_preempted_request_resumes_and_answers_as_it_does_uncontested(tiny):
    """A pool for both prompts but not both answers: the newest is preempted, comes back, and recomputes."""
    prompts = [PROMPT[:6], [(i * 31 + 7) % VOCAB_IDS for i in range(30)]]
    params = [greedy(24, stop_on_eos=False), SamplingParams(temperature=0.8, seed=5, max_new_tokens=10)]
    run = run_paged_traced(tiny, prompts, params, PagedKV(block_size=4, num_blocks=10))
    trace = run.paging
    assert_consistent(tiny, trace)
    preempted, resumed = events(trace, "preempt"), events(trace, "resume")
    assert [e.sequence for _, e in preempted] == [1] and [e.sequence for _, e in resumed] == [1]
    assert preempted[0][0] < resumed[0][0]
    gone = trace.steps[preempted[0][0]]
    assert len(gone.tables[1]) == 0 and gone.held[1] == 0  # every block given back
    back = trace.steps[resumed[0][0]]
    assert back.phase == "prefill" and back.rows == (1,)
    # it feeds its prompt and every token it had drawn (the last not yet written), less what it found still cached
    held_before = int(trace.steps[preempted[0][0] - 1].held[1])
    assert back.fed[0] == held_before + 1 - 4 * len(resumed[0][1].blocks)
    assert trace.preemptions == 1
    for prompt, p, result in zip(prompts, params, run.results):
        uncontested = run_paged_traced(tiny, [prompt], [p], PagedKV(block_size=4)).results[0]
        assert result.token_ids == uncontested.token_ids == solo(tiny, prompt, p)[0]


def test_a_bad_request_for_paged_blocks_is_refused_clearly(tiny):
    for bad in ({"block_size": 0}, {"samples": 0}, {"num_blocks": 0}, {"block_size": 2.5}):
        with pytest.raises(ValueError, match="PagedKV"):
            PagedKV(**bad)
    run = run_paged_traced(tiny, [PROMPT], [greedy(40, stop_on_eos=False)], PagedKV(block_size=4, num_blocks=3))
    assert not run.results[0].ok and "blocks" in str(run.results[0].error) and run.paging.steps == ()
