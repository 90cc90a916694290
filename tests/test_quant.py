"""Quantized weights: GGUF blocks decode exactly, the kernels multiply by exactly those weights, and every
engine feature (cache, batching, the server, tracing) works on the quantized path.

Bounds: a quantized matmul rounds its input to bfloat16 and returns bfloat16, so against a float32
product of the *same* weights it differs by bfloat16 rounding (unit roundoff 2**-8), the float32 model
of ``inference/model/tolerances.py`` with that roundoff. Against the float32 reference on the real model the
question is statistical, and the issue's own targets are used: top-1 agreement >= 99 % and mean KL
<= 2e-3 nats over the accuracy prompts (measured: 99.78 % and 1.9e-4; llama.cpp on the same file 99.11 %
and 1.6e-3).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType
from gguf.quants import dequantize, quantize

from inference import SamplingParams, run_continuous, run_static
from inference.model import quant
from inference.model.quant import (
    GGUFWeight,
    Int4Linear,
    Int8GroupLinear,
    Int8Linear,
    QuantEmbedding,
    QuantizationError,
    quantize_model,
)
from inference.model.quant_formats import Int4Groups, q4_0, q4_1, q4_k, q8_0
from tests.test_batching import PROMPTS, greedy, solo, tiny_engine
from tests.tolerances import logit_tolerance, max_abs_diff, model_tolerance, top2_margin

BF16 = torch.bfloat16


def _random_weights(rows: int, cols: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 0.05, (rows, cols)).astype(np.float32)


# -- block formats: our decoders against the gguf package's own ------------------------------------
@pytest.mark.parametrize("name, decode", [("Q4_0", q4_0), ("Q4_1", q4_1), ("Q8_0", q8_0)])
def test_blocks_decode_exactly_as_gguf_dequantizes_them(name, decode):
    qtype = GGMLQuantizationType[name]
    raw = quantize(_random_weights(8, 128), qtype)
    expected = dequantize(raw, qtype).astype(np.float32)
    assert np.array_equal(decode(raw).dequantize().numpy(), expected)


def test_q4_k_super_blocks_decode_exactly():
    """Q4_K has no quantizer in the gguf package: random super-blocks with finite fp16 d and dmin."""
    rng = np.random.default_rng(1)
    rows, blocks = 4, 2
    raw = rng.integers(0, 256, (rows, blocks, 144), dtype=np.uint8)
    scales = rng.uniform(1e-3, 1e-2, (rows, blocks, 2)).astype(np.float16)
    raw[..., 0:4] = scales.view(np.uint8).reshape(rows, blocks, 4)
    raw = raw.reshape(rows, blocks * 144)
    expected = dequantize(raw, GGMLQuantizationType.Q4_K).astype(np.float32)
    assert np.array_equal(q4_k(raw).dequantize().numpy(), expected)


# -- the kernels multiply by exactly the decoded weights ------------------------------------------------
def _bf16_bound(x: torch.Tensor, weight: torch.Tensor) -> float:
    """bf16 input and output rounding of x @ W.T: the fp32 model with bf16's unit roundoff."""
    return logit_tolerance(
        float((x.abs() @ weight.abs().t()).max()), weight.shape[1], 1, x.shape[0] * weight.shape[0], dtype=BF16
    )


def test_int4_kernel_multiplies_by_the_gguf_blocks():
    raw = quantize(_random_weights(96, 128), GGMLQuantizationType.Q4_1)
    groups = q4_1(raw)
    layer = Int4Linear(groups, None, torch.device("cpu"))
    # the kernel holds scale and zero in bf16: the weights it multiplies by differ from the file's by that rounding
    held = Int4Groups(groups.codes, groups.scale.to(BF16).float(), groups.zero.to(BF16).float()).dequantize()
    exact = torch.from_numpy(dequantize(raw, GGMLQuantizationType.Q4_1).astype(np.float32))
    codes = groups.codes.float().view(96, -1, 32) - 8
    rounding = (codes.abs() * (groups.scale - groups.scale.to(BF16).float()).abs()[..., None]).view(96, 128) + (
        groups.zero - groups.zero.to(BF16).float()
    ).abs().repeat_interleave(32, dim=1)
    assert ((held - exact).abs() <= rounding + 1e-9).all()
    x = torch.randn(5, 128).to(BF16).float()
    assert max_abs_diff(layer(x), x @ held.t()) <= _bf16_bound(x, held)
    assert max_abs_diff(layer.dense_weight(), held) <= float(held.abs().max()) * 2.0**-8  # read back in bf16


