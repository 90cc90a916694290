"""The compiled decode step computes what ``Block.forward`` computes: same logits (derived fp32 bound), same tokens.

One tiny random Llama (GQA, so the grouped attention path is exercised) is compiled once (~20 s on
2 cores; one graph serves every layer and every batch of two or more rows): a left-padded static
batch of four requests must match each request run alone on the eager engine, logits step by step
and tokens.
"""
from __future__ import annotations

import copy

import pytest

from inference import run_static
from inference.model.decode_step import DecodeStep, compiler_problem
from tests.test_batching import PROMPTS, assert_batched_equals_solo, greedy, solo, tiny_engine

pytestmark = pytest.mark.skipif(compiler_problem() is not None, reason=f"torch.compile unavailable: {compiler_problem()}")


@pytest.fixture(scope="module")
def engines():
    eager = tiny_engine("llama")
    compiled = copy.deepcopy(eager)
    compiled.model.decode_step = DecodeStep()
    return eager, compiled


def test_compiled_static_batch_with_padding_equals_solo(engines):
    eager, compiled = engines
    params = [greedy(n, stop_on_eos=False) for n in (6, 4, 9, 3)]
    calls = []
    step = compiled.model.decode_step
    compiled.model.decode_step = lambda *args: calls.append(1) or step(*args)  # count the compiled steps
    run = run_static(compiled, PROMPTS, params, keep_logits=True)
    compiled.model.decode_step = step
    assert len(calls) == max(p.max_new_tokens for p in params) - 1  # every decode step went through it
    for prompt, p, result in zip(PROMPTS, params, run.results):
        tokens, logits = solo(eager, prompt, p)
        assert_batched_equals_solo(eager, result.token_ids, result.logits, tokens, logits)
