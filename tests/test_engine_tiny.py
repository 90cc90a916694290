"""Fast engine tests on tiny random Llama, GPT-2 and Gemma 3 models: parity with transformers, cache == no cache.

The tiny Gemma 3 has a 4-key sliding window, so its 10-token prompt runs past the window
on the local layers, exactly as a 600-token prompt does on the real model.

Every logit comparison uses the derived float32 bound of ``inference/model/tolerances.py`` (two
evaluations that sum in other orders); on these models it is ~1e-5 and the measured
differences are ~4e-7.
"""

from __future__ import annotations

import pytest
import torch

from inference import load_engine
from tests.tiny_models import save_folder, tiny_gemma3, tiny_gpt2, tiny_llama
from tests.tolerances import max_abs_diff, model_tolerance, top2_margin

IDS = [5, 900, 17, 4000, 31, 8, 12000, 77, 3, 64]


def tol(engine, reference: torch.Tensor) -> float:
    return model_tolerance(engine.config, reference, context=len(IDS))


@pytest.fixture(scope="module", params=["llama", "llama-gqa-bias", "gpt2", "gemma3"])
def tiny_pair(request, tmp_path_factory, tokenizer_folder):
    """(our engine, transformers model) on the same random weights, loaded from a local HF folder."""
    if request.param == "llama":
        reference = tiny_llama()
    elif request.param == "llama-gqa-bias":
        reference = tiny_llama(attention_bias=True, num_key_value_heads=1, tie_word_embeddings=True)
    elif request.param == "gemma3":
        reference = tiny_gemma3()
    else:
        reference = tiny_gpt2()
    folder = save_folder(reference, tmp_path_factory.mktemp(request.param), tokenizer_folder)
    return load_engine(model=folder, device="cpu", dtype="float32"), reference


def test_logits_match_transformers(tiny_pair):
    ours, reference = tiny_pair
    expected = reference(torch.tensor([IDS])).logits[0]
    got = ours.forward_logits(IDS)
    assert got.shape == expected.shape
    assert max_abs_diff(got, expected) <= tol(ours, expected)


def test_family_detected(tiny_pair):
    ours, reference = tiny_pair
    families = {"gpt2": "gpt2", "gemma3_text": "gemma3"}
    assert ours.config.family == families.get(reference.config.model_type, "llama")
    assert ours.config.n_layers == reference.config.num_hidden_layers


def test_cache_equals_no_cache_every_step(tiny_pair):
    ours, _ = tiny_pair
    prompt, extra = IDS[:4], IDS[4:]
    cache = ours.new_cache(capacity=len(IDS))
    cached = [ours.prefill(prompt, cache)]
    for token in extra:
        cached.append(ours.decode_step(token, cache))
    full = ours.forward_logits(IDS)  # (T, V)
    for step, logits in enumerate(cached):
        position = len(prompt) - 1 + step
        assert max_abs_diff(logits, full[position]) <= tol(ours, full), f"step {step}"
    assert len(cache) == len(IDS)


def test_chunked_prefill_after_cache_matches(tiny_pair):
    """A multi-token forward on top of a cached prefix (branching) needs an explicit causal mask."""
    ours, _ = tiny_pair
    cache = ours.new_cache(capacity=len(IDS))
    ours.prefill(IDS[:3], cache)
    chunk = ours.model(torch.tensor([IDS[3:]]), kv_cache=cache)[0]  # (T', V)
    full = ours.forward_logits(IDS)
    assert max_abs_diff(chunk, full[3:]) <= tol(ours, full)


def test_greedy_generation_matches_transformers(tiny_pair):
    from inference import SamplingParams

    ours, reference = tiny_pair
    params = SamplingParams(temperature=0, max_new_tokens=12, stop_on_eos=False)
    got = ours.complete(IDS[:5], params).token_ids
    expected = reference.generate(
        torch.tensor([IDS[:5]]), max_new_tokens=12, do_sample=False, eos_token_id=None, pad_token_id=0
    )[0, 5:].tolist()
    if got != expected:  # only a near-tie (top two within the rounding bound) may go either way
        split = next(i for i, (a, b) in enumerate(zip(got, expected)) if a != b)
        logits = ours.forward_logits(IDS[:5] + got[:split])[-1]
        assert top2_margin(logits) < 2 * tol(ours, logits), f"token {split} differs on a clear choice"