def test_q8_0_groups_are_kept_exactly():
    raw = quantize(_random_weights(97, 128, seed=2), GGMLQuantizationType.Q8_0)  # 97 rows: the kernel pads to 112
    groups = q8_0(raw)
    layer = Int8GroupLinear(groups, None, torch.device("cpu"))
    held = (groups.codes.float().view(97, -1, 32) * groups.scale.to(BF16).float()[..., None]).view(97, 128)
    assert torch.equal(layer.dense_weight(), held)
    x = torch.randn(3, 128).to(BF16).float()
    assert max_abs_diff(layer(x), x @ held.t()) <= _bf16_bound(x, held)  # one call, its output rounded once


def test_q8_0_split_into_4_bit_halves_decodes_bit_for_bit():
    """The output matrix's one 4-bit call: q = 16·hi + lo, [16·d·hi | d·lo] fed [x, x]. The decoded weights of
    the two halves, with d rounded to bfloat16 as the kernel holds it, add up to q·d exactly; and the kernel,
    fed one-hot rows, reads each half back exactly (codes times a power of two fit bfloat16's 8 bits)."""
    from inference.model.quant_formats import Int8Groups, split_int8_groups

    raw = quantize(_random_weights(64, 128, seed=3), GGMLQuantizationType.Q8_0)
    groups = q8_0(raw)
    held = Int8Groups(groups.codes, groups.scale.to(BF16).float()).dequantize()  # (64, 128)
    split = split_int8_groups(groups)
    assert split.codes.shape == (64, 256) and int(split.codes.max()) <= 15
    halves = Int4Groups(split.codes, split.scale.to(BF16).float(), split.zero.to(BF16).float()).dequantize()
    assert torch.equal(halves[:, :128] + halves[:, 128:], held)
    powers = Int8Groups(groups.codes, torch.full_like(groups.scale, 2.0**-6))  # q·2^-6: exact in bf16
    layer = Int8GroupLinear(powers, None, torch.device("cpu"))
    assert torch.equal(layer(torch.eye(128)), powers.dequantize().t())  # the kernel multiplies by q·d exactly
    embedding = QuantEmbedding(groups, torch.device("cpu"))
    exact = torch.from_numpy(dequantize(raw, GGMLQuantizationType.Q8_0).astype(np.float32))
    assert torch.equal(embedding(torch.tensor([[3, 0, 63]]))[0], exact[[3, 0, 63]])  # lookups are exact


def test_kernel_problem_is_reported_not_hidden(monkeypatch):
    monkeypatch.setattr(quant, "kernel_problem", lambda device, kernel: "torch 0.0 has no _weight_int4pack_mm kernel")
    with pytest.raises(QuantizationError, match="no _weight_int4pack_mm kernel.*quant=None"):
        quantize_model(tiny_engine("llama").model, "int4")


def test_bad_modes_are_clear_errors():
    with pytest.raises(QuantizationError, match="one of"):
        quantize_model(tiny_engine("llama").model, "int3")
    with pytest.raises(QuantizationError, match="GGUF"):
        quantize_model(tiny_engine("llama").model, "gguf")


# -- whole tiny models on the quantized path ---------------------------------------------------------------
def _gguf_weights(model: torch.nn.Module) -> dict[str, list[GGUFWeight]]:
    """What a GGUF of this tiny model would hold: Q4_1 projections (Q, K, V and gate, up stacked), a Q8_0 embedding."""
    weights = {}
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and name != "lm_head":
            raw = quantize(module.weight.detach().numpy(), GGMLQuantizationType.Q4_1)
            weights[name] = [GGUFWeight("Q4_1", raw)]
    embed = quantize(model.embed.weight.detach().numpy(), GGMLQuantizationType.Q8_0)
    weights["embed"] = [GGUFWeight("Q8_0", embed)]
    weights["lm_head"] = [GGUFWeight("Q8_0", embed)]
    return weights


