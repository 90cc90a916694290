"""Quantized weights in the forward pass: the modules, the kernel check, and swapping them into a model.

Owns ``Int4Linear`` (torch's 4-bit group-of-32 kernel), ``Int8Linear`` (torch's per-channel
8-bit kernel), ``Int8GroupLinear`` (Q8_0's 8-bit groups of 32, one kernel call per group), ``TopExactInt8Linear``
(the Q8_0 output matrix on the 8-bit kernel with its top logits recomputed exactly), ``QuantEmbedding`` (the GGUF's Q8_0 token rows, looked up exactly), the
check that the kernels exist and give the right numbers on this machine, and
``quantize_model``, which replaces a dense ``Transformer``'s projections in place:

- ``quant="gguf"``: the file's own blocks. Q4_0 / Q4_1 / Q4_K become 4-bit groups exactly and
  Q8_0 (SmolLM2's tied embedding and output matrix) 8-bit groups exactly, with each group's
  scale and zero rounded to bfloat16 (the kernels' format); the Q8_0 token embedding is looked
  up exactly; other block types (Q5_0, Q6_K, …) are re-quantized to per-row 8-bit; float
  tensors stay float.
- ``quant="int8"``: every projection and the output matrix as per-row 8-bit codes.
- ``quant="int4"``: every projection as 4-bit groups of 32 (min/max), the output matrix 8-bit.

Which kernel multiplies by the 4-bit and Q8_0 groups is chosen at load by what the CPU has
(``kernels.py``: torch's packed 4-bit kernel on AVX-512, its 8-bit kernel on the blocks re-quantized per
row on AVX2, KleidiAI on aarch64), or named by the caller (``kernel=``); ``QuantSummary`` says which.
Activations stay float32 everywhere (the residual stream, norms, attention, the KV cache);
with the packed kernels (``Int4Linear``, ``Int8Linear``, ``Int8GroupLinear``) a quantized matmul's
input is rounded to bfloat16, which is what they take, and its output comes back as bfloat16 and
is widened again. The weight arithmetic lives in ``quant_formats.py``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from .errors import ModelLoadError
from .kernels import KERNELS, KleidiAILinear, Q8DotHead, Q8DotLinear, default_kernel, default_reason
from .quant_formats import (
    GROUP,
    INT4_FORMATS,
    INT8_FORMATS,
    HeldInt8Groups,
    Int4Groups,
    Int8Groups,
    Int8Rows,
    int4_from_float,
    int8_rows_from_float,
    split_int8_groups,
)

QUANT_MODES = ("gguf", "int8", "int4")
ACTIVATION_DTYPE = torch.bfloat16  # what torch's CPU int4/int8 kernels are fast with


class QuantizationError(ModelLoadError):
    """A quantized mode cannot run here (missing kernel, wrong numbers, unsupported layout)."""


# -- kernels ----------------------------------------------------------------------------------------
def _pack_int4(codes: torch.Tensor, device: torch.device) -> torch.Tensor:
    """(N, K) uint8 codes 0..15 -> the kernel's packed layout on ``device``."""
    if device.type == "cuda":
        paired = (codes[:, ::2] << 4 | codes[:, 1::2]).to(torch.uint8)  # (N, K/2): even index in the high nibble
        k = codes.shape[1]
        inner_k_tiles = 8 if k % 128 == 0 else 4 if k % 64 == 0 else 2  # the kernel wants K a multiple of 16 tiles
        return torch.ops.aten._convert_weight_to_int4pack(paired.to(device), inner_k_tiles)
    return torch.ops.aten._convert_weight_to_int4pack_for_cpu(codes.to(torch.int32), 2)


def _int4_matmul(x: torch.Tensor, packed: torch.Tensor, scales_zeros: torch.Tensor) -> torch.Tensor:
    """x (M, K) bf16 @ W.T with W from 4-bit groups: (M, N) bf16."""
    if x.is_cuda:
        return torch.ops.aten._weight_int4pack_mm(x, packed, GROUP, scales_zeros)
    return torch.ops.aten._weight_int4pack_mm_for_cpu(x, packed, GROUP, scales_zeros)


