"""The kernel that multiplies by a GGUF's weight groups: chosen by the CPU, and each choice computes with the file's weights.

``int8rows`` (the AVX2 default) re-quantizes the file's weights to 8 bits per row: each weight is within half
a step (max|row| / 127) of the file's, and the model computes with those weights within the bfloat16
rounding of its matmul inputs (``model_tolerance`` in bfloat16, as the packed 4-bit path).
``kleidiai`` rounds each input row to int8 (here through ATen's reference version of the kernel): a
product's error is bounded by the rounding step of the input, max|x|/127 at most, times the row's weights.
The choice itself is tested by replacing the probes (``kernels.cpu_capability``, ``kleidiai_available``).
"""

from __future__ import annotations

import copy

import pytest
import torch

from inference.model import kernels
from inference.model.kernels import KleidiAILinear, default_kernel
from inference.model.quant import (
    EXACT_ROWS_AT_ONCE,
    Int4Linear,
    Int8GroupLinear,
    Int8Linear,
    QuantizationError,
    TopExactInt8Linear,
    quantize_model,
)
from inference.model.quant_formats import Int4Groups, int4_from_float, q8_0
from tests.test_batching import PROMPTS, tiny_engine
from tests.test_quant import _gguf_weights
from tests.tolerances import max_abs_diff, model_tolerance

CPU = torch.device("cpu")


def _on_kernel(kernel: str | None):
    engine = tiny_engine("llama")
    weights = _gguf_weights(engine.model)
    engine.model.quantization = quantize_model(engine.model, "gguf", weights, kernel=kernel)
    return engine


def _dense_copy(engine):
    """The same engine with every quantized product replaced by a float32 ``nn.Linear`` of its own weights."""
    dense = copy.deepcopy(engine)
    for name, module in list(dense.model.named_modules()):
        if isinstance(module, (KleidiAILinear, Int4Linear, Int8GroupLinear, Int8Linear)):
            linear = torch.nn.Linear(module.in_features, module.out_features, bias=False)
            linear.weight = torch.nn.Parameter(module.dense_weight(), requires_grad=False)
            parent, _, child = name.rpartition(".")
            setattr(dense.model.get_submodule(parent) if parent else dense.model, child, linear)
    return dense


# -- the choice -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "capability, kleidiai, expected",
    [
        ("AVX512", False, "int4pack"),
        ("AVX2", False, "int8rows"),
        ("DEFAULT", False, "int8rows"),
        ("DEFAULT", True, "int8rows"),
    ],
)
def test_the_choice_follows_the_cpu(monkeypatch, capability, kleidiai, expected):
    monkeypatch.setattr(kernels, "cpu_capability", lambda: capability)
    monkeypatch.setattr(kernels, "kleidiai_available", lambda: kleidiai)
    assert default_kernel(CPU) == expected
    assert default_kernel(torch.device("cuda")) == "int4pack"  # the CUDA kernels are the packed ones
    engine = _on_kernel(None)
    summary = engine.model.quantization
    assert summary.kernel == expected
    machine = capability
    assert f"kernel: {expected} (chosen for {machine})" in engine.weights_description
    module = {"int4pack": Int4Linear, "int8rows": Int8Linear, "kleidiai": KleidiAILinear}[expected]
    assert isinstance(engine.model.layers[0].attn.qkv, module)


def test_kleidiai_is_offered_where_torch_reports_it_but_not_chosen(monkeypatch):
    """The probe reads torch's own report (``torch.backends.kleidiai.is_available()``, true on aarch64 builds); the
    default stays int8rows there, since KleidiAI's int8 inputs missed the accuracy budget (docs/benchmarks.md)."""
    monkeypatch.setattr(kernels, "cpu_capability", lambda: "DEFAULT")
    monkeypatch.setattr(torch.backends.kleidiai, "is_available", lambda: True)
    assert kernels.kleidiai_available() and default_kernel(CPU) == "int8rows"
    engine = _on_kernel("kleidiai")
    assert (
        engine.model.quantization.kernel == "kleidiai" and "kernel: kleidiai (asked for)" in engine.weights_description
    )
    monkeypatch.setattr(torch.backends.kleidiai, "is_available", lambda: False)
    assert not kernels.kleidiai_available()


def test_an_unknown_kernel_is_a_clear_error():
    engine = tiny_engine("llama")
    with pytest.raises(QuantizationError, match="kernel must be one of"):
        quantize_model(engine.model, "gguf", _gguf_weights(engine.model), kernel="fast")
    with pytest.raises(QuantizationError, match='is for quant="gguf"'):
        quantize_model(engine.model, "int4", kernel="int8rows")


def test_quantizing_on_load_keeps_torchs_own_kernels(monkeypatch):
    monkeypatch.setattr(kernels, "cpu_capability", lambda: "AVX2")
    engine = tiny_engine("llama")
    engine.model.quantization = quantize_model(engine.model, "int4")
    assert isinstance(engine.model.layers[0].attn.qkv, Int4Linear) and "kernel:" not in engine.weights_description


