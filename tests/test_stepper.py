"""The interactive stepper: steps match generate, rewind replays, a branch reuses the cache correctly."""

from __future__ import annotations

import pytest

from inference import SamplingParams, Stepper, StepperError
from tests.tolerances import max_abs_diff, model_tolerance

pytestmark = pytest.mark.real_model


@pytest.fixture
def prompt_ids(engine):
    return engine.tokenizer.encode("The cat sat")


@pytest.fixture(scope="module")
def tiny_engine(tmp_path_factory, tokenizer_folder):
    """A tiny random Llama with a 256-token context: the context's end is the same rule at any length, and reaching
    SmolLM2's 8,192 takes a prefill of 8,190 tokens (~70 s on two cores)."""
    from inference import load_engine
    from tests.tiny_models import save_folder, tiny_llama

    folder = save_folder(tiny_llama(), tmp_path_factory.mktemp("tiny-stepper"), tokenizer_folder)
    return load_engine(model=folder, device="cpu", dtype="float32")


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


def test_the_walk_ends_by_the_rule_every_runner_uses(engine, prompt_ids, tiny_engine):
    """``finish_reason`` with the walk's step budget: end of text (sampled or forced) when the settings stop on it,
    past it when they do not; the budget; the context. An ended walk refuses a forced token too; a rewind reopens it."""
    eos = min(engine.eos_ids)
    stops = Stepper(engine, prompt_ids, SamplingParams(temperature=0), max_steps=8)
    stops.step(forced_token=eos)
    assert stops.done and stops.finish_reason == "eos"
    with pytest.raises(StepperError, match="finished"):
        stops.step(forced_token=engine.tokenizer.encode(" on")[0])
    stops.rewind(0)
    assert not stops.done and stops.finish_reason is None

    walks_on = Stepper(engine, prompt_ids, SamplingParams(temperature=0, stop_on_eos=False), max_steps=3)
    walks_on.step(forced_token=eos)
    assert walks_on.finish_reason is None  # a learner can see what the model writes after its own end
    walks_on.step()
    walks_on.step()
    assert walks_on.finish_reason == "length" and len(walks_on.chosen) == 3

    limit = tiny_engine.config.max_seq_len
    assert limit == 256
    near_the_end = Stepper(tiny_engine, [prompt_ids[0]] * (limit - 2), SamplingParams(temperature=0), max_steps=128)
    assert near_the_end.max_steps == 2
    near_the_end.step()
    near_the_end.step()
    assert near_the_end.finish_reason in ("context", "eos") and near_the_end.done


def test_a_sampled_walk_draws_what_generate_draws(engine, prompt_ids):
    """One seed rule: step i of the walk is draw i of the request's seeded stream, as in ``generate``."""
    params = SamplingParams(temperature=1.1, top_k=40, seed=7, max_new_tokens=6, stop_on_eos=False)
    stepper = Stepper(engine, prompt_ids, params)
    walked = [stepper.step().token_id for _ in range(6)]
    assert walked == engine.complete(prompt_ids, params).token_ids