def kernel_problem(device: torch.device, kernel: str = "int4pack") -> str | None:
    """Why the quantized kernels cannot be trusted on ``device`` (None: they exist and give the right numbers).

    Runs each kernel once on a small random layer and compares it with the dense product of the
    same weights, within the rounding of bfloat16 inputs and outputs (``kernel``: which 4-bit kernel;
    the 8-bit rows of ``quant="int8"`` are checked with every one).
    """
    ops = (
        ("_weight_int4pack_mm", "_convert_weight_to_int4pack")
        if device.type == "cuda"
        else ("_weight_int4pack_mm_for_cpu", "_convert_weight_to_int4pack_for_cpu", "_weight_int8pack_mm")
    )
    if kernel == "kleidiai":
        ops = (*ops, "_dyn_quant_pack_4bit_weight", "_dyn_quant_matmul_4bit")
    if kernel == "q8dot":
        from . import native

        problem = native.problem()
        if problem:
            return problem
    missing = [op for op in ops if not hasattr(torch.ops.aten, op)]
    if missing:
        return f"torch {torch.__version__} has no {', '.join(missing)} kernel"
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(64, 128, generator=generator)
    x = torch.randn(3, 128, generator=generator)
    groups, rows = int4_from_float(weight), int8_rows_from_float(weight)
    layers = [(Int4Linear(groups, None, device), _as_kernel_stores(groups).dequantize())]
    if kernel == "kleidiai":  # int8 activations: checked within their own rounding below
        layers.append((KleidiAILinear(groups, None, device), None))
    if kernel == "q8dot":
        layers.append((Q8DotLinear(groups, None, device), "per group"))
    if device.type != "cuda":
        layers.append(
            (Int8Linear(rows, None, device), rows.codes.float() * rows.scale.to(ACTIVATION_DTYPE).float()[:, None])
        )
        q8 = Int8Groups(rows.codes, rows.scale[:, None].expand(-1, weight.shape[1] // GROUP).contiguous())
        split = Int8GroupLinear(q8, None, device)  # the output matrix's 8-bit groups, as one 4-bit call
        layers.append((split, split.dense_weight()))
        if kernel == "q8dot":  # the output matrix's int8 dots (its top outputs with float inputs)
            layers.append((Q8DotHead(q8, None, device, top=8), "per group"))
    for layer, dense in layers:
        try:
            got = layer(x.to(device)).float().cpu()
        except RuntimeError as exc:
            return f"{type(layer).__name__} failed on {device}: {str(exc).splitlines()[0]}"
        if dense is None:  # KleidiAI: x rounded to int8 per row (a step of max|x|/127 at most), weights as stored
            dense = groups.dequantize()
            expected = x @ dense.t()
            bound = 4 * float(x.abs().amax()) / 127 * float(dense.abs().sum(1).max())
        elif isinstance(dense, str):  # q8dot: x rounded to int8 per group (half a step of max|x_g|/127 at most)
            dense = layer.dense_weight()
            expected = x @ dense.t()
            steps = x.abs().view(len(x), -1, GROUP).amax(-1) / 254  # (M, K/32): half of each group's step
            weights = dense.abs().view(len(dense), -1, GROUP).sum(-1)  # (N, K/32)
            bound = float((steps @ weights.t()).max()) * 1.01 + 2.0**-20 * float((x.abs() @ dense.abs().t()).max())
        else:
            expected = x.to(ACTIVATION_DTYPE).float() @ dense.t()
            # the output is rounded to bf16 (relative 2**-9); sums of 128 terms may be taken in any order
            bound = 4 * 2.0**-8 * float((x.abs() @ dense.abs().t()).max())
        if not torch.isfinite(got).all() or float((got - expected).abs().max()) > bound:
            return f"{type(layer).__name__} gives wrong numbers on {device} (torch {torch.__version__})"
    return None


def _as_kernel_stores(groups: Int4Groups) -> Int4Groups:
    """The same groups with scale and zero rounded to bfloat16, as the 4-bit kernel holds them."""
    return Int4Groups(groups.codes, groups.scale.to(ACTIVATION_DTYPE).float(), groups.zero.to(ACTIVATION_DTYPE).float())


# -- modules ------------------------------------------------------------------------------------------
def _fixed_bias(bias: torch.Tensor | None, device: torch.device) -> nn.Parameter | None:
    """A layer's bias kept in float32 beside its quantized weights, never trained."""
    return None if bias is None else nn.Parameter(bias.detach().float().to(device), requires_grad=False)


class _QuantLinear(nn.Module):
    """What every quantized linear does around its kernel: the input flattened to rows in bfloat16, the kernel's
    product (``_product``), cast back to the input's dtype, plus the bias, reshaped to the input's leading dims."""

    in_features: int
    out_features: int
    bias: nn.Parameter | None
    layout = ""  # the weights' form, as the module's repr names it

    def _product(self, flat: torch.Tensor) -> torch.Tensor:
        """(M, K) bfloat16 rows times W.T: (M, N)."""
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features).to(ACTIVATION_DTYPE)  # (M, K)
        y = self._product(flat).to(x.dtype)  # (M, N)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*x.shape[:-1], self.out_features)  # (..., N)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, {self.layout}"


class Int4Linear(_QuantLinear):
    """y = x @ W.T + b with W held as 4-bit codes in groups of 32 (``w = (q - 8)·scale + zero``)."""

    layout = f"4-bit groups of {GROUP}"

    def __init__(self, groups: Int4Groups, bias: torch.Tensor | None, device: torch.device) -> None:
        super().__init__()
        self.out_features, self.in_features = groups.codes.shape
        if self.in_features % GROUP:
            raise QuantizationError(f"a 4-bit layer needs an input size divisible by {GROUP}, got {self.in_features}")
        self.register_buffer("packed", _pack_int4(groups.codes, device))
        scales_zeros = torch.stack([groups.scale.t(), groups.zero.t()], dim=-1)  # (K/32, N, 2)
        self.register_buffer("scales_zeros", scales_zeros.contiguous().to(device, ACTIVATION_DTYPE))
        self.bias = _fixed_bias(bias, device)

    def _product(self, flat: torch.Tensor) -> torch.Tensor:
        return _int4_matmul(flat, self.packed, self.scales_zeros)  # (M, N)

    def dense_weight(self) -> torch.Tensor:
        """The weights (N, K) the kernel multiplies by, read back through the kernel (rounded to bfloat16)."""
        identity = torch.eye(self.in_features, dtype=ACTIVATION_DTYPE, device=self.packed.device)  # (K, K)
        return _int4_matmul(identity, self.packed, self.scales_zeros).float().t()  # (N, K)


class Int8Linear(_QuantLinear):
    """y = x @ W.T + b with W held as 8-bit codes and one scale per output row."""

    layout = "8-bit rows"

    def __init__(self, rows: Int8Rows, bias: torch.Tensor | None, device: torch.device) -> None:
        super().__init__()
        self.out_features, self.in_features = rows.codes.shape
        self.register_buffer("codes", rows.codes.to(device))
        self.register_buffer("scale", rows.scale.to(device, ACTIVATION_DTYPE))
        if device.type == "cuda":  # no CUDA 8-bit kernel in torch: the dense bfloat16 product of the same weights
            self.register_buffer("dense", (self.codes.to(ACTIVATION_DTYPE) * self.scale[:, None]).contiguous())
        self.bias = _fixed_bias(bias, device)

    def _product(self, flat: torch.Tensor) -> torch.Tensor:
        if flat.is_cuda:
            return flat @ self.dense.t()  # (M, N)
        return torch.ops.aten._weight_int8pack_mm(flat, self.codes, self.scale)  # (M, N)

    def dense_weight(self) -> torch.Tensor:
        """The weights (N, K) the kernel multiplies by (the row scale as the kernel holds it, in bfloat16)."""
        return self.codes.float() * self.scale.float()[:, None]


class Int8GroupLinear(_QuantLinear):
    """y = x @ W.T with W held as 8-bit codes in column groups of 32, one scale per row and group (GGUF's Q8_0).

    torch has no 8-bit kernel with a scale per group, so the codes run through the 4-bit group kernel, in
    one call and exactly (``quant_formats.split_int8_groups``): each code q is 16·hi + lo with hi in
    -8..7 and lo in 0..15, the matrix becomes [16·d·hi | d·lo] (2K columns) and the input is fed twice,
    [x, x]. The kernel dequantizes in float32 and sums in float32, so it multiplies by q·d exactly (d
    rounded to bfloat16, as every kernel here holds its scales). ``groups`` (the codes as the file stores
    them) stays for ``dense_weight`` and is the same tensor a tied ``QuantEmbedding`` looks rows up in.
    On CUDA the product is dense bfloat16 on the same weights, built once.
    """

    layout = f"8-bit groups of {GROUP}"

    def __init__(self, groups: Int8Groups, bias: torch.Tensor | None, device: torch.device) -> None:
        super().__init__()
        self.out_features, self.in_features = groups.codes.shape
        self.groups = Int8Groups(groups.codes.to(device), groups.scale.to(device))  # for inspection, not a buffer
        if device.type == "cuda":
            self.register_buffer("dense", self.dense_weight().to(ACTIVATION_DTYPE))  # (N, K)
        else:
            split = split_int8_groups(groups)  # (N, 2K) 4-bit groups
            extra = -self.out_features % 16  # the kernel packs rows by 16: zero rows pad it, their outputs dropped
            split = Int4Groups(
                *(torch.cat([t, t.new_zeros(extra, t.shape[1])]) for t in (split.codes, split.scale, split.zero))
            )
            self.register_buffer("packed", _pack_int4(split.codes, device))
            scales_zeros = torch.stack([split.scale.t(), split.zero.t()], dim=-1)  # (2K/32, N, 2)
            self.register_buffer("scales_zeros", scales_zeros.contiguous().to(device, ACTIVATION_DTYPE))
        self.bias = _fixed_bias(bias, device)

    def _product(self, flat: torch.Tensor) -> torch.Tensor:
        if flat.is_cuda:
            return flat @ self.dense.t()  # (M, N)
        y = _int4_matmul(torch.cat([flat, flat], dim=-1), self.packed, self.scales_zeros)  # (M, 2K) -> (M, N')
        return y[:, : self.out_features]  # (M, N)

    def dense_weight(self) -> torch.Tensor:
        """The weights (N, K) the kernel multiplies by: q · d, with d rounded to bfloat16 as the kernel holds it."""
        return Int8Groups(self.groups.codes, self.groups.scale.to(ACTIVATION_DTYPE).float()).dequantize()


EXACT_TOP = 64  # outputs of each row that ``TopExactInt8Linear`` recomputes from the groups (docs/benchmarks.md)
EXACT_ROWS_AT_ONCE = 64  # input rows per recomputation outside a compiled graph: (64, 64, K) float32 at most


class TopExactInt8Linear(HeldInt8Groups, Int8Linear):
    """Q8_0 groups through torch's 8-bit row kernel, each row's ``top`` largest outputs recomputed exactly (``int8rows``).

    For the output matrix on AVX2: the row kernel takes one scale per row, so the groups are re-quantized to 8-bit
    rows (``int8_rows_from_float``) and every logit moves by that rounding; then the ``top`` logits the row kernel
    ranks highest (the greedy token, the candidates the pages list, nearly all of the probability) are computed
    again from the file's own codes and scales, in float32 (``q · d`` exact, as ``Int8GroupLinear`` multiplies), and
    put in their places. On AVX2 the row kernel takes ~0.4× the time of ``Int8GroupLinear``'s exact 4-bit call
    (docs/benchmarks.md); the recomputation reads ``top`` rows of the groups. ``groups`` is the file's codes and
    scales (the token table's own when tied), and ``dense_weight`` their weights: what the top outputs use.
    """

    def __init__(self, groups: Int8Groups, bias: torch.Tensor | None, device: torch.device, top: int = EXACT_TOP):
        super().__init__(int8_rows_from_float(groups.dequantize()), bias, device)
        self.top = min(top, self.out_features)
        self.layout = f"8-bit rows, the top {self.top} outputs exact from 8-bit groups of {GROUP}"
        self.register_buffer("group_codes", groups.codes.to(device))  # (N, K) int8: the file's codes
        self.register_buffer("group_scale", groups.scale.to(device))  # (N, K/32): the file's scales

    def _product(self, flat: torch.Tensor) -> torch.Tensor:
        y = super()._product(flat).float()  # (M, N): every output through the re-quantized rows
        ranked = y if self.bias is None else y + self.bias  # the outputs as the layer returns them (bias added after)
        top = ranked.topk(self.top, dim=-1).indices  # (M, T)
        if torch.compiler.is_compiling() or flat.shape[0] <= EXACT_ROWS_AT_ONCE:
            exact = self._exact(flat, top)
        else:  # a long prompt's rows in parts: the gathered weights are (rows, T, K) floats
            exact = torch.cat(
                [
                    self._exact(flat[start : start + EXACT_ROWS_AT_ONCE], top[start : start + EXACT_ROWS_AT_ONCE])
                    for start in range(0, flat.shape[0], EXACT_ROWS_AT_ONCE)
                ]
            )
        return y.scatter(-1, top, exact)  # (M, N)

    def _exact(self, flat: torch.Tensor, top: torch.Tensor) -> torch.Tensor:
        """(M, T): the outputs ``top`` (M, T) names, from the groups' codes and scales, summed in float32."""
        codes = self.group_codes[top].float()  # (M, T, K)
        scale = self.group_scale[top].float()  # (M, T, K/32)
        weight = (codes.unflatten(-1, (-1, GROUP)) * scale[..., None]).flatten(-2)  # (M, T, K/32, 32) -> (M, T, K)
        return (weight @ flat.float().unsqueeze(-1)).squeeze(-1)  # (M, T, K) @ (M, K, 1) -> (M, T)

    def dense_weight(self) -> torch.Tensor:
        """The weights (N, K) the top outputs are computed with: the groups' q · d (the rest: ``rows_weight``)."""
        return self.groups.dequantize()

    def rows_weight(self) -> torch.Tensor:
        """The re-quantized rows (N, K) every other output is computed with."""
        return super().dense_weight()


class QuantEmbedding(nn.Module):
    """Token rows held as Q8_0 (8-bit codes, one fp16 scale per 32): a lookup dequantizes only the rows it reads.

    The smallest exact form of the table: the file's int8 codes and its fp16 scales as stored (1.06 bytes a
    weight; 29 MiB for SmolLM2's 49,152 × 576), each row widened to float32 when it is read, where q · d is
    exact. Scales that are not fp16 values (a table quantized here) are kept in float32.
    """

    def __init__(self, groups: Int8Groups, device: torch.device) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim = groups.codes.shape
        self.register_buffer("codes", groups.codes.to(device))
        half = groups.scale.to(torch.float16)
        exact = torch.equal(half.float(), groups.scale)
        self.register_buffer("scale", (half if exact else groups.scale).to(device))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        codes = self.codes[ids].float()  # (..., D)
        scale = self.scale[ids].float()  # (..., D/32)
        return (codes.unflatten(-1, (-1, GROUP)) * scale[..., None]).flatten(-2)  # (..., D)

    @property
    def weight(self) -> torch.Tensor:
        """The whole matrix in float32, for inspection (the Embeddings page): built on each access."""
        return Int8Groups(self.codes, self.scale).dequantize()


# -- what was done, for the UI and the benchmark -------------------------------------------------------
@dataclass
class QuantSummary:
    mode: str  # "gguf", "int8" or "int4"
    layers: Counter = field(default_factory=Counter)  # "4-bit groups (Q4_1, exact)" -> how many matrices
    weight_bytes: int = 0  # bytes a forward reads for the quantized matrices (codes + scales)
    notes: list[str] = field(default_factory=list)
    kernel: str = "int4pack"  # what multiplies by the weight groups (``kernels.KERNELS``)
    kernel_reason: str = ""  # why that one: "chosen for AVX2" or "asked for"

    def _q8dot_inputs(self) -> str:
        """What q8dot's products take, from the kinds of matrix it built: int8 groups into its own kernel, bfloat16
        into torch's 8-bit kernels (what it re-quantized: Q5_0, Q6_K, ...; a Q8_0 matrix other than the output)."""
        own = ["the 4-bit matmuls"] if any(kind.startswith("4-bit groups") for kind in self.layers) else []
        own += ["the output matrix"] if any("with int8 inputs" in kind for kind in self.layers) else []
        parts = [f"int8 inputs (per group of 32) to {' and '.join(own)}"] if own else []
        torchs = [
            name
            for name, prefix in (
                ("the 8-bit rows", "8-bit rows"),
                ("the exact 8-bit groups", "8-bit groups (Q8_0, exact)"),
            )
            if any(kind.startswith(prefix) for kind in self.layers)
        ]
        if torchs:
            parts.append(f"bfloat16 inputs to {' and '.join(torchs)}")
        return ", ".join([*parts, "float32 everywhere else"])

    def describe(self) -> str:
        """In words, what the weights are, what multiplies by them, and what the activations are."""
        kinds = ", ".join(f"{count} × {kind}" for kind, count in self.layers.most_common())
        origin = {"gguf": "as stored in the file", "int8": "quantized on load", "int4": "quantized on load"}[self.mode]
        if self.mode == "gguf" and self.kernel == "int8rows":
            origin = "from the file's blocks"  # the 8-bit rows were re-quantized from them on load
        inputs = {
            "int4pack": "bfloat16 inputs to the quantized matmuls, float32 everywhere else",
            "int8rows": "bfloat16 inputs to the quantized matmuls, float32 everywhere else",
            "kleidiai": "int8 inputs (per row) to the 4-bit matmuls, float32 everywhere else",
            "q8dot": self._q8dot_inputs(),
        }[self.kernel]
        if self.mode != "gguf":  # quantized on load: torch's own kernels, no choice made
            return f"{kinds} ({origin}); {inputs}"
        return f"{kinds} ({origin}); kernel: {self.kernel} ({self.kernel_reason}); {inputs}"


# -- swapping a dense model's projections ----------------------------------------------------------------
@dataclass
class GGUFWeight:
    """One weight as a GGUF stores it: the block type and the raw bytes of each row (rows already in HF order)."""

    type_name: str  # "Q4_1", "Q8_0", "F32", ...
    raw: np.ndarray  # (rows, bytes per row) uint8, or (rows, K) float for float types

    def dequantize(self) -> torch.Tensor:
        """(rows, K) float32: the gguf package's own dequantization of these bytes."""
        from gguf import GGMLQuantizationType
        from gguf.quants import dequantize

        values = dequantize(self.raw, GGMLQuantizationType[self.type_name]).astype(np.float32)
        return torch.from_numpy(np.ascontiguousarray(values))


def quantize_model(
    model: nn.Module,
    mode: str,
    gguf_weights: dict[str, list[GGUFWeight]] | None = None,
    kernel: str | None = None,
) -> QuantSummary:
    """Replace ``model``'s projections (and, from a GGUF, its Q8_0 token embedding) with quantized modules.

    ``gguf_weights`` maps each engine projection name (``layers.3.attn.qkv``) to the GGUF
    weights stacked into it, in order (Q, K, V; gate, up); ``"embed"`` to the token rows.
    ``kernel`` (``kernels.KERNELS``) multiplies by the 4-bit and Q8_0 groups; None: the one
    ``kernels.default_kernel`` picks for this machine.
    """
    if mode not in QUANT_MODES:
        raise QuantizationError(f"quant must be one of {QUANT_MODES} or None, got {mode!r}")
    if mode == "gguf" and gguf_weights is None:
        raise QuantizationError('quant="gguf" keeps a GGUF file\'s own blocks: load a .gguf model for it')
    device = next(p.device for p in model.parameters() if not p.is_meta)  # meta: weights its blocks replace
    if kernel is not None and kernel not in KERNELS:
        raise QuantizationError(f"kernel must be one of {tuple(KERNELS)} or None (this machine's), got {kernel!r}")
    if mode != "gguf" and kernel not in (None, "int4pack"):  # int4 / int8 show what quantizing does: one kernel each
        raise QuantizationError(f'the {kernel!r} kernel is for quant="gguf"; quant={mode!r} runs torch\'s own kernels')
    reason = "asked for" if kernel else default_reason(device)
    kernel = kernel or (default_kernel(device) if mode == "gguf" else "int4pack")
    if kernel != "int4pack" and device.type != "cpu":
        raise QuantizationError(f"the {kernel!r} kernel runs on the CPU only; on {device} use kernel='int4pack'")
    problem = kernel_problem(device, kernel)
    if problem:
        raise QuantizationError(f"quantized weights cannot run here: {problem}. Load with quant=None (dense weights).")
    summary = QuantSummary(mode, kernel=kernel, kernel_reason=reason)
    for name, linear in list(_projections(model)):
        parts = gguf_weights.get(name) if gguf_weights else None
        replacement, kind = _quantized_linear(name, linear, mode, parts, device, kernel)
        _set_submodule(model, name, replacement)
        summary.layers[kind] += 1
        summary.weight_bytes += _buffer_bytes(replacement)
    embed = gguf_weights.get("embed") if gguf_weights else None
    if embed and embed[0].type_name in INT8_FORMATS:
        tied = (
            isinstance(model.lm_head, (Int8GroupLinear, TopExactInt8Linear, Q8DotHead))
            and embed[0] is gguf_weights["lm_head"][0]
        )
        rows = model.lm_head.groups if tied else INT8_FORMATS["Q8_0"](embed[0].raw)  # tied: one copy of the codes
        model.embed = QuantEmbedding(rows, device)
        if tied:  # the output matrix's inspection copy is the table's own codes and scales
            model.lm_head.groups = Int8Groups(model.embed.codes, model.embed.scale)
        summary.notes.append("token embedding: Q8_0 rows looked up exactly")
    return summary


FLOAT_TYPES = frozenset({"F32", "F16", "BF16"})  # GGUF tensors stored as floats: kept as the dense weights


def block_sourced(gguf_weights: dict[str, list[GGUFWeight]]) -> frozenset[str]:
    """The modules ``quantize_model`` builds from a GGUF's blocks alone, never reading their float weights.

    Every projection not stored as floats (its blocks kept, or re-quantized from their own decoding), and
    the token embedding when it is Q8_0 (looked up from its codes). The loader leaves these weights
    unread (``loader.build_model``'s ``from_blocks``).
    """
    names = {name for name, parts in gguf_weights.items() if name != "embed" and not _stored_as_floats(parts)}
    embed = gguf_weights.get("embed")
    if embed and embed[0].type_name in INT8_FORMATS:
        names.add("embed")
    return frozenset(names)


def _stored_as_floats(parts: list[GGUFWeight] | None) -> bool:
    return not parts or {p.type_name for p in parts} <= FLOAT_TYPES


def _projections(model: nn.Module):
    """Every projection a forward multiplies by: the blocks' linear layers, then the output matrix."""
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and name != "lm_head":
            yield name, module
    yield "lm_head", model.lm_head


def _group_linear(groups: Int4Groups, bias: torch.Tensor | None, device: torch.device, kernel: str) -> nn.Module:
    """A 4-bit group matrix as ``kernel`` multiplies it."""
    if kernel == "kleidiai":
        return KleidiAILinear(groups, bias, device)
    if kernel == "q8dot":
        return Q8DotLinear(groups, bias, device)
    if kernel == "int8rows":
        return Int8Linear(int8_rows_from_float(groups.dequantize()), bias, device)
    return Int4Linear(groups, bias, device)


def _quantized_linear(
    name: str, linear: nn.Linear, mode: str, parts: list[GGUFWeight] | None, device: torch.device, kernel: str
) -> tuple[nn.Module, str]:
    weight, bias = linear.weight.detach(), linear.bias
    if mode == "int8" or (mode == "int4" and name == "lm_head"):  # the output matrix stays 8-bit: logits are sensitive
        return Int8Linear(int8_rows_from_float(weight), bias, device), "8-bit rows"
    if mode == "int4":
        if weight.shape[1] % GROUP:
            return Int8Linear(
                int8_rows_from_float(weight), bias, device
            ), "8-bit rows (input size not a multiple of 32)"
        return Int4Linear(int4_from_float(weight), bias, device), "4-bit groups of 32"
    # mode == "gguf": the file's own blocks where they map exactly
    if _stored_as_floats(parts):
        return linear, "float (as stored)"
    types = {p.type_name for p in parts}
    if types <= set(INT4_FORMATS):
        groups = Int4Groups.cat([INT4_FORMATS[p.type_name](p.raw) for p in parts])
        origin = "/".join(sorted(types))
        if kernel == "int8rows":
            return _group_linear(groups, bias, device, kernel), f"8-bit rows (re-quantized from {origin})"
        module = _group_linear(groups, bias, device, kernel)
        if kernel == "q8dot" and not _holds_in_float16(groups.scale, groups.zero - 8 * groups.scale):
            return module, f"4-bit groups ({origin}; scales rounded to float16)"  # Q4_K's scale × sub-scale
        return module, f"4-bit groups ({origin}, exact)"
    if types <= set(INT8_FORMATS):
        groups = INT8_FORMATS["Q8_0"](parts[0].raw) if len(parts) == 1 else _cat_int8([p.raw for p in parts])
        if kernel == "q8dot" and name == "lm_head":  # int8 dots, the logits that decide with float inputs
            module = Q8DotHead(groups, bias, device, top=EXACT_TOP)
            return module, f"8-bit groups (Q8_0 with int8 inputs; the top {module.top} logits with float inputs)"
        if kernel == "int8rows" and name == "lm_head":  # the logits that decide exact, the rest rows
            module = TopExactInt8Linear(groups, bias, device)
            return module, f"8-bit rows (re-quantized from Q8_0; the top {module.top} logits exact)"
        # KleidiAI's kernel is 4-bit only; any other Q8_0 matrix stays exact everywhere
        return Int8GroupLinear(groups, bias, device), "8-bit groups (Q8_0, exact)"
    rows = int8_rows_from_float(torch.cat([p.dequantize() for p in parts]))
    return Int8Linear(rows, bias, device), f"8-bit rows (re-quantized from {'/'.join(sorted(types))})"


def _holds_in_float16(*tensors: torch.Tensor) -> bool:
    """Whether float16 stores hold these float32 values exactly (Q4_0's and Q4_1's do: the file stores them so)."""
    return all(torch.equal(t.to(torch.float16).float(), t) for t in tensors)


def _cat_int8(raws: list[np.ndarray]) -> Int8Groups:
    parts = [INT8_FORMATS["Q8_0"](raw) for raw in raws]
    return Int8Groups(torch.cat([p.codes for p in parts]), torch.cat([p.scale for p in parts]))


def _set_submodule(model: nn.Module, name: str, module: nn.Module) -> None:
    parent, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, child, module)


def _buffer_bytes(module: nn.Module) -> int:
    """Bytes a forward reads for ``module``'s weights (the packed codes and scales; not the inspection copy)."""
    if isinstance(module, Int4Linear):
        return module.packed.nbytes + module.scales_zeros.nbytes
    if isinstance(module, (Int8GroupLinear, KleidiAILinear, Q8DotLinear)):
        return sum(b.nbytes for b in module.buffers())
    if isinstance(module, Int8Linear):
        return module.codes.nbytes + module.scale.nbytes
    return sum(p.nbytes for p in module.parameters())


def count_parameters(model: nn.Module) -> int:
    """How many weights the model has, whatever form they are stored in (a tied output matrix counted once)."""
    total = 0
    for name, module in model.named_modules():
        if name == "lm_head" and model.config.tie_embeddings:
            continue
        if isinstance(module, (Int4Linear, Int8Linear, Int8GroupLinear, KleidiAILinear, Q8DotLinear)):
            total += module.out_features * module.in_features + (module.bias.numel() if module.bias is not None else 0)
        elif isinstance(module, QuantEmbedding):
            total += module.num_embeddings * module.embedding_dim
        else:
            total += sum(p.numel() for p in module.parameters(recurse=False))
    return total