def test_int8_rows_stay_within_half_a_step_of_the_files_weights():
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    engine = _on_kernel("int8rows")
    weights = _gguf_weights(tiny_engine("llama").model)
    head = engine.model.lm_head  # the Q8_0 output matrix: its rows re-quantized, its top logits from the file's groups
    assert isinstance(head, TopExactInt8Linear) and torch.equal(head.group_codes, engine.model.embed.codes)
    for name in ("layers.0.attn.qkv", "layers.1.mlp.down"):
        module = engine.model.get_submodule(name)
        assert isinstance(module, Int8Linear) and module.codes.dtype == torch.int8
        part = weights[name][0]
        exact = torch.from_numpy(dequantize(part.raw, GGMLQuantizationType[part.type_name]))  # (N, K): the file's
        step = exact.abs().amax(-1, keepdim=True) / 127  # (N, 1): the row's 8-bit step
        # half a step from rounding the code, plus the row scale rounded to bfloat16 (2**-8 relative) times |q| <= 127
        bound = 0.5 * step + 127 * step * 2.0**-8
        assert bool(((module.dense_weight() - exact).abs() <= bound).all()), name


def test_the_int8_rows_model_computes_with_its_own_weights():
    engine = _on_kernel("int8rows")
    head = engine.model.lm_head
    head.top = head.out_features  # every logit from the file's groups (the split of the logits is tested below)
    ids = PROMPTS[2]
    got, expected = engine.forward_logits(ids), _dense_copy(engine).forward_logits(ids)
    # the matmuls' inputs and outputs are rounded to bfloat16, as on the packed 4-bit path
    assert max_abs_diff(got, expected) <= model_tolerance(
        engine.config, expected, context=len(ids), dtype=torch.bfloat16
    )
    assert "8-bit rows (re-quantized from Q4_1)" in engine.weights_description


def test_the_choice_is_part_of_the_compiled_steps_key():
    from inference.model.decode_step import artifact_key

    keys = {kernel: artifact_key(_on_kernel(kernel).model, "gguf", "any") for kernel in ("int4pack", "int8rows")}
    assert keys["int4pack"][0] != keys["int8rows"][0]
    assert keys["int8rows"][1]["kernel"] == "int8rows"


# -- what each computes -------------------------------------------------------------------------------------------
def test_the_output_matrix_on_int8_rows_has_its_top_logits_from_the_files_groups():
    """``TopExactInt8Linear``: each row's ``top`` largest outputs of the row kernel are computed again from the Q8_0
    codes and scales in float32 (q·d exact; only the sum's order may differ); every other output is the row kernel's."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize, quantize

    generator = torch.Generator().manual_seed(7)
    raw = quantize(torch.randn(97, 128, generator=generator).numpy(), GGMLQuantizationType.Q8_0)
    module = TopExactInt8Linear(q8_0(raw), None, CPU, top=8)
    flat = torch.randn(EXACT_ROWS_AT_ONCE + 6, 128, generator=generator).to(torch.bfloat16)  # recomputed in two parts
    got = module(flat.float())
    rows = Int8Linear._product(module, flat).float()  # the row kernel alone, on the same inputs
    top = torch.zeros_like(rows, dtype=torch.bool).scatter(-1, rows.topk(8, dim=-1).indices, True)  # (M, N)
    weight = torch.from_numpy(dequantize(raw, GGMLQuantizationType.Q8_0))  # (N, K): the file's
    exact = flat.float() @ weight.t()
    sums = 128 * 2.0**-24 * (flat.float().abs() @ weight.abs().t())  # float32 sums of 128 terms, in any order
    assert bool(((got - exact).abs() <= sums)[top].all())
    assert torch.equal(got[~top], rows[~top])
    assert int(top.sum()) == 8 * flat.shape[0]
    assert torch.equal(module.dense_weight(), weight)


def test_kleidiai_rounds_only_its_inputs(monkeypatch):
    """One product through ``_dyn_quant_matmul_4bit`` (ATen's reference version off aarch64): within the int8
    rounding of each input row, the weights being the file's codes with bfloat16 group scales and the exact zero."""
    generator = torch.Generator().manual_seed(4)
    groups = int4_from_float(torch.randn(40, 128, generator=generator))
    x = torch.randn(3, 128, generator=generator)
    module = KleidiAILinear(groups, None, CPU)
    weight = Int4Groups(groups.codes, groups.scale.to(torch.bfloat16).float(), groups.zero).dequantize()  # (N, K)
    got, exact = module(x), x @ weight.t()
    step = x.abs().amax(-1, keepdim=True) / 127  # (M, 1): the widest int8 step a row can be rounded with
    bound = 0.5 * step * weight.abs().sum(-1)  # (M, N): each input off by half a step at most
    sums = 128 * 2.0**-24 * (x.abs() @ weight.abs().t())  # (M, N): float32 sums of 128 terms, in any order
    assert bool(((got - exact).abs() <= bound + sums).all())
    assert max_abs_diff(module.dense_weight(), weight) <= 1e-6 * float(weight.abs().max())


@pytest.mark.real_model
def test_real_model_on_int8_rows_matches_the_float32_reference(engine):
    """The AVX2 default keeps issue 39's accuracy budget: top-1 >= 99 %, mean KL <= 2e-3 nats against float32."""
    from inference import load_engine
    from inference.bench.accuracy import PROMPTS as ACCURACY_PROMPTS
    from inference.bench.accuracy import compare

    rows = load_engine(device="cpu", quant="gguf", kernel="int8rows")
    prompts = [engine.tokenizer.encode(p) for p in ACCURACY_PROMPTS]
    reference = [engine.forward_logits(ids) for ids in prompts]  # equals transformers fp32 (test_engine_real)
    result = compare(reference, [rows.forward_logits(ids) for ids in prompts], "gguf, int8rows")
    assert result.top1_agreement >= 0.99 and result.mean_kl_nats <= 2e-3, result
