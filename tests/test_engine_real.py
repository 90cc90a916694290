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


ODD_TEXTS = [
    "The cat sat on the mat because it was tired.",
    "I love pizza 🍕 and 𓀀",
    "def add(a, b):\n    return a + b",
    "<|im_start|>user<bos></s>",
    "猫はマットの上に座った。",
    "  two  spaces, a tab\tand é",
    "",
]


def test_engines_of_one_folder_share_its_tokenizer_while_one_holds_it(tokenizer_folder, tmp_path, monkeypatch):
    """A folder's tokenizer is read once while something holds it (a second engine of the model shares it); dropped by
    all, it is gone and read again; a copy of the folder, or the folder with a tokenizer file rewritten, is read anew."""
    import gc
    import os
    import shutil
    import weakref

    from inference.model.tokenizer import Tokenizer

    folder, other = tmp_path / "model", tmp_path / "copy"  # copies: an engine of this worker may hold the original's
    for target in (folder, other):
        shutil.copytree(tokenizer_folder, target, ignore=shutil.ignore_patterns("*.safetensors"))
    reads = []
    read = Tokenizer._read
    monkeypatch.setattr(Tokenizer, "_read", classmethod(lambda cls, path: reads.append(path) or read(path)))
    first = Tokenizer.from_folder(folder)
    assert Tokenizer.from_folder(str(folder)) is first and len(reads) == 1  # a str or a Path: one folder
    held = weakref.ref(first)
    del first
    gc.collect()
    assert held() is None  # the cache alone keeps no tokenizer alive
    again = Tokenizer.from_folder(folder)
    assert len(reads) == 2 and again.encode("The cat sat")
    copied = Tokenizer.from_folder(other)
    assert len(reads) == 3 and copied is not again and copied.encode("The cat sat") == again.encode("The cat sat")
    config = other / "tokenizer_config.json"
    config.write_text(config.read_text())  # rewritten (the same text): a new time, so a new key
    os.utime(config, ns=(config.stat().st_atime_ns, config.stat().st_mtime_ns + 1_000_000))
    assert Tokenizer.from_folder(other) is not copied and len(reads) == 4


@pytest.mark.real_model
@pytest.mark.parametrize("model", [None, "gemma-3-270m"], ids=["SmolLM2", "gemma-3-270m"])
def test_the_generic_tokenizer_class_reads_a_conversion_as_autotokenizer_does(model):
    """Our GGUF conversion names the generic fast class, which ``Tokenizer.from_folder`` reads directly (AutoTokenizer
    imports transformers' model registry to find it): the same class, ids with and without special tokens, decoding,
    special tokens, vocabulary and chat template as AutoTokenizer gives, on both models and odd texts."""
    from transformers import AutoTokenizer

    from inference.model.loader import model_folder
    from inference.model.packages import GEMMA3_270M, install_hint, is_installed
    from inference.model.tokenizer import Tokenizer

    if model is not None and not is_installed(GEMMA3_270M):
        pytest.skip(f"{GEMMA3_270M} is not installed: {install_hint(GEMMA3_270M)}")
    folder = model_folder(model)
    ours = Tokenizer.from_folder(folder)._hf
    auto = AutoTokenizer.from_pretrained(str(folder), use_fast=True, trust_remote_code=False)
    assert type(ours) is type(auto) and len(ours) == len(auto)
    assert ours.backend_tokenizer.to_str() == auto.backend_tokenizer.to_str()
    for text in ODD_TEXTS:
        assert ours(text)["input_ids"] == auto(text)["input_ids"], text
        assert ours.encode(text, add_special_tokens=False) == auto.encode(text, add_special_tokens=False), text
        assert ours.decode(ours(text)["input_ids"]) == auto.decode(auto(text)["input_ids"]), text
    for name in ("bos_token", "eos_token", "pad_token", "unk_token", "all_special_ids", "chat_template"):
        assert getattr(ours, name) == getattr(auto, name), name
    if auto.chat_template:
        turn = [{"role": "user", "content": "Why did the cat sit on the mat?"}]
        assert ours.apply_chat_template(turn, tokenize=False, add_generation_prompt=True) == auto.apply_chat_template(
            turn, tokenize=False, add_generation_prompt=True
        )
