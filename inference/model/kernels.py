"""Which kernel multiplies by a GGUF's weight groups, chosen at load by what the CPU has, and the modules of the new ones.

Only ``quant="gguf"`` chooses: ``"int4"`` and ``"int8"`` exist to show what quantizing does, on torch's own kernels.

Owns ``KERNELS`` (the choices, in words), ``default_kernel`` (the choice for this machine: the probe
``cpu_capability`` is the only place it and ``machine_name`` look; ``kleidiai_available`` says whether the
KleidiAI choice runs on its real kernels here), and
``KleidiAILinear``, ``Q8DotLinear`` and ``Q8DotHead``, which ``quant.quantize_model`` builds instead of
``quant.Int4Linear`` (and, for the output matrix, ``quant.TopExactInt8Linear``) when that kernel is chosen
(``"int8rows"`` builds ``quant.Int8Linear``). The choices:

- ``"int4pack"``: torch's packed 4-bit kernel (``_weight_int4pack_mm_for_cpu``, bfloat16 inputs),
  which the compiled step replaces by inductor's weight-only micro-GEMM. That template is written for
  AVX-512 only, so this is the default where ATen dispatches to AVX-512 (and on CUDA).
- ``"int8rows"``: torch's 8-bit kernel (``_weight_int8pack_mm``, bfloat16 inputs) on the file's weights
  re-quantized on load to 8 bits with one scale per row (``quant_formats.int8_rows_from_float`` of the
  decoded blocks); the Q8_0 output matrix through the same kernel, re-quantized per row too, with each row's
  top 64 logits recomputed from the file's groups (``quant.TopExactInt8Linear``). Not exact: a row's scale
  cannot hold Q4_1's scale and minimum per group, so each weight moves by up to half a step of
  max|row|/127 (a small share of Q4_1's own step); the accuracy against float32 is measured in
  docs/benchmarks.md. Per product it takes 0.5–0.6× the time of the packed 4-bit kernel on AVX2. The
  default on every CPU without AVX-512 where ``q8dot`` cannot run (ARM: see the next item; AVX2 without a compiler).
- ``"kleidiai"``: ``KleidiAILinear``, ATen's ``_dyn_quant_matmul_4bit`` (Arm's KleidiAI micro-kernels on
  aarch64: activations quantized to int8 per row on the fly, int8 dots with the 4-bit codes, a
  bfloat16 scale per group of 32). The kernel is symmetric, so Q4_1's minimum is added back exactly as
  a per-group correction from the activations' group sums. Real where torch reports KleidiAI
  (``torch.backends.kleidiai.is_available()``); elsewhere ATen runs a reference version of the same
  arithmetic, which is what the tests check here. Q8_0 matrices keep torch's packed kernel under it.
  Offered, not a default: through that reference version its int8 inputs (one scale per row) missed the
  accuracy budget on SmolLM2 (top-1 97.8 %, mean KL 1.1e-2 against float32; the budget is 99 % and
  2e-3), and its speed on ARM is not measured here.

- ``"q8dot"``: ``Q8DotLinear``, our own kernel (``native``: ``csrc/q8dot.cpp``, built once per machine with
  its C++ compiler): llama.cpp's arithmetic on the file's own blocks. The 4-bit codes stay packed with a float16
  scale and low per group of 32 (Q4_0's and Q4_1's exactly as stored), the inputs are rounded to int8 per group of
  32 on the fly, and each group's dot is an exact int32 sum (AVX2 ``maddubs``). The Q8_0 output matrix the same
  way (``Q8DotHead``: the file's int8 codes and scales, int8 inputs), each row's top 64 logits then computed again
  with the float inputs. The compiled step calls the kernels' C entry points directly. Needs AVX2 and a compiler;
  reads 0.625 bytes a 4-bit weight where ``int8rows`` reads 1, and keeps no second copy of the output matrix. The
  default on AVX2: faster than llama.cpp there within the same accuracy budget (docs/benchmarks.md).

An exact float32 formulation (the int8 codes with each group's scale and zero, as tensor ops that inductor
compiles into the step) was measured too and left out: ~10× slower than the packed kernels. Measured in
``inference/bench/kernels.py``; the figures and how an AVX2 machine was emulated are in
docs/benchmarks.md.
"""

from __future__ import annotations

import torch
from torch import nn

from .quant_formats import GROUP, HeldInt8Groups, Int4Groups, Int8Groups

KERNELS = {
    "int4pack": "torch's packed 4-bit kernel (bfloat16 inputs; inductor's AVX-512 template when compiled)",
    "int8rows": "torch's 8-bit kernel on the blocks re-quantized to 8 bits per row (bfloat16 inputs)",
    "kleidiai": "KleidiAI's 4-bit kernel (int8 inputs per row, bfloat16 group scales)",
    "q8dot": "our AVX2 kernel: the file's 4-bit codes times int8 inputs per group of 32 (llama.cpp's arithmetic)",
}


