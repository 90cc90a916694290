"""Paged KV blocks == the contiguous cache: tokens and logits on tiny Llama and Gemma 3 models (and the real ones).

The reference is one request alone through ``Engine.generate``'s contiguous ``KVCache`` (``solo`` in
``test_batching.py``). Paged runs gather their blocks into other matrix shapes (padded key columns,
several rows), so float32 sums are taken in other orders: logits must agree within the derived bound
(``tests.tolerances``), tokens wherever the reference's choice was not a near-tie.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inference import SamplingParams
from inference.serving.block_manager import OutOfBlocksError
from inference.serving.paged import PagedBatcher, run_paged
from inference.serving.paged_cache import PagedKVCache, PagedWrite
from tests.test_batching import PROMPTS, VOCAB, assert_batched_equals_solo, greedy, solo, tiny_engine

LONG = [(i * 29 + 5) % VOCAB for i in range(70)]


@pytest.fixture(scope="module", params=["llama", "gemma3"])
def tiny(request):
    return tiny_engine(request.param)


def paged_run(engine, prompts, params, num_blocks=None, block_size=4):
    batcher = PagedBatcher(engine, num_blocks or 200, block_size, keep_logits=True)
    sequences = [batcher.add(prompt, p) for prompt, p in zip(prompts, params)]
    while batcher.has_work:
        batcher.step()
    return batcher, sequences


def assert_equals_solo(engine, batcher, sequences):
    for seq in sequences:
        tokens, logits = solo(engine, seq.prompt_ids, seq.params)
        assert_batched_equals_solo(engine, seq.output_ids, batcher.logits[seq], tokens, logits)


@pytest.mark.parametrize("block_size", [1, 4, 16])
def test_greedy_paged_equals_contiguous(tiny, block_size):
    """Prompts of 1-90 tokens (Gemma's 8-key window crossed in prefill and decode), several block sizes."""
    params = [greedy(n, stop_on_eos=False) for n in (6, 9, 3, 12)]
    batcher, sequences = paged_run(tiny, PROMPTS, params, block_size=block_size)
    assert_equals_solo(tiny, batcher, sequences)
    assert all(seq.finish_reason == "length" for seq in sequences)
    assert batcher.cache.groups[0].manager.num_free == batcher.cache.num_blocks  # everything given back


def test_a_shared_start_is_computed_once_and_read_by_both(tiny):
    shared = LONG[:40]
    prompts = [shared + [1, 2, 3], shared + [9, 8], shared + [1, 2, 3]]
    batcher = PagedBatcher(tiny, 100, 4, keep_logits=True)
    first = batcher.add(prompts[0], greedy(5, stop_on_eos=False))
    batcher.step()  # the first prompt's prefill fills and keys its blocks
    later = [batcher.add(p, greedy(7, stop_on_eos=False)) for p in prompts[1:]]
    manager = batcher.cache.groups[0].manager
    used = manager.num_used
    record = batcher.step()
    assert record.phase == "prefill" and record.request_ids == [seq.request_id for seq in later]
    assert record.reused_positions == {later[0].request_id: 40, later[1].request_id: 40}
    assert manager.hits == 10 + 10  # the 40-token start (10 blocks) shared by both newcomers
    assert manager.num_used == used + 2  # each wrote only its own last block (3 and 2 tokens)
    while batcher.has_work:
        batcher.step()
    assert_equals_solo(tiny, batcher, [first, *later])


def test_a_class_on_one_prompt_computes_it_once(tiny):
    """Six requests on one 38-token prompt arrive together: the first's prefill computes it and the other five
    are forked from it in the same step, sampled from its row, each copying only the shared last block on write."""
    batcher = PagedBatcher(tiny, 100, 4, keep_logits=True)
    class_ = [batcher.add(LONG[:38], SamplingParams(seed=s, max_new_tokens=6, stop_on_eos=False)) for s in range(6)]
    record = batcher.step()
    assert record.phase == "prefill" and sorted(record.request_ids) == [seq.request_id for seq in class_]
    assert record.new_tokens == {class_[0].request_id: 38, **{seq.request_id: 0 for seq in class_[1:]}}
    assert {seq.max_batch_size for seq in class_} == {6}  # the six requests rode one forward
    manager = batcher.cache.groups[0].manager
    assert manager.num_used == 10  # one copy of the prompt for the six
    while batcher.has_work:
        batcher.step()
    assert manager.copies == 5  # the partly filled last block, once for each forked request
    assert len({tuple(seq.output_ids) for seq in class_}) > 1  # each its own seed
    assert_equals_solo(tiny, batcher, class_)


def test_a_class_on_one_start_computes_it_once(tiny):
    """Six requests whose 38-token prompts share a 36-token start arrive together: the first computes it, the
    rest wait one step and share its nine full blocks, each writing only its own last block."""
    batcher = PagedBatcher(tiny, 100, 4, keep_logits=True)
    params = SamplingParams(seed=1, max_new_tokens=6, stop_on_eos=False)
    class_ = [batcher.add(LONG[:36] + [s, s + 1], params) for s in range(6)]
    assert batcher.step().request_ids == [class_[0].request_id]
    assert batcher.step().request_ids == [seq.request_id for seq in class_[1:]]
    manager = batcher.cache.groups[0].manager
    assert manager.hits == 5 * 9 and manager.num_used == 10 + 5
    while batcher.has_work:
        batcher.step()
    assert_equals_solo(tiny, batcher, class_)


def test_an_identical_prompt_is_computed_whole_with_prefix_sharing_off_and_an_answer_not_forked_can_be_cancelled(
    tiny,
):
    batcher = PagedBatcher(tiny, 100, 4, keep_logits=True, share_prefixes=False)
    params = SamplingParams(seed=2, max_new_tokens=4, stop_on_eos=False)
    both = [batcher.add(LONG[:10], params) for _ in range(2)]
    assert batcher.step().new_tokens == {seq.request_id: 10 for seq in both}
    batcher = PagedBatcher(tiny, 100, 4, keep_logits=True)
    stays, leaves = batcher.add_parallel(LONG[:10], [params, SamplingParams(seed=3, max_new_tokens=4)])
    assert batcher.cancel(leaves.request_id) is leaves and batcher.cancel(leaves.request_id) is None  # not forked yet
    while batcher.has_work:
        batcher.step()
    assert (stays.finish_reason, leaves.finish_reason, leaves.output_ids) == ("length", "cancelled", [])
    assert batcher.cache.groups[0].manager.num_free == batcher.cache.num_blocks


def test_seeded_sampling_is_the_same_paged_or_not(tiny):
    mine = SamplingParams(temperature=1.0, top_k=40, seed=1234, max_new_tokens=10, stop_on_eos=False)
    alone, _ = solo(tiny, PROMPTS[1], mine)
    mates = [SamplingParams(temperature=1.3, seed=1, max_new_tokens=4), greedy(12)]
    sequences = run_paged(tiny, [PROMPTS[3], PROMPTS[1], PROMPTS[0]], [mates[0], mine, mates[1]], block_size=4)
    assert sequences[1].output_ids == alone


def test_parallel_samples_share_the_prompt_and_equal_each_request_alone(tiny):
    params = [SamplingParams(temperature=1.0, seed=seed, max_new_tokens=9, stop_on_eos=False) for seed in (3, 4, 5)]
    batcher = PagedBatcher(tiny, 100, 4, keep_logits=True)
    answers = batcher.add_parallel(PROMPTS[2], params)  # 37 tokens: the last block is partly filled
    batcher.step()
    manager = batcher.cache.groups[0].manager
    assert manager.num_used == 10  # one copy of the prompt for all three answers
    while batcher.has_work:
        batcher.step()
    assert manager.copies >= 2  # the shared last block was copied on write
    assert len({tuple(seq.output_ids) for seq in answers}) > 1
    assert_equals_solo(tiny, batcher, answers)


def test_a_preempted_request_equals_itself_uncontested(tiny):
    """A pool too small for all three: the newest gives its blocks back, waits, and is recomputed."""
    params = [greedy(20, stop_on_eos=False), greedy(20, stop_on_eos=False), SamplingParams(seed=7, max_new_tokens=20)]
    prompts = [LONG[:30], PROMPTS[3][:33], PROMPTS[2][:26]]
    batcher, sequences = paged_run(tiny, prompts, params, num_blocks=30, block_size=4)
    assert batcher.preemptions > 0
    assert_equals_solo(tiny, batcher, sequences)


def test_sliding_window_layers_give_back_blocks_that_slid_out():
    engine = tiny_engine("gemma3")  # an 8-key window on layer 0, layer 1 global
    cache = PagedKVCache(engine.config, 40, block_size=4)
    cache.add(0, LONG)
    positions = cache.begin_step([PagedWrite(0, LONG)])
    engine.prefill_batch(torch.tensor([LONG]), cache, positions)
    global_group, local_group = cache.groups
    assert global_group.window is None and local_group.window == 8
    assert global_group.manager.num_used == 70 // 4 + 1
    assert local_group.manager.num_used == 3  # positions 63-69 are what the next query sees: blocks 15-17
    assert cache.used_bytes < (global_group.manager.num_used * 2) * cache._block_bytes(global_group)


def test_a_step_the_pool_cannot_hold_is_refused_before_anything_is_reserved():
    engine = tiny_engine("llama")
    cache = PagedKVCache(engine.config, 2, block_size=4)
    cache.add(0, LONG[:12])
    with pytest.raises(OutOfBlocksError, match="too few free blocks"):
        cache.begin_step([PagedWrite(0, LONG[:12])])
    assert cache.groups[0].manager.num_free == 2


def test_a_request_larger_than_the_pool_is_refused_with_a_clear_message():
    batcher = PagedBatcher(tiny_engine("llama"), 4, 4)
    with pytest.raises(ValueError, match=r"needs 8 blocks of 4 \(the pool has 4\)"):
        batcher.add(LONG[:20], greedy(12))


@pytest.mark.real_model
def test_real_model_greedy_paged_equals_contiguous(engine):
    prompts = [engine.encode_prompt(text) for text in ("The capital of France is", "Once upon a time, a small robot")]
    params = [greedy(8, stop_on_eos=False), greedy(10, stop_on_eos=False)]
    batcher, sequences = paged_run(engine, prompts, params, block_size=16)
    assert_equals_solo(engine, batcher, sequences)


@pytest.mark.real_model
def test_real_gemma_greedy_paged_equals_contiguous_past_its_window(gemma_engine):
    """A 530-token prompt: Gemma's local layers (512 keys) have given blocks back by the time it decodes."""
    prompt = gemma_engine.encode_prompt("The history of the printing press. " * 100)[:530]
    assert len(prompt) == 530
    batcher = PagedBatcher(gemma_engine, 40, 16, keep_logits=True)
    seq = batcher.add(prompt, greedy(4, stop_on_eos=False))
    batcher.step()
    global_group, local_group = batcher.cache.groups
    assert (global_group.manager.num_used, local_group.manager.num_used) == (34, 33)  # block 0 slid out
    while batcher.has_work:
        batcher.step()
    assert_equals_solo(gemma_engine, batcher, [seq])


def test_the_command_line_reads_kv_and_n_and_refuses_bad_values(capsys):
    from inference.__main__ import main
    from inference.serving.paged import parallel_params, parse_kv

    assert (parse_kv("contiguous"), parse_kv("paged"), parse_kv("paged:4")) == (None, 16, 4)
    assert [p.seed for p in parallel_params(SamplingParams(seed=10), 3)] == [10, 11, 12]
    assert main(["hi", "--kv", "paged:0"]) == 2
    assert "paged:BLOCK (a block size >= 1), got 'paged:0'" in capsys.readouterr().err
    assert main(["hi", "--n", "0"]) == 2
    assert "--n must be at least 1" in capsys.readouterr().err
    assert main(["hi", "--kv", "paged", "--no-cache"]) == 2
    assert "leave out --no-cache" in capsys.readouterr().err


def test_a_cancelled_request_gives_its_blocks_back_and_its_mates_go_on(tiny):
    batcher = PagedBatcher(tiny, 100, 4, keep_logits=True)
    stays = batcher.add(PROMPTS[2], greedy(6, stop_on_eos=False))
    leaves = batcher.add(PROMPTS[3], greedy(6, stop_on_eos=False))
    queued = batcher.add(PROMPTS[1], greedy(6, stop_on_eos=False))
    batcher.waiting.remove(queued)  # held back, so it is still waiting when cancelled
    batcher.step()
    batcher.waiting.append(queued)
    assert batcher.cancel(leaves.request_id) is leaves and batcher.cancel(queued.request_id) is queued
    assert batcher.cancel(leaves.request_id) is None
    assert batcher.cache.groups[0].manager.num_used == -(-(len(PROMPTS[2]) + 1) // 4)  # the one left running
    while batcher.has_work:
        batcher.step()
    assert (leaves.finish_reason, queued.finish_reason, stays.finish_reason) == ("cancelled", "cancelled", "length")
    assert batcher.result(stays, 0).token_ids == solo(tiny, PROMPTS[2], stays.params)[0]
    with pytest.raises(ValueError, match="interventions run on the slot cache"):
        batcher.add(PROMPTS[0], interventions=object())


def _decode_rows(records) -> int:
    """The rows the decode forwards fed (an answer riding another's row feeds nothing)."""
    return sum(sum(1 for fed in step.new_tokens.values() if fed) for step in records if step.phase == "decode")


def _agreeing_run(engine, prompts, params, share):
    """Each prompt asked for once per settings in ``params`` (the Sampling page's way: separate requests, one
    seed), all at once; the batcher, the sequences and each step's record."""
    batcher = PagedBatcher(engine, 200, 4, keep_logits=True, share_agreeing=share)
    sequences = [batcher.add(prompt, p) for prompt in prompts for p in params]
    records = []
    while batcher.has_work:
        records.append(batcher.step())
    return batcher, sequences, records


def _distinct_prefixes(outputs: list[list[int]]) -> int:
    """The decode rows answers need when the ones that agree so far share one: each distinct output prefix
    (token 1 onwards) is fed once."""
    return len({tuple(out[:k]) for out in outputs for k in range(1, len(out))})


def test_answers_that_agree_share_a_row_until_they_part_and_each_equals_itself_alone(tiny):
    """One seed, five temperatures, on two prompts: the low ones agree for a while, the high ones part; each
    answer's tokens and logits are its own alone, and the decodes fed one row per distinct prefix."""
    temperatures, lengths = (0.0, 0.001, 0.3, 1.0, 3.0), (8, 8, 6, 8, 3)
    params = [
        SamplingParams(temperature=t, seed=11, max_new_tokens=n, stop_on_eos=False)
        for t, n in zip(temperatures, lengths)
    ]
    prompts = [PROMPTS[2], LONG[:13]]
    batcher, sequences, records = _agreeing_run(tiny, prompts, params, share=True)
    assert_equals_solo(tiny, batcher, sequences)
    _, alone, alone_records = _agreeing_run(tiny, prompts, params, share=False)
    assert [seq.output_ids for seq in sequences] == [seq.output_ids for seq in alone]
    expected = sum(
        _distinct_prefixes([seq.output_ids for seq in sequences[i * len(params) : (i + 1) * len(params)]])
        for i in range(len(prompts))
    )
    assert _decode_rows(records) == expected < _decode_rows(alone_records) == sum(n - 1 for n in lengths) * 2
    assert batcher.cache.groups[0].manager.num_free == batcher.cache.num_blocks
    assert all(seq.max_batch_size == len(sequences) for seq in sequences)  # every answer served in the first forward


def test_a_cancelled_row_hands_its_riders_on_and_a_cancelled_rider_leaves(tiny):
    params = [SamplingParams(temperature=t, seed=5, max_new_tokens=6, stop_on_eos=False) for t in (0.0, 0.01, 0.02)]
    batcher = PagedBatcher(tiny, 100, 4, keep_logits=True, share_agreeing=True)
    row, first, second = (batcher.add(PROMPTS[2], p) for p in params)
    batcher.step()
    batcher.step()
    assert batcher.running == [row] and batcher.forks[row] == [first, second]  # greedy-like: they agree
    assert batcher.cancel(row.request_id) is row and batcher.running == [first]
    assert batcher.cancel(second.request_id) is second and batcher.forks.get(first) == []
    while batcher.has_work:
        batcher.step()
    assert (row.finish_reason, second.finish_reason, first.finish_reason) == ("cancelled", "cancelled", "length")
    assert_equals_solo(tiny, batcher, [first])
    assert batcher.cache.groups[0].manager.num_free == batcher.cache.num_blocks


def test_a_preempted_row_takes_its_riders_back_with_it(tiny):
    """A pool too small for every row: rows with riders are preempted and recomputed, and every answer is still
    its own alone."""
    params = [SamplingParams(temperature=t, seed=3, max_new_tokens=16, stop_on_eos=False) for t in (0.0, 0.001, 2.0)]
    prompts = [LONG[:30], PROMPTS[3][:33], PROMPTS[2][:26]]
    batcher = PagedBatcher(tiny, 24, 4, keep_logits=True, share_agreeing=True)
    riders_when_preempted = []
    preempt = batcher._preempt

    def watched(seq):
        riders_when_preempted.append(len(batcher.forks.get(seq, [])))
        preempt(seq)

    batcher._preempt = watched
    sequences = [batcher.add(prompt, p) for prompt in prompts for p in params]
    while batcher.has_work:
        batcher.step()
    assert max(riders_when_preempted) >= 1  # a row carrying another answer gave its blocks back
    assert_equals_solo(tiny, batcher, sequences)
    assert batcher.cache.groups[0].manager.num_free == batcher.cache.num_blocks


@pytest.mark.real_model
def test_real_model_the_sampling_pages_four_settings_share_rows_where_they_agree(engine):
    """The Sampling page's four continuations (greedy, T, 0.3, 1.5 on one seed) through the server's batcher:
    each equals ``Engine.generate``'s tokens, and the decodes fed one row per distinct prefix."""
    from inference.serving.config import ServeConfig

    prompt = engine.encode_prompt("The cat sat on the mat because it was tired.")
    params = [SamplingParams(temperature=t, seed=0, max_new_tokens=10) for t in (0.0, 0.8, 0.3, 1.5)]
    batcher = PagedBatcher.for_server(engine, ServeConfig(), keep_logits=True)
    assert batcher.share_agreeing
    sequences = [batcher.add(prompt, p) for p in params]
    records = []
    while batcher.has_work:
        records.append(batcher.step())
    for seq, p in zip(sequences, params):
        assert seq.output_ids == [step.token_id for step in engine.generate(prompt, p)]
    assert _decode_rows(records) == _distinct_prefixes([seq.output_ids for seq in sequences])


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    answers=st.lists(
        st.tuples(st.sampled_from([0.0, 0.001, 0.01, 0.5, 2.0]), st.integers(1, 7), st.integers(0, 1)),
        min_size=2,
        max_size=6,
    ),
    seed=st.integers(0, 3),
    num_blocks=st.sampled_from([14, 200]),
    cancel_at=st.one_of(st.none(), st.tuples(st.integers(0, 6), st.integers(0, 5))),
)
def test_riding_answers_any_mix_equal_themselves_alone(tiny, answers, seed, num_blocks, cancel_at):
    """Any mix of settings on one seed, two prompts, a pool that may preempt, one request cancelled mid-way: every
    answer left equals itself alone, the seats are never over-filled, and every block comes back."""
    prompts = [PROMPTS[2][:20], LONG[:18]]
    batcher = PagedBatcher(tiny, num_blocks, 4, keep_logits=True, max_running=5, share_agreeing=True)
    sequences = [
        batcher.add(prompts[which], SamplingParams(temperature=t, seed=seed, max_new_tokens=n, stop_on_eos=False))
        for t, n, which in answers
    ]
    cancelled = None
    for step in itertools.count():
        if not batcher.has_work:
            break
        if cancel_at is not None and step == cancel_at[0]:
            cancelled = batcher.cancel(sequences[cancel_at[1] % len(sequences)].request_id)
        batcher.step()
        assert len(batcher.running) + batcher._riding() <= 5
    left = [seq for seq in sequences if seq is not cancelled]
    assert all(seq.finish_reason == "length" and len(seq.output_ids) == seq.params.max_new_tokens for seq in left)
    assert_equals_solo(tiny, batcher, left)
    assert batcher.cache.groups[0].manager.num_free == batcher.cache.num_blocks