def test_traced_forward_matches_fast_path(tiny_pair):
    ours, _ = tiny_pair
    logits, trace = ours.traced_forward(IDS)
    assert max_abs_diff(logits, ours.forward_logits(IDS)) <= tol(ours, logits)  # SDPA vs step by step
    layer = trace.layers[0]
    probs = layer.attention_probs[0]  # (H, T, S)
    assert torch.allclose(probs.sum(-1), torch.ones_like(probs.sum(-1)), atol=1e-5)
    assert probs.triu(diagonal=1).abs().max().item() == 0.0  # causal: nothing from the future
    assert len(trace.layers) == ours.config.n_layers
    # the logit lens of the last block's output is the model's own answer
    lens = ours.unembed(trace.layers[-1].block_output[0])
    assert max_abs_diff(lens, logits) <= tol(ours, logits)


def test_cache_size_in_bytes_matches_the_config_formula(tiny_pair):
    ours, _ = tiny_pair
    cache = ours.new_cache(capacity=len(IDS))
    ours.prefill(IDS[:6], cache)
    assert cache.used_bytes == ours.config.kv_cache_bytes(6, 4)  # fp32
    assert cache.nbytes == ours.config.kv_cache_bytes(len(IDS), 4)


def test_gemma3_local_layers_see_only_their_window(tmp_path, tokenizer_folder):
    ours = load_engine(model=save_folder(tiny_gemma3(), tmp_path, tokenizer_folder), device="cpu", dtype="float32")
    _, trace = ours.traced_forward(IDS)
    window = ours.config.sliding_window
    local, global_ = trace.layers[0].attention_probs[0], trace.layers[1].attention_probs[0]  # (H, T, S)
    query, key = torch.meshgrid(torch.arange(len(IDS)), torch.arange(len(IDS)), indexing="ij")
    outside = key <= query - window  # (T, S) keys a local layer must not see
    assert local[:, outside].abs().max().item() == 0.0
    assert global_[:, outside].abs().min().item() > 0.0  # a global layer sees every earlier key
    # fp32, 1 K/V head of 32: 256 bytes per layer and position; a rolling buffer keeps 10 + 4 + 4 positions
    assert ours.config.kv_cache_bytes(len(IDS), 4) == 256 * 3 * 10
    assert ours.config.rolling_kv_cache_bytes(len(IDS), 4) == 256 * (10 + 4 + 4)


def test_the_window_view_measures_the_sink_apart_from_far_back_text(tmp_path, tokenizer_folder):
    """A global layer's weight beyond the window is the sink's (key 0) plus the text's: ``sink_share`` is the
    first part, measured on the same late queries, so a page can show the far-back text without the sink."""
    from inference.inspection import window_view

    ours = load_engine(model=save_folder(tiny_gemma3(), tmp_path, tokenizer_folder), device="cpu", dtype="float32")
    view = window_view(ours, IDS, pooled_cells=5)
    _, trace = ours.traced_forward(IDS)
    window = ours.config.sliding_window
    probs = trace.layers[1].attention_probs[0].numpy()  # (H, T, T): the global layer
    late = slice(window, len(IDS))
    assert view.sink_share[1] == pytest.approx(float(probs[:, late, 0].mean()), abs=1e-6)
    far_text = sum(float(probs[:, q, 1 : q - window + 1].sum(-1).mean()) for q in range(window, len(IDS)))
    assert view.outside_share[1] - view.sink_share[1] == pytest.approx(far_text / (len(IDS) - window), abs=1e-6)
    assert view.sink_share[0] == pytest.approx(0.0, abs=1e-7)  # a local layer never sees the sink
