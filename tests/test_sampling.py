"""The sampler on hand-made distributions: stage sets, ranges, seeds, and a frequency test."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from inference import SamplingError, SamplingParams, sample
from inference.generation.sampling import argmax, generator_for, min_p_mask, top_k_mask, top_p_mask
from ui.common.stats import chi_square_gof

PROBS = torch.tensor([0.05, 0.4, 0.1, 0.3, 0.15])  # sorted: 1 (0.4), 3 (0.3), 4 (0.15), 2 (0.1), 0 (0.05)
LOGITS = PROBS.log()


def kept(mask: torch.Tensor) -> set[int]:
    return set(torch.nonzero(mask).flatten().tolist())


def test_top_k_keeps_exactly_k_highest():
    assert kept(top_k_mask(PROBS, 2)) == {1, 3}
    assert kept(top_k_mask(PROBS, 0)) == {0, 1, 2, 3, 4}
    assert kept(top_k_mask(PROBS, 99)) == {0, 1, 2, 3, 4}


@pytest.mark.parametrize(
    "p, expected",
    [
        (0.4, {1}),  # 0.4 reaches 0.4 exactly: nothing more needed
        (0.41, {1, 3}),  # the token that crosses the threshold is kept
        (0.7, {1, 3}),
        (0.71, {1, 3, 4}),
        (0.01, {1}),  # tiny p: the top token always survives
        (1.0, {0, 1, 2, 3, 4}),
    ],
)
def test_top_p_keeps_the_crossing_token(p, expected):
    assert kept(top_p_mask(PROBS, p)) == expected


def test_min_p_scales_with_the_top_probability():
    assert kept(min_p_mask(PROBS, 0.5)) == {1, 3}  # threshold 0.2
    assert kept(min_p_mask(PROBS, 0.25)) == {1, 3, 4, 2}  # threshold 0.1 (0.1 kept: >=)
    assert kept(min_p_mask(PROBS, 0.0)) == {0, 1, 2, 3, 4}


def test_repetition_penalty_divides_positive_and_multiplies_negative():
    logits = torch.tensor([2.0, -2.0, 1.0])
    result = sample(logits, SamplingParams(temperature=0, repetition_penalty=2.0), previous_ids=[0, 1], record=True)
    softmax = result.stage_probs["softmax"]
    assert torch.allclose(softmax, torch.tensor([1.0, -4.0, 1.0]).softmax(-1))


def test_seed_001_toy_ranges_and_u():
    """[0.1, 0.2, 0.7]: ranges laid end to end (most probable first), u picks the token it lands in."""
    result = sample(torch.tensor([0.1, 0.2, 0.7]).log(), SamplingParams(temperature=1.0, seed=3), record=True)
    assert result.range_token_ids.tolist() == [2, 1, 0]
    assert torch.allclose(result.range_starts, torch.tensor([0.0, 0.7, 0.9]))
    assert torch.allclose(result.range_ends, torch.tensor([0.7, 0.9, 1.0]))
    slot = [i for i in range(3) if result.range_starts[i] <= result.u < result.range_ends[i]]
    assert [int(result.range_token_ids[slot[0]])] == [result.token_id]


def test_same_seed_same_tokens_different_seed_differs():
    logits = torch.randn(1000, generator=torch.Generator().manual_seed(0))

    def draws(seed):
        params = SamplingParams(temperature=1.0, seed=seed)
        return [sample(logits, params, generator_for(params, index)).token_id for index in range(50)]

    assert draws(1) == draws(1)
    assert draws(1) != draws(2)


def test_tiny_temperature_equals_argmax():
    logits = torch.randn(500, generator=torch.Generator().manual_seed(1))
    for seed in range(20):
        assert sample(logits, SamplingParams(temperature=1e-4, seed=seed)).token_id == int(logits.argmax())
    assert sample(logits, SamplingParams(temperature=0)).token_id == int(logits.argmax())


def chi_square(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """Pearson's χ² of ``counts`` against ``probs`` (every cell here is expected far more than 5 times: no pooling)."""
    return chi_square_gof(counts.numpy(), probs.double().numpy()).statistic


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_frequencies_follow_softmax_of_logits_over_t(temperature):
    """4,000 draws vs softmax(logits / T). A wrong temperature (e.g. T applied as a power, or
    not at all) gives a chi-square in the hundreds; the 99.9% critical value for 4 dof is 18.5."""
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0])
    params = SamplingParams(temperature=temperature, seed=11)
    counts = torch.zeros(5)
    for index in range(4000):  # 4,000 draws of one seeded stream, each from its own (seed, index) generator
        counts[sample(logits, params, generator_for(params, index)).token_id] += 1
    assert chi_square(counts, (logits / temperature).softmax(-1)) < 18.5
    wrong = logits.softmax(-1) if temperature != 1.0 else (logits / 2).softmax(-1)
    assert chi_square(counts, wrong) > 18.5  # the test can tell a wrong temperature apart


