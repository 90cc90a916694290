"""The interactive stepper: steps match generate, rewind replays, a branch reuses the cache correctly."""
from __future__ import annotations

import pytest

from inference import SamplingParams, Stepper, StepperError
from tests.tolerances import max_abs_diff, model_tolerance

pytestmark = pytest.mark.real_model


@pytest.fixture
def prompt_ids(engine):
    return engine.tokenizer.encode("The cat sat")


def test_greedy_steps_equal_generate(engine, prompt_ids):
    params = SamplingParams(temperature=0, max_new_tokens=6)
    stepper = Stepper(engine, prompt_ids, params)
    tokens = [stepper.step().token_id for _ in range(6)]
    assert tokens == engine.complete(prompt_ids, params).token_ids
    assert [c.phase for c in stepper.chosen] == ["prefill"] + ["decode"] * 5
    assert len(stepper.cache) == len(prompt_ids) + 5  # the last chosen token is fed on the next step
    assert stepper.chosen[1].cache_len_before == len(prompt_ids)


def test_rewind_replays_the_same_sampled_tokens(engine, prompt_ids):
    stepper = Stepper(engine, prompt_ids, SamplingParams(temperature=1.0, seed=3))
    first = [stepper.step().token_id for _ in range(5)]
    stepper.rewind(2)
    assert len(stepper.cache) == len(prompt_ids) + 1
    again = [stepper.step().token_id for _ in range(3)]
    assert first[2:] == again


def test_branch_reuses_cache_and_matches_full_recompute(engine, prompt_ids):
    stepper = Stepper(engine, prompt_ids, SamplingParams(temperature=0))
    for _ in range(4):
        stepper.step()
    stepper.rewind(1)
    forced = engine.tokenizer.encode(" under")[0]
    stepper.step(forced_token=forced)
    assert stepper.chosen[-1].forced and stepper.chosen[-1].text == " under"
    cached = stepper.next_logits()
    full = engine.forward_logits(stepper.ids)[-1]
    assert max_abs_diff(cached, full) <= model_tolerance(engine.config, full)  # cached decode vs recompute
    assert stepper.chosen[-1].cache_len_before == len(prompt_ids)  # positions up to the branch were reused


def test_rewind_to_the_prompt_and_errors(engine, prompt_ids):
    stepper = Stepper(engine, prompt_ids, SamplingParams(temperature=0))
    stepper.step()
    stepper.step()
    with pytest.raises(StepperError, match="past the prompt"):
        stepper.rewind(-1)
    with pytest.raises(StepperError, match="forward"):
        stepper.rewind(5)
    with pytest.raises(StepperError, match="outside the vocabulary"):
        stepper.step(forced_token=10**7)
    stepper.rewind(0)
    assert stepper.chosen == [] and len(stepper.cache) == 0
    assert stepper.step().phase == "prefill"


def test_step_limit(engine, prompt_ids):
    stepper = Stepper(engine, prompt_ids, SamplingParams(temperature=0), max_steps=2)
    stepper.step()
    stepper.step()
    assert stepper.done
    with pytest.raises(StepperError, match="finished"):
        stepper.step()
