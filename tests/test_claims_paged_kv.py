"""The Paged KV cache page's scenarios on both real models: each does what its story says, and every sentence the
page prints carries the replay's own numbers.

The class asking at once is forked from the first student's prefill; the shared system prompt shares exactly the
full blocks its questions have in common; n samples copy the partly filled last block once per sample but the last
(none when the prompt fills whole blocks); the long request is preempted, resumes, and answers as it does alone; the
paged cache never holds more than the slot cache reserves for the same sequences.
"""

from __future__ import annotations

import pytest

from inference.api import EngineClient
from ui.paged_kv import claims, compute

pytestmark = pytest.mark.real_model
SEED = 0


@pytest.fixture(scope="module", params=["engine", "gemma_engine"])
def client(request):
    return EngineClient(request.getfixturevalue(request.param))


def common_length(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def counts(trace, kind: str) -> int:
    return sum(e.kind == kind for step in trace.steps for e in step.events)


def assert_sentences_carry_the_numbers(replay) -> None:
    trace, labels = replay.trace, replay.labels
    run = claims.run_sentence(trace)
    assert f"shared {trace.prefix_hits} block" in run and f"copied {trace.copies}" in run
    forked = sum(len(e.blocks) for step in trace.steps for e in step.events if e.kind == "fork")
    assert trace.forked == forked and (f"forking shared {forked} block" in run) == (forked > 0)
    assert f"{trace.preemptions} preemption" in run and f"{trace.num_blocks} blocks of {trace.block_size}" in run
    for step in trace.steps:
        # blocks never hold more than slots reserve for the same sequences, but for each one's last block rounding
        # up past its slot's end (a block of 16 for a 45-position request holds 48)
        rounding = step.resident * (trace.block_size - 1) * trace.position_bytes
        assert step.paged_bytes <= step.slot_bytes + rounding
        text = claims.memory_sentence(step, trace)
        if step.resident:
            assert claims.size(step.paged_bytes) in text and claims.size(step.slot_bytes) in text
            assert claims.size(step.slot_bytes - step.used_bytes) in text
            assert claims.size(step.paged_bytes - step.distinct_bytes) in text
            if step.used_bytes > step.distinct_bytes:
                assert f"store {claims.size(step.used_bytes - step.distinct_bytes)} of that only once" in text
        in_use = int((step.ref_counts > 0).sum())
        assert f"{in_use} of {trace.num_blocks} blocks are in use" in claims.step_sentence(step, trace, labels)
        for event in step.events:
            sentence = claims.event_sentence(event, labels, trace.block_size)
            assert sentence.lower().startswith(labels[event.sequence].lower())
    peak_paged, peak_slot = max(s.paged_bytes for s in trace.steps), max(s.slot_bytes for s in trace.steps)
    assert f"peaked at {claims.size(peak_paged)}" in claims.peak_sentence(trace)
    assert f"({peak_slot / peak_paged:.1f}× the paged peak)" in claims.peak_sentence(trace)


@pytest.mark.parametrize("block_size", [8, 16])
def test_the_class_asking_at_once_is_forked_from_the_first_students_prefill(client, block_size):
    replay = compute.replay_on(client, "class", block_size, SEED)
    trace = replay.trace
    n = len(compute.SCENARIOS["class"].prompts)
    length = trace.prompt_lengths[0]
    assert trace.steps[0].rows == (0,) and trace.steps[0].fed == (length,)  # the prompt computed once
    assert counts(trace, "fork") == n - 1 and trace.forked == (n - 1) * -(-length // block_size)
    assert trace.prefix_hits == 0 and trace.preemptions == 0
    assert trace.copies == (n - 1 if length % block_size else 0)  # the partly filled last block, once each
    assert_sentences_carry_the_numbers(replay)


@pytest.mark.parametrize(("key", "block_size"), [("system", 8), ("system", 16)])
def test_the_system_prompt_shares_exactly_its_common_full_blocks(client, key, block_size):
    replay = compute.replay_on(client, key, block_size, SEED)
    trace = replay.trace
    ids = [client.encode_prompt(p) for p in compute.SCENARIOS[key].prompts]
    expected = sum(
        min(common_length(ids[0], other), len(other) - 1) // block_size for other in ids[1:]
    )  # each later prompt shares the first's full blocks up to where they part (its last token is always fed)
    assert expected > 0 and trace.prefix_hits == expected, key
    assert counts(trace, "prefix_hit") == len(ids) - 1 and trace.copies == 0 and trace.preemptions == 0
    assert_sentences_carry_the_numbers(replay)


def test_samples_copy_the_shared_partial_block_once_per_sample_but_the_last(client):
    block_size = compute.DEFAULT_BLOCK_SIZE
    replay = compute.replay_on(client, "samples", block_size, SEED)
    trace = replay.trace
    n = compute.SCENARIOS["samples"].samples
    assert counts(trace, "fork") == n - 1
    partial = trace.prompt_lengths[0] % block_size != 0
    assert trace.copies == (n - 1 if partial else 0)
    sentence = claims.cow_sentence(trace, n)
    assert sentence.startswith("The prompt's" if partial else "No copy-on-write")
    assert f"{trace.prompt_lengths[0]} positions" in sentence
    assert_sentences_carry_the_numbers(replay)


def test_the_long_request_is_preempted_resumes_and_answers_as_it_does_alone(client):
    replay = compute.replay_on(client, "preempt", compute.DEFAULT_BLOCK_SIZE, SEED)
    trace = replay.trace
    assert trace.preemptions >= 1 and counts(trace, "resume") == counts(trace, "preempt")
    assert replay.alone and all(equal for _, equal in replay.alone)
    assert "token for token the one it gives when run alone" in claims.preemption_sentence(
        trace, replay.labels, replay.alone
    )
    assert_sentences_carry_the_numbers(replay)


def test_one_prompt_takes_a_block_at_a_time(client):
    replay = compute.replay_on(client, "one", compute.DEFAULT_BLOCK_SIZE, SEED)
    trace = replay.trace
    assert {e.kind for s in trace.steps for e in s.events} == {"allocate", "finish"}
    for step in trace.steps[:-1]:  # while running: one table, exactly as long as its positions need
        assert len(step.tables[0]) == -(-int(step.held[0]) // trace.block_size)
    assert claims.preemption_sentence(trace, replay.labels, replay.alone).startswith("No sequence was preempted")
    assert_sentences_carry_the_numbers(replay)