def cpu_capability() -> str:
    """The instruction set ATen dispatches to ("AVX512", "AVX2", "DEFAULT", ...; ``ATEN_CPU_CAPABILITY`` lowers it)."""
    return torch.backends.cpu.get_cpu_capability()


def kleidiai_available() -> bool:
    """Whether this torch runs ``_dyn_quant_matmul_4bit`` on KleidiAI's kernels (aarch64 builds with it)."""
    backend = getattr(torch.backends, "kleidiai", None)
    return bool(backend is not None and backend.is_available())


def q8dot_problem() -> str | None:
    """Why our ``q8dot`` kernel cannot run here (``native.problem``: no AVX2, no compiler, a failed build), None when
    it can (built and loaded now if it was not)."""
    from . import native

    return native.problem()


def default_kernel(device: torch.device) -> str:
    """The kernel for ``device``'s weight groups: see the module docstring for why each."""
    if device.type != "cpu":
        return "int4pack"
    capability = cpu_capability()
    if capability.startswith("AVX512"):
        return "int4pack"
    if capability == "AVX2" and q8dot_problem() is None:
        return "q8dot"
    return "int8rows"


def default_reason(device: torch.device) -> str:
    """Why ``default_kernel`` chose what it did, in words ("chosen for AVX2", and why not ``q8dot`` where it fell
    back from it)."""
    reason = f"chosen for {machine_name(device)}"
    if device.type == "cpu" and cpu_capability() == "AVX2":
        problem = q8dot_problem()
        if problem:
            reason += f"; q8dot cannot run: {problem}"
    return reason


def machine_name(device: torch.device) -> str:
    """The machine in the words the choice depends on ("AVX2", "AVX512", "DEFAULT", "cuda")."""
    return device.type if device.type != "cpu" else cpu_capability()