def test_recorded_stages_are_the_numbers_used():
    logits = torch.tensor([3.0, 2.5, 1.0, 0.0, -2.0])
    params = SamplingParams(temperature=0.7, top_k=4, top_p=0.9, min_p=0.05, seed=5)
    result = sample(logits, params, record=True)
    stages = result.stage_probs
    assert list(stages) == ["softmax", "temperature", "top_k", "top_p", "min_p", "final"]
    assert torch.allclose(stages["temperature"], (logits / 0.7).softmax(-1))
    assert stages["top_k"][4] == 0 and math.isclose(float(stages["top_k"].sum()), 1.0, rel_tol=1e-6)
    final = stages["final"]
    assert torch.allclose(final[result.range_token_ids], result.range_ends - result.range_starts)
    assert math.isclose(result.probability, float(final[result.token_id]), rel_tol=1e-6)


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"temperature": -1.0}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"temperature": float("inf")}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"top_k": -1}, "top_k"),
        ({"top_k": 2.5}, "top_k"),
        ({"min_p": -0.1}, "min_p"),
        ({"repetition_penalty": 0.0}, "repetition_penalty"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"seed": -3}, "seed"),
        ({"seed": "abc"}, "seed"),
    ],
)
def test_invalid_settings_raise_clear_errors(kwargs, fragment):
    with pytest.raises(SamplingError, match=fragment):
        SamplingParams(**kwargs)


def test_sample_many_equals_repeated_sample():
    from inference import sample_many

    logits = torch.randn(300, generator=torch.Generator().manual_seed(4))
    params = SamplingParams(temperature=0.9, top_k=50, top_p=0.95, seed=8)
    one_by_one = [sample(logits, params, generator_for(params, index), previous_ids=[1, 2]) for index in range(40)]
    many = sample_many(logits, params, 40, previous_ids=[1, 2])
    assert [r.token_id for r in many] == [r.token_id for r in one_by_one]
    assert [r.u for r in many] == [r.u for r in one_by_one]
    later = sample_many(logits, params, 5, previous_ids=[1, 2], first=35)  # draw N is computed, not replayed
    assert [r.u for r in later] == [r.u for r in one_by_one[35:]]
    assert [r.token_id for r in sample_many(logits, SamplingParams(temperature=0), 3)] == [int(logits.argmax())] * 3


@settings(max_examples=300, deadline=None)
@given(
    vocab=st.integers(1, 300),
    levels=st.sampled_from([3, 12, 1_000_000]),  # few levels: many ties, at the heads' edges too
    scale=st.sampled_from([0.3, 2.0, 8.0, 40.0]),
    top_k=st.sampled_from([0, 1, 5, 60]),
    heads=st.sampled_from([(1,), (2, 8), (4, 32), (16,), (64, 128)]),
    seed=st.integers(0, 2**16),
)
def test_one_draw_without_the_full_order_is_the_full_orders_draw(vocab, levels, scale, top_k, heads, seed):
    """``draw`` (the heads first) gives the token, probability and u of ``Ranges.from_probs(...).draw``, for draws
    landing in the heads, past them, at ties on their edge, and with few survivors."""
    from inference.generation.sampling import Ranges, draw

    generator = torch.Generator().manual_seed(seed)
    logits = torch.randint(0, levels, (vocab,), generator=generator).float() / levels * scale  # (V,)
    probs = logits.softmax(-1) * top_k_mask(logits, top_k)
    probs = probs / probs.sum()
    for index in range(20):
        params = SamplingParams(seed=seed)
        full = Ranges.from_probs(probs).draw(generator_for(params, index))
        assert draw(probs, generator_for(params, index), heads) == full