def quantized_tiny(mode: str):
    engine = tiny_engine("llama")
    weights = _gguf_weights(engine.model) if mode == "gguf" else None
    summary = quantize_model(engine.model, mode, weights, kernel="int4pack")  # torch's packed kernels, on any CPU
    engine.model.quantization = summary
    return engine


def _same_weights_dense(engine):
    """A float32 copy of a quantized engine with each quantized matmul replaced by its own weights, dense."""
    dense = copy.deepcopy(engine)
    for name, module in list(dense.model.named_modules()):
        if isinstance(module, (Int4Linear, Int8Linear, Int8GroupLinear)):
            linear = torch.nn.Linear(module.in_features, module.out_features, bias=module.bias is not None)
            linear.weight = torch.nn.Parameter(module.dense_weight(), requires_grad=False)
            if module.bias is not None:
                linear.bias = module.bias
            parent, _, child = name.rpartition(".")
            setattr(dense.model.get_submodule(parent) if parent else dense.model, child, linear)
    return dense


@pytest.mark.parametrize("mode", ["gguf", "int8", "int4"])
def test_quantized_model_computes_with_its_own_weights(mode):
    engine = quantized_tiny(mode)
    kinds = set(engine.model.quantization.layers)
    assert kinds and all(("4-bit" in k) or ("8-bit" in k) for k in kinds)
    ids = PROMPTS[2]
    got = engine.forward_logits(ids)
    expected = _same_weights_dense(engine).forward_logits(ids)
    # only the matmuls' bf16 input/output rounding separates the two
    assert max_abs_diff(got, expected) <= model_tolerance(engine.config, expected, context=len(ids), dtype=BF16)
    assert "bfloat16 inputs to the quantized matmuls" in engine.weights_description


@pytest.mark.parametrize("mode", ["gguf", "int4"])
def test_quantized_cache_equals_recompute_and_traced_equals_fast(mode):
    engine = quantized_tiny(mode)
    ids = PROMPTS[3][:24]
    cache = engine.new_cache(len(ids))
    steps = [engine.prefill(ids[:8], cache)] + [engine.decode_step(t, cache) for t in ids[8:-1]]
    full = engine.forward_logits(ids[:-1])
    tolerance = model_tolerance(engine.config, full, context=len(ids), dtype=BF16)
    assert max_abs_diff(torch.stack(steps), full[7:]) <= tolerance
    traced, trace = engine.traced_forward(ids)
    assert max_abs_diff(traced, engine.forward_logits(ids)) <= tolerance and len(trace.layers) == 2


@pytest.mark.parametrize("runner", [run_static, run_continuous])
def test_quantized_batched_equals_solo(runner):
    """Batched vs solo on the quantized path. Their float32 sums differ by rounding, and rounding the matmul
    inputs to bf16 can turn that into one bf16 step on either side, so the bound is the triangle inequality:
    two bf16-rounded runs differ by at most twice how far one is from the float32 product of the same weights,
    measured here on the same prompts (plus the float32 bound)."""
    engine = quantized_tiny("gguf")
    dense = _same_weights_dense(engine)
    rounding = max(max_abs_diff(engine.forward_logits(p), dense.forward_logits(p)) for p in PROMPTS)
    params = [greedy(n, stop_on_eos=False) for n in (5, 3, 7, 4)]
    run = runner(engine, PROMPTS, params, keep_logits=True)
    for prompt, p, result in zip(PROMPTS, params, run.results):
        tokens, logits = solo(engine, prompt, p)
        bound = 2 * rounding + model_tolerance(engine.config, torch.stack(logits), context=256)
        for step, (got, expected) in enumerate(zip(result.logits, logits)):
            if result.token_ids[step] != tokens[step]:  # a near-tie may go either way, then the runs part
                assert top2_margin(expected) < 2 * bound, f"step {step}: a clear choice differs"
                break
            assert max_abs_diff(got, expected) <= bound, f"step {step}"
        else:
            assert result.token_ids == tokens


