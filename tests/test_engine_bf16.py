"""The bfloat16 path (CUDA's default): the reference's greedy token is in our top-5 at every step.

Runs on CUDA when present, else on the CPU in bfloat16 (fewer steps: CPU bf16 is slow).
"""

from __future__ import annotations

import pytest
import torch

from inference import SamplingParams, load_engine

pytestmark = pytest.mark.real_model


@pytest.fixture(scope="module")
def bf16_pair():
    from transformers import AutoModelForCausalLM

    device = "cuda" if torch.cuda.is_available() else "cpu"
    engine = load_engine(device=device, dtype="bfloat16")
    reference = AutoModelForCausalLM.from_pretrained(str(engine.folder), dtype=torch.bfloat16).to(device).eval()
    return engine, reference


def test_reference_greedy_token_in_our_top5_every_step(bf16_pair):
    engine, reference = bf16_pair
    steps = 32 if engine.device.type == "cuda" else 8
    ids = engine.tokenizer.encode("The cat sat on the mat because it was tired.")
    expected = reference.generate(
        torch.tensor([ids], device=engine.device),
        max_new_tokens=steps,
        min_new_tokens=steps,
        do_sample=False,
        pad_token_id=0,
    )[0, len(ids) :].tolist()
    # Teacher-force the reference's tokens through our cached decode, checking our top-5 each step.
    cache = engine.new_cache(len(ids) + steps)
    logits = engine.prefill(ids, cache)
    for token in expected:
        assert token in logits.topk(5).indices.tolist()
        logits = engine.decode_step(token, cache)


def test_bf16_generation_runs_and_is_deterministic(bf16_pair):
    engine, _ = bf16_pair
    params = SamplingParams(temperature=0.7, max_new_tokens=4, seed=1)
    assert engine.complete("The cat sat", params).token_ids == engine.complete("The cat sat", params).token_ids
    assert engine.dtype == torch.bfloat16