@pytest.mark.parametrize("temperature", [0.3, 1.0, 2.5])
def test_sampling_a_vocabulary_draws_what_the_recorded_ranges_draw(temperature):
    """On SmolLM2's vocabulary size, a plain ``sample`` (the heads first) and a recorded one (every survivor
    ordered) give the same token, probability and u, whether u lands in the first heads or past them all."""
    logits = torch.randn(49_152, generator=torch.Generator().manual_seed(2)) * 4  # (V,)
    params = SamplingParams(temperature=temperature, seed=5)
    for index in range(60):
        plain = sample(logits, params, generator_for(params, index))
        recorded = sample(logits, params, generator_for(params, index), record=True)
        assert (plain.token_id, plain.probability, plain.u) == (recorded.token_id, recorded.probability, recorded.u)


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(temperature=0.8, seed=3),  # every token survives: the renormalising sum spans the vocabulary
        SamplingParams(temperature=1.3, top_p=0.9, min_p=0.001, seed=4),
        SamplingParams(temperature=1.0, top_k=40, repetition_penalty=1.2, seed=5),
    ],
)
def test_the_numbers_of_a_seeded_draw_do_not_depend_on_the_thread_count(params):
    """A recount of a student's draws in another thread, process or thread setting gives the same tokens: every
    number the sampler computes is the same bits at 1 and 2 intra-op threads (``Tensor.sum`` over a vocabulary-long
    vector is not: its split over threads changes the last bits, and a u near a range's edge changed range)."""
    from inference import sample_many
    from inference.generation.sampling import filtered_probs, total

    rows = torch.randn(12, 49_152, generator=torch.Generator().manual_seed(1)) * 4  # (12, V) SmolLM2's vocabulary
    before = torch.get_num_threads()
    seen = {}
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            seen[threads] = [
                (
                    filtered_probs(row, params, [7, 8]),
                    [d.token_id for d in sample_many(row, params, 200, [7, 8])],
                    total(row.softmax(-1)),
                )
                for row in rows
            ]
    finally:
        torch.set_num_threads(before)
    for (probs_1, draws_1, sum_1), (probs_2, draws_2, sum_2) in zip(seen[1], seen[2]):
        assert torch.equal(probs_1, probs_2) and draws_1 == draws_2 and torch.equal(sum_1, sum_2)


# -- one seed rule, and cache keys that are the settings themselves ------------------------------------
def test_draw_n_comes_from_seed_and_index_alone():
    """``generator_for(params, n)`` is draw n's own stream: the draws made before it change nothing."""
    params = SamplingParams(seed=11)
    first = torch.rand(3, generator=generator_for(params, 7))
    for index in range(7):
        torch.rand(5, generator=generator_for(params, index))  # draws 0..6, each taking more numbers than one
    assert torch.equal(torch.rand(3, generator=generator_for(params, 7)), first)
    starts = {
        float(torch.rand(1, generator=generator_for(SamplingParams(seed=seed), index)))
        for seed in range(4)
        for index in range(50)
    }
    assert len(starts) == 200  # no two (seed, index) pairs here share a stream
    torch.rand(1, generator=generator_for(SamplingParams(seed=2**63 - 1), 10**6))  # the largest seed is a valid one


def test_a_cache_key_is_the_settings_themselves_so_every_field_counts():
    """The caches are keyed by ``SamplingParams.canonical()``: a field added later is in every key by itself."""
    base = SamplingParams(
        temperature=0.8, top_k=5, top_p=0.9, min_p=0.05, repetition_penalty=1.1, max_new_tokens=8, seed=3
    )
    changes = {
        "temperature": 0.9,
        "top_k": 6,
        "top_p": 0.8,
        "min_p": 0.1,
        "repetition_penalty": 1.2,
        "max_new_tokens": 9,
        "seed": 4,
        "stop_on_eos": False,
    }
    assert set(changes) == {field.name for field in dataclasses.fields(SamplingParams)}  # a new field: add it here
    for name, value in changes.items():
        keys = {base.canonical(): "base", dataclasses.replace(base, **{name: value}).canonical(): name}
        assert len(keys) == 2, name


def test_greedy_settings_differing_only_in_what_greedy_ignores_share_one_key_and_one_result():
    logits = torch.randn(50, generator=torch.Generator().manual_seed(2))
    fussy, plain = SamplingParams(temperature=0, top_k=3, top_p=0.5, min_p=0.2, seed=7), SamplingParams(temperature=0)
    assert fussy.canonical() == plain.canonical()
    assert sample(logits, fussy).token_id == sample(logits, plain).token_id == int(logits.argmax())
    assert SamplingParams(temperature=0, max_new_tokens=5).canonical() != plain.canonical()  # the length still counts
    assert SamplingParams(temperature=0.5, seed=1).canonical() != SamplingParams(temperature=0.5, seed=2).canonical()


