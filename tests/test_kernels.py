"""The kernel that multiplies by a GGUF's weight groups: chosen by the CPU, and each choice computes with the file's weights.

``q8dot`` (the AVX2 default, our own kernel) rounds each group of 32 inputs to int8 and keeps the file's 4-bit
codes: a product's error is bounded by half an int8 step of each input group times that group's weights.
``int8rows`` (the AVX2 fallback where q8dot cannot be built) re-quantizes the file's weights to 8 bits per row: each weight is within half
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

from inference.model import kernels, native
from inference.model.kernels import KleidiAILinear, Q8DotHead, Q8DotLinear, default_kernel
from inference.model.quant import (
    EXACT_ROWS_AT_ONCE,
    Int4Linear,
    Int8GroupLinear,
    Int8Linear,
    QuantizationError,
    QuantSummary,
    TopExactInt8Linear,
    kernel_problem,
    quantize_model,
)
from inference.model.quant_formats import Int4Groups, Int8Groups, int4_from_float, q8_0
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
        if isinstance(module, (KleidiAILinear, Int4Linear, Int8GroupLinear, Int8Linear, Q8DotLinear, Q8DotHead)):
            linear = torch.nn.Linear(module.in_features, module.out_features, bias=False)
            linear.weight = torch.nn.Parameter(module.dense_weight(), requires_grad=False)
            parent, _, child = name.rpartition(".")
            setattr(dense.model.get_submodule(parent) if parent else dense.model, child, linear)
    return dense


# -- the choice -------------------------------------------------------------------------------------------------
NO_COMPILER = "building our q8dot kernel needs a C++ compiler (g++) and this machine has none"


@pytest.mark.parametrize(
    "capability, kleidiai, q8dot, expected",
    [
        ("AVX512", False, None, "int4pack"),
        ("AVX2", False, None, "q8dot"),
        ("AVX2", False, NO_COMPILER, "int8rows"),
        ("DEFAULT", False, None, "int8rows"),
        ("DEFAULT", True, None, "int8rows"),
    ],
)
def test_the_choice_follows_the_cpu(monkeypatch, capability, kleidiai, q8dot, expected):
    """AVX-512: torch's packed kernel (inductor's template); AVX2: our q8dot kernel, or 8-bit rows where it cannot be
    built, saying why; anything else: 8-bit rows."""
    if expected == "q8dot" and native.cpu_problem():
        pytest.skip(f"q8dot: {native.cpu_problem()}")
    monkeypatch.setattr(kernels, "cpu_capability", lambda: capability)
    monkeypatch.setattr(kernels, "kleidiai_available", lambda: kleidiai)
    monkeypatch.setattr(kernels, "q8dot_problem", lambda: q8dot)
    assert default_kernel(CPU) == expected
    assert default_kernel(torch.device("cuda")) == "int4pack"  # the CUDA kernels are the packed ones
    engine = _on_kernel(None)
    summary = engine.model.quantization
    assert summary.kernel == expected
    reason = f"chosen for {capability}" + (f"; q8dot cannot run: {q8dot}" if q8dot else "")
    assert f"kernel: {expected} ({reason})" in engine.weights_description
    module = {"int4pack": Int4Linear, "int8rows": Int8Linear, "kleidiai": KleidiAILinear, "q8dot": Q8DotLinear}
    assert isinstance(engine.model.layers[0].attn.qkv, module[expected])


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


# -- q8dot: our own kernel (int8 inputs per group of 32 times the file's 4-bit codes) ---------------------------
needs_q8dot = pytest.mark.skipif(native.cpu_problem() is not None, reason=f"q8dot: {native.cpu_problem()}")


def _rounded_per_group(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x (M, K) rounded as the kernel rounds it: int8 codes (M, G, 32) in float64 and their steps (M, G, 1). The
    scale 127/max|x_g| is a correctly rounded float32 division, as the kernel's (torch's ``127 / t`` is not always:
    one ulp moves an input that lands on a half step)."""
    m, k = x.shape
    groups = x.view(m, k // 32, 32)  # (M, G, 32)
    amax = groups.abs().amax(-1, keepdim=True)  # (M, G, 1)
    inverse = torch.where(amax > 0, torch.full_like(amax, 127).div(amax), torch.zeros_like(amax))
    return torch.round(groups * inverse).double(), (amax / 127).double()  # half to even, as _mm256_round_ps


def _q8dot_by_hand(x: torch.Tensor, module: Q8DotLinear) -> torch.Tensor:
    """The kernel's arithmetic in float64 from its own stores: each group of x rounded to int8 with the step
    max|x_g|/127, its int dot with the codes, times scale·step, plus low·step·sum(q_x)."""
    m, k = x.shape
    q, step = _rounded_per_group(x)  # (M, G, 32), (M, G, 1)
    packed = module.codes.view(module.out_features, k // 32, 16)  # (N, G, 16)
    codes = torch.cat([packed & 0xF, packed >> 4], dim=-1).double()  # (N, G, 32)
    dots = torch.einsum("mgk,ngk->mng", q, codes)  # (M, N, G): exact integers
    scale, low = module.scale.double(), module.low.double().t()  # (N, G) each
    per_group = scale[None] * step[..., 0][:, None] * dots + low[None] * (step[..., 0] * q.sum(-1))[:, None]
    return per_group.sum(-1)  # (M, N)


@needs_q8dot
@pytest.mark.parametrize(
    "rows, outputs, inputs",
    [(1, 64, 96), (3, 17, 32), (8, 100, 576), (19, 33, 160), (26, 41, 192), (4, 3, 1536), (9, 5, 32)],
)
def test_q8dot_computes_the_int8_dots_of_its_inputs_per_group(rows, outputs, inputs):
    """Against the same arithmetic by hand (float64, exact integer dots): only the float32 sums differ. Against the
    dense product of its weights: within half an int8 step of each input group. Inputs with a zero group and an
    outlier; an odd and an even number of groups and one alone (the kernel takes them two at a time); rows past
    its blocks of 4 and an odd number of outputs (its tiles' edges); a bias; leading dimensions and bfloat16 kept."""
    generator = torch.Generator().manual_seed(rows)
    groups = int4_from_float(torch.randn(outputs, inputs, generator=generator))
    bias = torch.randn(outputs, generator=generator)
    module = Q8DotLinear(groups, bias, CPU)
    x = torch.randn(rows, inputs, generator=generator)
    x[0, :32] = 0  # a group of zeros: step 0, no division by it
    x[-1, -1] = 40.0  # an outlier widens its own group's step only
    got = module(x) - bias
    weight = module.dense_weight()  # (N, K): scale·q + low from the float16 stores
    magnitude = x.abs().double() @ weight.abs().double().t()  # (M, N)
    sums = inputs * 2.0**-23 * magnitude  # float32 products and sums of ``inputs`` terms in the kernel's order
    assert bool(((got.double() - _q8dot_by_hand(x, module)).abs() <= sums).all())
    steps = x.abs().view(rows, -1, 32).amax(-1).double() / 254  # (M, G): half of each group's int8 step
    bound = steps @ weight.abs().view(outputs, -1, 32).sum(-1).double().t()  # (M, N)
    assert bool(((got.double() - x.double() @ weight.double().t()).abs() <= bound + sums).all())
    assert max_abs_diff(weight, groups.dequantize()) <= 2.0**-10 * float(groups.dequantize().abs().max())
    # a product's bits do not depend on how many rows come with it (decode's tiles and a batch's): one row at a time
    assert torch.equal(module(x), torch.cat([module(x[i : i + 1]) for i in range(rows)]))
    shaped = module(x.view(1, rows, inputs).to(torch.bfloat16))
    assert shaped.shape == (1, rows, outputs) and shaped.dtype == torch.bfloat16


@needs_q8dot
def test_q8dot_keeps_the_files_q4_1_weights_exactly():
    """Q4_1's d and m are float16 in the file: the kernel's stores hold them as they are, so its weights are the
    file's (``w = d·q + m``), bit for bit, and the model names it."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    engine = _on_kernel("q8dot")
    part = _gguf_weights(tiny_engine("llama").model)["layers.1.mlp.down"][0]
    module = engine.model.get_submodule("layers.1.mlp.down")
    assert isinstance(module, Q8DotLinear) and part.type_name == "Q4_1"
    assert torch.equal(module.dense_weight(), torch.from_numpy(dequantize(part.raw, GGMLQuantizationType.Q4_1)))
    assert "4-bit groups (Q4_1, exact)" in engine.weights_description
    assert "kernel: q8dot (asked for); int8 inputs (per group of 32)" in engine.weights_description


@needs_q8dot
def test_the_q8dot_model_computes_with_its_own_weights_within_its_input_rounding():
    """A whole forward: each product's inputs are rounded per group of 32 to int8 (a relative step of 1/254 at most
    of the group's largest input), the output matrix's to bfloat16 (2**-9); both well inside the bfloat16 model
    tolerance, which allows each matmul input 2**-9 of the largest."""
    engine = _on_kernel("q8dot")
    head = engine.model.lm_head
    head.top = head.out_features
    ids = PROMPTS[2]
    got, expected = engine.forward_logits(ids), _dense_copy(engine).forward_logits(ids)
    assert max_abs_diff(got, expected) <= model_tolerance(
        engine.config, expected, context=len(ids), dtype=torch.bfloat16
    )


@needs_q8dot
@pytest.mark.parametrize("rows, outputs, inputs", [(1, 97, 128), (4, 41, 64), (19, 130, 576)])
def test_the_q8dot_output_matrix_has_int8_dots_and_its_top_logits_from_float_inputs(rows, outputs, inputs):
    """``Q8DotHead`` on a Q8_0 matrix: every output is the int8 dots of x rounded per group of 32 with the file's
    codes (exact integers), times the file's scale and x's step; each row's ``top`` largest are the float32 product
    of x itself with the file's q·d. Only the float32 sums' order may differ from the float64 arithmetic by hand.
    float16 scales (a tied token table's own) give the same bits as float32 ones; a bias; one row as in a batch."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize, quantize

    generator = torch.Generator().manual_seed(outputs)
    raw = quantize(torch.randn(outputs, inputs, generator=generator).numpy(), GGMLQuantizationType.Q8_0)
    groups, bias = q8_0(raw), torch.randn(outputs, generator=generator)
    module = Q8DotHead(groups, bias, CPU, top=8)
    x = torch.randn(rows, inputs, generator=generator)
    x[0, :32] = 0  # a group of zeros: step 0
    x[-1, -1] = 30.0  # an outlier widens its own group's step only
    got = module(x).double()
    weight = torch.from_numpy(dequantize(raw, GGMLQuantizationType.Q8_0)).double()  # (N, K): the file's
    q, step = _rounded_per_group(x)
    codes = groups.codes.view(outputs, -1, 32).double()  # (N, G, 32)
    dots = torch.einsum("mgk,ngk->mng", q, codes)  # (M, N, G): exact integers
    by_hand = (dots * groups.scale.double()[None] * step[..., 0][:, None]).sum(-1) + bias.double()  # (M, N)
    exact = x.double() @ weight.t() + bias.double()
    sums = inputs * 2.0**-23 * (x.abs().double() @ weight.abs().t() + bias.abs().double())  # float32 sums, any order
    dots_only = torch.ops.llmx.q8_q8_linear(x, groups.codes, groups.scale) + bias  # (M, N): what the module ranks
    assert bool(((dots_only.double() - by_hand).abs() <= sums).all())  # every output: int8 dots
    top = torch.zeros_like(got, dtype=torch.bool).scatter(-1, dots_only.topk(8, dim=-1).indices, True)  # (M, N)
    assert bool(((got - exact).abs() <= sums)[top].all())  # its top 8 again: x itself, no rounding
    assert torch.equal(got[~top], dots_only.double()[~top]) and int(top.sum()) == 8 * rows
    half = Q8DotHead(Int8Groups(groups.codes, groups.scale.to(torch.float16)), bias, CPU, top=8)
    assert torch.equal(half(x), module(x))  # Q8_0's scales are float16 values: the same numbers either way
    assert torch.equal(module(x), torch.cat([module(x[i : i + 1]) for i in range(rows)]))
    assert torch.equal(module.dense_weight(), weight.float())


@needs_q8dot
def test_the_q8dot_kernels_refuse_what_they_cannot_multiply():
    """Wrong shapes, dtypes or indices are a clear error from the op, not a read past its tensors."""
    native.load()
    codes, scale = torch.zeros(40, 64, dtype=torch.int8), torch.ones(40, 2)
    x = torch.zeros(3, 64)
    with pytest.raises(RuntimeError, match="out of range for 40 rows"):
        torch.ops.llmx.q8_rows_at(x, codes, scale, torch.tensor([[0], [40], [1]]))
    with pytest.raises(RuntimeError, match="x has 32 columns and the weights 64"):
        torch.ops.llmx.q8_q8_linear(torch.zeros(3, 32), codes, scale)
    with pytest.raises(RuntimeError, match="scale: \\(N, K/32\\)"):
        torch.ops.llmx.q8_q8_linear(x, codes, torch.ones(40, 3))
    with pytest.raises(RuntimeError, match="x: \\(M, K\\) float32"):
        torch.ops.llmx.q4_q8_linear(x.double(), torch.zeros(40, 32, dtype=torch.uint8), scale.half(), scale.t().half())
    with pytest.raises(RuntimeError, match="low: \\(K/32, N\\)"):  # a group's lows of all rows side by side
        torch.ops.llmx.q4_q8_linear(x, torch.zeros(40, 32, dtype=torch.uint8), scale.half(), scale.half())


@needs_q8dot
def test_the_q8dot_output_matrix_is_the_token_tables_own_codes():
    """Tied (the output matrix is the token table): one copy of the codes and scales, the file's float16 ones."""
    engine = tiny_engine("llama")
    weights = _gguf_weights(engine.model)
    weights["lm_head"] = weights["embed"]  # one tensor in the file, as SmolLM2's and Gemma's
    engine.model.quantization = quantize_model(engine.model, "gguf", weights, kernel="q8dot")
    head = engine.model.lm_head
    assert isinstance(head, Q8DotHead) and head.group_codes is engine.model.embed.codes
    assert head.group_scale is engine.model.embed.scale and head.group_scale.dtype == torch.float16
    assert "8-bit groups (Q8_0 with int8 inputs; the top 64 logits with float inputs)" in engine.weights_description


def test_the_q8dot_engine_line_names_what_each_kind_of_matrix_takes():
    """The inputs each product takes, from the kinds of matrix built (Gemma's file: Q4_K groups, Q5_0 and Q6_K
    re-quantized to 8-bit rows, the Q8_0 output matrix; SmolLM2's: Q4_1 groups and the output matrix)."""
    gemma = QuantSummary("gguf", kernel="q8dot", kernel_reason="chosen for AVX2")
    gemma.layers.update(
        {
            "4-bit groups (Q4_K; scales rounded to float16)": 27,
            "8-bit rows (re-quantized from Q5_0)": 27,
            "8-bit groups (Q8_0 with int8 inputs; the top 64 logits with float inputs)": 1,
        }
    )
    assert gemma.describe().endswith(
        "int8 inputs (per group of 32) to the 4-bit matmuls and the output matrix, bfloat16 inputs to the 8-bit rows, "
        "float32 everywhere else"
    )
    rows_only = QuantSummary("gguf", kernel="q8dot", kernel_reason="asked for")
    rows_only.layers.update({"8-bit rows (re-quantized from Q6_K)": 2, "8-bit groups (Q8_0, exact)": 1})
    assert rows_only.describe().endswith(
        "bfloat16 inputs to the 8-bit rows and the exact 8-bit groups, float32 everywhere else"
    )


def test_q8dot_says_why_it_cannot_run(monkeypatch, tmp_path):
    """No AVX2 (ARM, or ``ATEN_CPU_CAPABILITY=default``), or no compiler to build it: a clear reason, and loading a
    model on it is a clear error, not a crash."""
    monkeypatch.setattr(native.torch.backends.cpu, "get_cpu_capability", lambda: "DEFAULT")
    assert native.cpu_problem() == "our q8dot kernel needs AVX2 and torch dispatches to DEFAULT here"
    assert kernel_problem(CPU, "q8dot") == native.cpu_problem()
    with pytest.raises(QuantizationError, match="our q8dot kernel needs AVX2"):
        _on_kernel("q8dot")
    monkeypatch.undo()
    monkeypatch.setattr(native, "library_path", lambda: tmp_path / "absent" / "libllmx_q8dot.so")
    looked = []
    monkeypatch.setattr(native, "_compiler", lambda: looked.append("g++") or None)
    monkeypatch.setattr(native, "_load", native._load.__wrapped__)  # not the process's loaded library
    monkeypatch.setattr(native, "_FAILED", {})
    if native.cpu_problem() is None:
        assert native.problem() == "building our q8dot kernel needs a C++ compiler (g++) and this machine has none"
        assert native.problem() == native.problem() and looked == ["g++"]  # the failure kept: looked for once
        monkeypatch.setattr(native, "_FAILED", {})
        monkeypatch.setattr(native, "_compiler", lambda: "false")  # a compiler that fails, saying nothing
        assert native.problem() == "building our q8dot kernel failed (exit 1)"
        assert not list((tmp_path / "absent").glob("*.so*"))  # nothing half-built is left to be loaded later
