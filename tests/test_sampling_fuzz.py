"""``SamplingParams`` fuzzed with hypothesis: any value for any field (NaN, ±inf, subnormal, negative, huge, bools,
ints, None) gives either a valid object whose first draw on random logits works, or ``SamplingError`` (a
``ValueError``) naming the field; never an ``IndexError`` from an empty range, never NaN probabilities."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from inference import SamplingError, SamplingParams, sample, sample_many
from inference.generation.sampling import Ranges

FIELDS = ("temperature", "top_k", "top_p", "min_p", "repetition_penalty", "max_new_tokens", "seed")
anything = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
    st.sampled_from([1e-320, -1e-320, 5e-324, 1e-45, 1e-39, 1e-7, 1e-6, 1e6, 1e7, 1e308, 0.0, -0.0, 1.0]),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.booleans(),
    st.none(),
)


@settings(max_examples=400, deadline=None)
@given(
    fields=st.dictionaries(st.sampled_from(FIELDS), anything, max_size=4),
    vocab=st.integers(2, 64),
    scale=st.sampled_from([0.1, 1.0, 30.0, 1e3]),
    seed=st.integers(0, 2**16),
)
def test_any_field_gives_a_working_sampler_or_one_clear_error(fields, vocab, scale, seed):
    try:
        params = SamplingParams(**{**fields, "max_new_tokens": fields.get("max_new_tokens", 4)})
    except SamplingError as error:
        assert isinstance(error, ValueError) and any(name in str(error) for name in FIELDS), str(error)
        return
    logits = torch.randn(vocab, generator=torch.Generator().manual_seed(seed)) * scale
    previous = [i % vocab for i in range(seed % 5)]
    result = sample(logits, params, previous_ids=previous, record=True)
    assert 0 <= result.token_id < vocab and 0 < result.probability <= 1 and math.isfinite(result.probability)
    assert all(torch.isfinite(p).all() for p in result.stage_probs.values())
    many = sample_many(logits, params, 3, previous_ids=previous)
    assert all(0 <= r.token_id < vocab for r in many)


@pytest.mark.parametrize("field", ["temperature", "repetition_penalty"])
@pytest.mark.parametrize("value", [1e-320, 5e-324, 1e-39, 1e-7, 1e7, 1e308])
def test_underflowing_or_overflowing_settings_are_refused_at_construction(field, value):
    with pytest.raises(SamplingError, match=f"{field} must be"):
        SamplingParams(**{field: value})


def test_the_bounds_themselves_draw():
    logits = torch.randn(50, generator=torch.Generator().manual_seed(0)) * 30
    for temperature in (1e-6, 1e6):
        for penalty in (1e-6, 1e6):
            params = SamplingParams(temperature=temperature, repetition_penalty=penalty, seed=1)
            assert 0 <= sample(logits, params, previous_ids=[0, 1, 2]).token_id < 50


def test_bools_are_not_numbers():
    for field in ("temperature", "top_p", "min_p", "repetition_penalty", "top_k", "seed"):
        with pytest.raises(SamplingError):
            SamplingParams(**{field: True})


def test_logits_with_nothing_to_draw_are_a_sampling_error():
    with pytest.raises(SamplingError, match="no token has a positive probability"):
        Ranges.from_probs(torch.full((4,), float("nan")))
    with pytest.raises(SamplingError, match="no token has a positive probability"):
        sample(torch.full((4,), float("-inf")), SamplingParams(seed=0))