finite_or_not = st.one_of(
    st.floats(width=32, allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -0.0, 1.0, float("nan")])
)


@settings(max_examples=300, deadline=None)
@given(st.lists(finite_or_not, min_size=1, max_size=64), st.integers(0, 3))
def test_argmax_is_torchs_argmax_ties_nans_and_signed_zeros_included(values, repeats):
    """``argmax`` (numpy's reduction) picks what ``Tensor.argmax`` picks: the first of ties, a NaN as the largest."""
    logits = torch.tensor(values * (repeats + 1), dtype=torch.float32)  # repeated: every maximum tied
    assert argmax(logits) == int(logits.argmax())
    assert argmax(logits[::2]) == int(logits[::2].argmax())  # a strided view


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-30, 30, width=32), min_size=2, max_size=40), st.floats(1.0, 2.0), st.booleans())
def test_greedy_without_the_stages_is_greedy_with_them(values, penalty, bfloat16):
    """A greedy draw that records nothing skips the one-hot: the same token as when the stages are recorded."""
    logits = torch.tensor(values, dtype=torch.bfloat16 if bfloat16 else torch.float32)
    params = SamplingParams(temperature=0, repetition_penalty=penalty)
    previous = list(range(0, len(values), 3))
    plain = sample(logits, params, previous_ids=previous)
    recorded = sample(logits, params, previous_ids=previous, record=True)
    assert plain.token_id == recorded.token_id == int(recorded.stage_probs["final"].argmax())
    assert plain.probability == recorded.probability == 1.0


@pytest.mark.parametrize("top_k", [0, 5])
def test_top_k_always_renormalises_and_a_filter_that_is_off_changes_nothing(top_k):
    """The softmax's float32 sum is not exactly 1, and top-p counts running masses: the top-k stage renormalises
    even when off. Top-p and min-p, when off, pass that distribution on bit for bit; when on, they renormalise."""
    logits = torch.randn(262_144, generator=torch.Generator().manual_seed(3)) * 4
    stages = sample(logits, SamplingParams(temperature=1.0, top_k=top_k), record=True).stage_probs
    softmax = stages["temperature"]
    kept = top_k_mask(softmax, top_k)
    assert torch.equal(
        stages["top_k"],
        torch.where(kept, softmax, 0.0) / torch.where(kept, softmax, 0.0).double().cumsum(0)[-1].float(),
    )
    assert (
        stages["top_p"] is stages["top_k"] and stages["min_p"] is stages["top_k"] and stages["final"] is stages["top_k"]
    )
    on = sample(logits, SamplingParams(temperature=1.0, top_k=top_k, top_p=0.9, min_p=0.01), record=True).stage_probs
    assert int((on["top_p"] > 0).sum()) < int((on["top_k"] > 0).sum())  # top-p dropped the tail
    by_hand = torch.where(min_p_mask(on["top_p"], 0.01), on["top_p"], 0.0)
    assert torch.equal(on["min_p"], by_hand / by_hand.double().cumsum(0)[-1].float())
    assert float(on["final"].double().sum()) == pytest.approx(1.0, abs=1e-6)


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(
        st.one_of(
            st.sampled_from([0.0, -0.0, 1e-45, 1.0, float("inf"), float("nan"), -1.0, 0.25]),
            st.floats(0, 1, width=32),
        ),
        min_size=0,
        max_size=60,
    ),
    dtype=st.sampled_from([torch.float32, torch.float64]),
    subset=st.integers(0, 2**60),
)
def test_the_descending_order_is_a_stable_descending_sort(values, dtype, subset):
    """``descending`` (one int64 key sort for non-negative float32 without NaN, ATen's sort otherwise) orders any
    subset of ids as a stable descending sort does: ties, zeros, subnormals, infinities, and through the fallback
    signed zeros, negatives, NaNs and float64."""
    from inference.generation.sampling import descending

    probs = torch.tensor(values, dtype=dtype)  # (V,)
    ids = torch.tensor([i for i in range(len(values)) if subset >> (i % 60) & 1], dtype=torch.long)  # (M,) ascending
    expected = ids[probs[ids].sort(descending=True, stable=True).indices]
    assert descending(probs, ids).tolist() == expected.tolist()
