"""Parity on the real Gemma 3 270M (fp32, CPU) against transformers reading the same GGUF file itself.

The reference is transformers' own GGUF loading (``inference.bench.references``): its
dequantization, tensor names and norm fix-up, independent of ours, cached once as
safetensors. Logits are compared within the derived float32 bound of
``inference/model/tolerances.py`` (about 3-4e-3 on this model: d_ff 2048, 18 layers, max |logit|
~ 30-40, 10^7-10^8 values compared); a wrong window, norm or scale moves them by 0.1 or more.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from inference import SamplingParams
from inference.serving.padding import left_pad
from tests.test_blocks import assert_read_as_gguf_reader_reads
from tests.tolerances import max_abs_diff, model_tolerance

pytestmark = pytest.mark.real_model

CAT = "The cat sat on the mat because it was"
LONG = " ".join(["Once upon a time there was a little robot who wanted to learn how language models work."] * 30)
PROMPTS = {"cat": CAT, "bank": "Bank is closed", "long": LONG}


@pytest.fixture(scope="module")
def long_ids(gemma_engine) -> list[int]:
    ids = gemma_engine.tokenizer.encode(LONG)
    assert len(ids) > gemma_engine.config.sliding_window + 24  # past the 512-token window
    return ids


@pytest.fixture(scope="module")
def past_window(gemma_engine, long_ids) -> tuple[list[int], torch.Tensor]:
    """16 tokens past the window and the engine's logits for them, computed once for the two tests that compare with
    them (a forward of 528 positions through the 262,144-row output matrix: seconds on one core)."""
    ids = long_ids[: gemma_engine.config.sliding_window + 16]
    return ids, gemma_engine.forward_logits(ids)  # (T, V)


def test_file_mixes_every_block_type_and_our_conversion_equals_transformers(gemma_gguf, gemma_engine, gemma_reference):
    from gguf import GGUFReader
    from safetensors.torch import load_file

    reader = GGUFReader(gemma_gguf)
    kinds = Counter(t.tensor_type.name for t in reader.tensors)
    assert {"Q8_0", "Q5_0", "Q4_K", "Q6_K", "F32"} <= set(kinds), kinds
    assert_read_as_gguf_reader_reads(gemma_gguf, reader)  # the engine's own reader (quant="gguf") reads the same
    ours = load_file(str(gemma_engine.folder / "model.safetensors"))
    theirs = gemma_reference.state_dict()
    assert set(ours) == set(theirs) - {"lm_head.weight"}  # tied: the output matrix is the embedding
    assert all(torch.equal(ours[name], theirs[name]) for name in ours)  # dequantized alike, bit for bit


def test_config_read_from_the_file(gemma_engine):
    config = gemma_engine.config
    assert (config.family, config.n_layers, config.d_model, config.n_heads, config.n_kv_heads) == (
        "gemma3",
        18,
        640,
        4,
        1,
    )
    assert config.head_dim * config.n_heads != config.d_model and config.vocab_size == 262_144
    assert config.sliding_window == 512 and len(config.local_layers) == 15
    assert [i for i in range(18) if not config.is_local(i)] == [5, 11, 17]
    assert (config.rope_theta, config.rope_local_theta) == (1_000_000.0, 10_000.0)
    assert config.embed_scale == pytest.approx(640**0.5)


@pytest.mark.parametrize("name", list(PROMPTS))
def test_logits_match_transformers(gemma_engine, gemma_reference, name):
    ids = gemma_engine.tokenizer.encode(PROMPTS[name])
    with torch.inference_mode():
        expected = gemma_reference(torch.tensor([ids])).logits[0]
    got = gemma_engine.forward_logits(ids)
    bound = model_tolerance(gemma_engine.config, expected, context=len(ids))
    diff = max_abs_diff(got, expected)
    print(f"{name}: {len(ids)} tokens, max |Δlogit| {diff:.2e}, bound {bound:.2e}")
    assert diff <= bound


def test_greedy_16_tokens_match_transformers(gemma_engine, gemma_reference):
    ids = gemma_engine.tokenizer.encode(CAT)
    expected = gemma_reference.generate(torch.tensor([ids]), max_new_tokens=16, do_sample=False)[0, len(ids) :].tolist()
    got = gemma_engine.complete(ids, SamplingParams(temperature=0, max_new_tokens=16, stop_on_eos=False))
    assert got.token_ids == expected
    assert got.text.startswith(" hungry.\nThe cat sat on the mat because it was")


def test_cache_equals_no_cache_past_the_window(gemma_engine, long_ids):
    window = gemma_engine.config.sliding_window
    ids = long_ids[: window + 24]
    start = window - 8  # decode steps cross the window: local layers start dropping keys
    cache = gemma_engine.new_cache(len(ids))
    steps = [gemma_engine.prefill(ids[:start], cache)] + [gemma_engine.decode_step(t, cache) for t in ids[start:-1]]
    full = gemma_engine.forward_logits(ids[:-1])  # (T, V)
    bound = model_tolerance(gemma_engine.config, full, context=len(ids))
    worst = max(max_abs_diff(logits, full[start - 1 + offset]) for offset, logits in enumerate(steps))
    print(f"cache vs recompute over positions {start - 1}..{len(ids) - 2}: {worst:.2e} (bound {bound:.2e})")
    assert worst <= bound


def test_batched_equals_solo_with_padding_past_the_window(gemma_engine, past_window):
    ids, solo = past_window
    mates = [gemma_engine.tokenizer.encode("Bank is closed"), gemma_engine.tokenizer.encode(CAT)]
    padded, mask, positions = left_pad([mates[0], ids, mates[1]])  # (B, T) each; row 1 is the long prompt
    batched = gemma_engine.model(padded, positions=positions, padding_mask=mask)
    bound = model_tolerance(gemma_engine.config, solo, context=len(ids))
    assert max_abs_diff(batched[1].float(), solo) <= bound
    for row, mate in ((0, mates[0]), (2, mates[1])):  # the short rows see only their own tokens
        assert max_abs_diff(batched[row, -len(mate) :].float(), gemma_engine.forward_logits(mate)) <= bound


def test_continuous_batch_decodes_past_the_window_like_solo(gemma_engine, long_ids):
    from inference import run_continuous

    prompts = [long_ids[:508], gemma_engine.tokenizer.encode(CAT)]
    params = [SamplingParams(temperature=0, max_new_tokens=8, stop_on_eos=False)] * 2
    run = run_continuous(gemma_engine, prompts, params, n_slots=2)
    for prompt, p, result in zip(prompts, params, run.results):
        assert result.token_ids == gemma_engine.complete(prompt, p).token_ids


def test_traced_attention_shows_the_window(gemma_engine, past_window):
    config = gemma_engine.config
    ids, plain = past_window
    logits, trace = gemma_engine.traced_forward(ids)
    assert max_abs_diff(logits, plain) <= model_tolerance(config, logits, context=len(ids))
    query = len(ids) - 1
    oldest_visible = query - config.sliding_window + 1
    local = trace.layers[config.local_layers[0]].attention_probs[0, :, query]  # (H, S)
    global_ = trace.layers[next(i for i in range(config.n_layers) if not config.is_local(i))].attention_probs[
        0, :, query
    ]
    assert local[:, :oldest_visible].abs().max().item() == 0.0  # keys before the window get nothing
    assert local[:, oldest_visible:].sum(-1).sub(1).abs().max().item() < 1e-5
    assert global_[:, :oldest_visible].sum().item() > 1e-3  # a global layer still reaches them
    layer = trace.layers[0]
    assert layer.attn_before_norm is not None and layer.mlp_before_norm is not None  # four norms recorded


def test_bf16_keeps_the_reference_choice_in_its_top_5(gemma_gguf, gemma_engine):
    from inference import load_engine

    bf16 = load_engine(model="gemma-3-270m", device="cpu", dtype="bfloat16")
    ids = gemma_engine.tokenizer.encode(CAT)
    reference = gemma_engine.complete(ids, SamplingParams(temperature=0, max_new_tokens=16, stop_on_eos=False))
    # teacher-forced in one forward: at each of the 16 steps, the fp32 answer is in our bf16 top 5
    logits = bf16.forward_logits(ids + reference.token_ids[:-1])[len(ids) - 1 :]  # (16, V)
    top5 = logits.topk(5, dim=-1).indices.tolist()
    assert all(token in best for token, best in zip(reference.token_ids, top5))


def test_the_files_own_blocks_keep_the_reference_choice_in_their_top_5(gemma_engine, gemma_gguf_engine):
    """quant="gguf" on Gemma's mixed file: Q4_K and Q8_0 kept exactly, Q5_0/Q6_K re-quantized to 8-bit rows
    (what ``quant.py`` does with a block type no kernel reads); the fp32 answer stays in its top 5 at every
    step, and the KV cache gives the same greedy tokens as recomputing."""
    fast = gemma_gguf_engine
    layers = fast.model.quantization.layers
    assert any("Q4_K, exact" in kind for kind in layers) and any("Q6_K" in kind for kind in layers), layers
    ids = gemma_engine.tokenizer.encode(CAT)
    reference = gemma_engine.complete(ids, SamplingParams(temperature=0, max_new_tokens=16, stop_on_eos=False))
    logits = fast.forward_logits(ids + reference.token_ids[:-1])[len(ids) - 1 :]  # (16, V), teacher-forced
    top5 = logits.topk(5, dim=-1).indices.tolist()
    assert all(token in best for token, best in zip(reference.token_ids, top5))
    params = SamplingParams(temperature=0, max_new_tokens=8, stop_on_eos=False)
    assert fast.complete(ids, params).token_ids == fast.complete(ids, params, use_cache=False).token_ids


def test_sentencepiece_tokenizer_facts(gemma_engine):
    from inference.model.tokenizer import StreamDecoder

    tokenizer = gemma_engine.tokenizer
    assert tokenizer.scheme == "sentencepiece" and tokenizer.space_symbol == "▁" and tokenizer.byte_fallback
    assert tokenizer.bos_token == (2, "<bos>") and tokenizer.encode("The")[0] == 2
    assert tokenizer.raw_tokens(tokenizer.encode(" cat", special_tokens=False)) == ["▁cat"]
    hieroglyph = tokenizer.encode("𓀀", special_tokens=False)  # outside the vocabulary: four byte tokens
    assert tokenizer.raw_tokens(hieroglyph) == ["<0xF0>", "<0x93>", "<0x80>", "<0x80>"]
    assert b"".join(tokenizer.token_bytes(i) for i in hieroglyph) == "𓀀".encode()
    decoder = StreamDecoder(tokenizer)
    deltas = [decoder.push(i) for i in tokenizer.encode(" 𓀀 café", special_tokens=False)] + [decoder.flush()]
    assert "".join(deltas) == " 𓀀 café" and all("\ufffd" not in d for d in deltas)
    assert tokenizer.chat_template is None  # the base model has none


def test_merges_replayed_from_characters_give_the_tokenizers_own_split(gemma_engine):
    """SentencePiece BPE starts from characters; one outside the vocabulary starts as its byte tokens."""
    tokenizer = gemma_engine.tokenizer
    ranks = tokenizer.merge_ranks
    for text in ("thecatsatonthemat", " unbelievable", "naïveté 𓀀x"):
        parts = tokenizer.bpe_symbols(tokenizer.pre_tokens(text)[0])
        while True:
            candidates = [(ranks[pair], i) for i, pair in enumerate(zip(parts, parts[1:])) if pair in ranks]
            if not candidates:
                break
            _, i = min(candidates)
            parts = parts[:i] + [parts[i] + parts[i + 1]] + parts[i + 2 :]
        assert parts == tokenizer.raw_tokens(tokenizer.encode(text, special_tokens=False))
