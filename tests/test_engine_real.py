"""Parity on the real embedded SmolLM2-135M-Instruct (fp32, CPU) against transformers' own model."""

from __future__ import annotations

import pytest
import torch

from inference import SamplingParams
from tests.tolerances import max_abs_diff, model_tolerance

pytestmark = pytest.mark.real_model

PROMPTS = [
    "The cat sat",
    "Bank is closed",
    "The cat sat on the mat because it was tired.",
    # a long one: several hundred tokens
    " ".join(["Once upon a time there was a little robot who wanted to learn how language models work."] * 24),
]


@pytest.mark.parametrize("prompt", PROMPTS, ids=["cat", "bank", "tired", "long"])
def test_logits_match_transformers(engine, hf_reference, prompt):
    ids = engine.tokenizer.encode(prompt)
    expected = hf_reference(torch.tensor([ids])).logits[0]
    got = engine.forward_logits(ids)
    # same weights, other kernels and sum orders: the derived fp32 bound (inference/model/tolerances.py), ~2.9e-3 here
    assert max_abs_diff(got, expected) <= model_tolerance(engine.config, expected, context=len(ids))


def test_greedy_32_tokens_match_transformers(engine, hf_reference):
    ids = engine.tokenizer.encode("The cat sat")
    expected = hf_reference.generate(torch.tensor([ids]), max_new_tokens=32, do_sample=False)[0, len(ids) :].tolist()
    got = engine.complete(ids, SamplingParams(temperature=0, max_new_tokens=32)).token_ids
    assert got == expected[: len(got)] and len(got) == len(expected)


def test_cache_equals_recompute_on_real_model(engine):
    ids = engine.tokenizer.encode("The cat sat on the mat because it was tired.")
    cache = engine.new_cache(len(ids))
    steps = [engine.prefill(ids[:4], cache)] + [engine.decode_step(t, cache) for t in ids[4:-1]]
    full = engine.forward_logits(ids[:-1])
    tolerance = model_tolerance(engine.config, full, context=len(ids))  # one row vs T rows: other sum orders
    for offset, logits in enumerate(steps):
        assert max_abs_diff(logits, full[3 + offset]) <= tolerance


def test_cached_and_uncached_generation_agree(engine):
    params = SamplingParams(temperature=0.8, top_p=0.9, max_new_tokens=12, seed=7)
    with_cache = engine.complete("The cat sat", params).token_ids
    without = engine.complete("The cat sat", params, use_cache=False).token_ids
    assert with_cache == without


def test_tokenizer_public_api_on_the_real_tokenizer(engine):
    tokenizer = engine.tokenizer
    assert tokenizer.eos_ids <= engine.eos_ids and tokenizer.eos_ids
    assert tokenizer.merge_ranks[("Ġ", "t")] == 0  # the first merge SmolLM2's BPE learned
    assert tokenizer.pre_tokens("The cat sat") == ["The", "Ġcat", "Ġsat"]
    assert tokenizer.token_bytes(tokenizer.encode(" cat")[0]) == b" cat"
    assert tokenizer.encode("The", special_tokens=False) == tokenizer.encode("The")  # SmolLM2 adds no BOS
    assert "<|im_start|>" in tokenizer.added_texts and tokenizer.special_ids
    assert "<|im_start|>" in engine.tokenizer.chat_template
    chat = engine.tokenizer.apply_chat("Hi")
    assert chat.endswith("<|im_start|>assistant\n") and "<|im_start|>user\nHi<|im_end|>" in chat


def test_chat_answer_stops_on_eos(engine):
    result = engine.complete(
        "What is the capital of France?", SamplingParams(temperature=0, max_new_tokens=40), chat=True
    )
    assert result.finish_reason == "eos"
    assert "Paris" in result.text


def test_streamed_text_equals_full_decode_with_emoji(engine):
    """Byte-level pieces of multi-byte characters are held back until complete."""
    emoji_ids = engine.tokenizer.encode(" 🐱 café 日本")
    from inference.model.tokenizer import StreamDecoder

    decoder = StreamDecoder(engine.tokenizer)
    deltas = [decoder.push(i) for i in emoji_ids] + [decoder.flush()]
    assert "".join(deltas) == engine.tokenizer.decode(emoji_ids)
    assert all("\ufffd" not in d for d in deltas)


def test_step_records(engine):
    steps = list(engine.generate("The cat sat", SamplingParams(temperature=0, max_new_tokens=4)))
    assert [s.phase for s in steps] == ["prefill", "decode", "decode", "decode"]
    assert [s.cache_len for s in steps] == [3, 4, 5, 6]
    assert steps[-1].finish_reason == "length" and all(s.finish_reason is None for s in steps[:-1])
    assert steps[0].token_text == " on" and steps[0].top[0].token_id == steps[0].token_id
    assert all(s.seconds > 0 for s in steps)


def test_context_limit_stops_generation(engine):
    from dataclasses import replace

    short = type(engine)(engine.model, engine.tokenizer)
    short.config = replace(engine.config, max_seq_len=8)
    steps = list(short.generate("The cat sat", SamplingParams(temperature=0, max_new_tokens=50)))
    assert steps[-1].finish_reason == "context" and len(steps) == 5