# -- the real model --------------------------------------------------------------------------------------
@pytest.mark.real_model
def test_real_model_keeps_the_files_blocks(gguf_engine):
    summary = gguf_engine.model.quantization
    assert summary.layers == {"4-bit groups (Q4_1, exact)": 120, "8-bit groups (Q8_0, exact)": 1}
    assert isinstance(gguf_engine.model.embed, QuantEmbedding)
    assert summary.weight_bytes < 100 * 2**20  # vs 513 MiB dense in float32


@pytest.mark.real_model
def test_real_model_matches_the_float32_reference(engine, gguf_engine):
    """The issue's targets on the accuracy prompts: top-1 >= 99 %, mean KL <= 2e-3 nats."""
    from inference.bench.accuracy import PROMPTS as ACCURACY_PROMPTS
    from inference.bench.accuracy import compare

    prompts = [engine.tokenizer.encode(p) for p in ACCURACY_PROMPTS]
    reference = [engine.forward_logits(ids) for ids in prompts]  # equals transformers fp32 (test_engine_real)
    result = compare(reference, [gguf_engine.forward_logits(ids) for ids in prompts], "gguf")
    assert result.top1_agreement >= 0.99 and result.mean_kl_nats <= 2e-3, result


@pytest.mark.real_model
def test_real_model_generation_cache_and_stepper_on_the_quantized_path(gguf_engine):
    from inference import Stepper

    params = SamplingParams(temperature=0, max_new_tokens=8)
    with_cache = gguf_engine.complete("The cat sat", params).token_ids
    assert with_cache == gguf_engine.complete("The cat sat", params, use_cache=False).token_ids
    assert gguf_engine.tokenizer.decode(with_cache[:1]) == " on"  # the article's example
    stepper = Stepper(gguf_engine, gguf_engine.encode_prompt("The cat sat"), params)
    assert [stepper.step().token_id for _ in range(8)] == with_cache


def test_quant_gguf_needs_a_gguf_file(tmp_path, tokenizer_folder):
    from inference import load_engine
    from tests.tiny_models import save_folder, tiny_llama

    folder = save_folder(tiny_llama(), tmp_path / "tiny", tokenizer_folder)
    with pytest.raises(QuantizationError, match="not a .gguf file.*int8"):
        load_engine(model=folder, quant="gguf")
    for mode in ("int8", "int4"):  # float checkpoints quantized on load, through the loader's weight layout
        engine = load_engine(model=folder, quant=mode)
        assert engine.model.quantization.mode == mode
        assert engine.complete([5, 6, 7], SamplingParams(temperature=0, max_new_tokens=3)).token_ids


@pytest.mark.real_model
def test_real_model_quantized_batch_equals_solo_within_its_rounding(engine, gguf_engine):
    """The real model's fast path: a static batch of two vs each alone, by the triangle bound above (the
    float32 engine stands for the product of the same weights: both differ from it by the quantized path's
    rounding, bf16 scales included)."""
    prompts = ["The cat sat", "Once upon a time there was a little robot who lived in a lighthouse by the sea and"]
    ids = [gguf_engine.encode_prompt(p) for p in prompts]
    rounding = max(max_abs_diff(gguf_engine.forward_logits(i), engine.forward_logits(i)) for i in ids)
    params = [greedy(6, stop_on_eos=False)] * 2
    run = run_static(gguf_engine, prompts, params, keep_logits=True)
    for prompt_ids, result in zip(ids, run.results):
        tokens, logits = solo(gguf_engine, prompt_ids, params[0])
        for step, (got, expected) in enumerate(zip(result.logits, logits)):
            if result.token_ids[step] != tokens[step]:
                assert top2_margin(expected) < 4 * rounding, f"step {step}: a clear choice differs"
                break
            assert max_abs_diff(got, expected) <= 2 * rounding, f"step {step}"