class KleidiAILinear(nn.Module):
    """y = x @ W.T + b through ``_dyn_quant_matmul_4bit``: the symmetric part d·(q - 8) in the kernel, the zero apart.

    ``w = (q - 8)·d + zero``, so ``x·w = kernel(x) + Σ_g zero_g · Σ_{k in g} x_k``: the second term is a
    (M, K/32) @ (K/32, N) product, 1/32 of the kernel's work, in float32.
    """

    def __init__(self, groups: Int4Groups, bias: torch.Tensor | None, device: torch.device) -> None:
        super().__init__()
        self.out_features, self.in_features = groups.codes.shape
        if self.in_features % GROUP:
            raise ValueError(f"weight groups need an input size divisible by {GROUP}, got {self.in_features}")
        codes = groups.codes  # (N, K) 0..15: the kernel's unsigned codes with 8 as zero
        nibbles = (codes[:, 1::2] << 4 | codes[:, ::2]).to(torch.uint8)  # (N, K/2): even index in the low nibble
        scale = groups.scale.to(torch.bfloat16)  # (N, K/32): the kernel's group scales are bfloat16
        self.register_buffer(
            "packed",
            torch.ops.aten._dyn_quant_pack_4bit_weight(
                nibbles.to(device), scale.to(device), None, GROUP, self.in_features, self.out_features
            ),
        )
        self.register_buffer("zero", groups.zero.to(device, torch.float32).contiguous())  # (N, K/32)
        self.bias = None if bias is None else nn.Parameter(bias.detach().float().to(device), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k, n = self.in_features, self.out_features
        flat = x.reshape(-1, k).float()  # (M, K)
        y = torch.ops.aten._dyn_quant_matmul_4bit(flat, self.packed, GROUP, k, n)  # (M, N)
        y = y + flat.view(flat.shape[0], k // GROUP, GROUP).sum(-1) @ self.zero.t()  # (M, G) @ (G, N)
        if self.bias is not None:
            y = y + self.bias
        return y.to(x.dtype).view(*x.shape[:-1], n)

    def dense_weight(self) -> torch.Tensor:
        """The weights (N, K) the kernel and the correction multiply by, read back through them: a row of the
        identity quantizes to int8 exactly (its one 1 is the row's maximum), so each column comes back as stored."""
        identity = torch.eye(self.in_features, device=self.packed.device)  # (K, K)
        bias, self.bias = self.bias, None
        try:
            return self(identity).t().contiguous()  # (N, K)
        finally:
            self.bias = bias

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, 4-bit groups of {GROUP} (KleidiAI)"


class Q8DotLinear(nn.Module):
    """y = x @ W.T + b through our kernel (``native``, ``torch.ops.llmx.q4_q8_linear``): W as the file's 4-bit codes
    with a float16 scale and low per group of 32 (``w = scale·q + low``: Q4_1's own d and m exactly), x quantized to
    int8 per group of 32 on the fly, each group's dot exact in int32 (llama.cpp's Q8_1 × Q4_1 arithmetic)."""

    def __init__(self, groups: Int4Groups, bias: torch.Tensor | None, device: torch.device) -> None:
        from . import native

        super().__init__()
        native.load()
        self.out_features, self.in_features = groups.codes.shape
        if self.in_features % GROUP:
            raise ValueError(f"weight groups need an input size divisible by {GROUP}, got {self.in_features}")
        n, k = groups.codes.shape
        codes = groups.codes.view(n, k // GROUP, 2, GROUP // 2)  # (N, K/32, 2, 16): each group's halves
        packed = (codes[:, :, 1] << 4 | codes[:, :, 0]).to(torch.uint8)  # (N, K/32, 16): code j low, 16 + j high
        self.register_buffer("codes", packed.reshape(n, k // 2).contiguous().to(device))  # (N, K/2)
        self.register_buffer("scale", groups.scale.to(device, torch.float16).contiguous())  # (N, K/32)
        low = groups.zero - 8 * groups.scale  # w = (q - 8)·scale + zero = q·scale + low
        self.register_buffer(
            "low", low.t().to(device, torch.float16).contiguous()
        )  # (K/32, N): a group's rows side by side
        self.bias = None if bias is None else nn.Parameter(bias.detach().float().to(device), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features).float()  # (M, K)
        y = torch.ops.llmx.q4_q8_linear(flat, self.codes, self.scale, self.low)  # (M, N)
        if self.bias is not None:
            y = y + self.bias
        return y.to(x.dtype).view(*x.shape[:-1], self.out_features)  # (..., N)

    def dense_weight(self) -> torch.Tensor:
        """The weights (N, K) the kernel multiplies by: scale·q + low, from the codes and float16 stores."""
        n, k = self.out_features, self.in_features
        packed = self.codes.view(n, k // GROUP, GROUP // 2)  # (N, K/32, 16)
        codes = torch.cat([packed & 0xF, packed >> 4], dim=-1).float()  # (N, K/32, 32)
        weights = codes * self.scale.float()[..., None] + self.low.float().t()[..., None]  # (N, K/32, 32)
        return weights.reshape(n, k)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, 4-bit groups of {GROUP} (int8 dots)"


class Q8DotHead(HeldInt8Groups, nn.Module):
    """The Q8_0 output matrix through our kernel: every logit from the file's codes and scales times x rounded to int8
    per group of 32 (``torch.ops.llmx.q8_q8_linear``, llama.cpp's Q8_0 × Q8_0 arithmetic); then each row's ``top``
    largest (the greedy token, the candidates the pages list, nearly all of the probability) computed again from the
    same codes and scales with x itself, in float32 (``q8_rows_at``), and put in their places. ``groups`` is the
    file's codes and scales (the token table's own when tied: one copy of each), and ``dense_weight`` their weights."""

    def __init__(self, groups: Int8Groups, bias: torch.Tensor | None, device: torch.device, top: int) -> None:
        from . import native

        super().__init__()
        native.load()
        self.out_features, self.in_features = groups.codes.shape
        if self.in_features % GROUP:
            raise ValueError(f"weight groups need an input size divisible by {GROUP}, got {self.in_features}")
        self.top = min(top, self.out_features)
        self.register_buffer("group_codes", groups.codes.to(device).contiguous())  # (N, K) int8: the file's codes
        self.register_buffer("group_scale", groups.scale.to(device).contiguous())  # (N, K/32): the file's scales
        self.bias = None if bias is None else nn.Parameter(bias.detach().float().to(device), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features).float()  # (M, K)
        y = torch.ops.llmx.q8_q8_linear(flat, self.group_codes, self.group_scale)  # (M, N)
        if self.bias is not None:
            y = y + self.bias
        top = y.topk(self.top, dim=-1).indices  # (M, T): the outputs as the layer returns them, ranked
        exact = torch.ops.llmx.q8_rows_at(flat, self.group_codes, self.group_scale, top)  # (M, T)
        if self.bias is not None:
            exact = exact + self.bias[top]
        y = y.scatter(-1, top, exact)  # (M, N)
        return y.to(x.dtype).view(*x.shape[:-1], self.out_features)  # (..., N)

    def dense_weight(self) -> torch.Tensor:
        """The weights (N, K) every output is computed with: the groups' q · d (x rounded for all but the top)."""
        return self.groups.dequantize()

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, 8-bit groups of {GROUP} (int8 dots), "
            f"the top {self.top} outputs with float inputs"
        )
