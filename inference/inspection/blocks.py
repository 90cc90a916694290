"""One block of a GGUF file's weights as it is stored: its integer codes, its scales and what they decode to.

Owns the block layouts of every type a shipped model file holds, read from their bytes in numpy
alone (ggml's ``block_q4_0`` … ``block_q6_K``): SmolLM2's file holds Q4_1 (and Q8_0 for the
embeddings), Gemma 3 270M's Q5_0, Q4_K, Q6_K and Q8_0; Q4_0 is read too. ``decode_block`` returns the
codes, each group's scale and offset (the weight is ``scale · code + offset``), the format's rule in
words and the decoded weights; ``kernel_held`` what the engine's 4-bit kernel multiplies by; and
``stored_layout`` one block of a model's file, its bytes taken from the tensors the engine's own GGUF
reader lists (``inference.model.gguf_file``: the one reader of the file). The engine's fast path
(``inference.model.quant_formats``) is a separate reading for its kernels; ``tests/test_blocks.py``
checks the decoded weights against the ``gguf`` package's own ``dequantize`` for every type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

# type name -> (weights per block, bytes per block), as ggml stores them
BLOCK_SIZES = {
    "Q4_0": (32, 18),
    "Q4_1": (32, 20),
    "Q5_0": (32, 22),
    "Q8_0": (32, 34),
    "Q4_K": (256, 144),
    "Q6_K": (256, 210),
}


@dataclass(frozen=True)
class BlockLayout:
    type_name: str
    n_weights: int  # weights in the block (32; 256 for the K types' super-blocks)
    n_bytes: int
    codes: np.ndarray  # (n_weights,) int: the integers as stored (Q8_0: signed)
    code_bits: int  # bits per code
    code_range: tuple[int, int]  # the values a code can take
    group_size: int  # weights sharing one scale and offset (the whole block, or a K type's sub-block)
    scales: np.ndarray  # (groups,) the multiplier of each group's codes
    offsets: np.ndarray  # (groups,) what is added (e.g. −16·d for Q5_0's centred codes, m for Q4_1)
    decoded: np.ndarray  # (n_weights,) float32: scale · code + offset, weight by weight
    fields: dict[str, float]  # the block's own stored numbers (d, m, dmin)
    sub_codes: dict[str, np.ndarray]  # the K types' per-group integer scales (and mins), as stored
    rule: str  # the format's decoding rule, e.g. "w = d · (q − 16)"
    layout: str  # how its bytes are spent, in words

    @property
    def bits_per_weight(self) -> float:
        return 8 * self.n_bytes / self.n_weights

    @property
    def groups(self) -> int:
        return len(self.scales)

    @property
    def zero_code(self) -> float | None:
        """The code that decodes to a weight of 0, when every group shares it (16 for Q5_0, 32 for Q6_K, −m/d for
        Q4_1); None when the groups differ (Q4_K) or a scale is 0."""
        if not np.all(self.scales):
            return None
        zeros = -self.offsets / self.scales
        return float(zeros[0]) if np.allclose(zeros, zeros[0]) else None


def _f16(raw: np.ndarray, at: int) -> float:
    return float(raw[at : at + 2].view(np.float16)[0])


def _nibbles(qs: np.ndarray) -> np.ndarray:
    """ggml's 4-bit order: the low nibbles of the 16 bytes are weights 0-15, the high nibbles weights 16-31."""
    return np.concatenate([qs & 0x0F, qs >> 4]).astype(np.int64)


def _legacy(type_name: str, raw: np.ndarray) -> BlockLayout:
    n, size = BLOCK_SIZES[type_name]
    d = _f16(raw, 0)
    if type_name == "Q4_0":
        codes = _nibbles(raw[2:18])
        scale, offset, rule, fields = d, -8 * d, "w = d · (q − 8)", {"d": d}
        layout, bits, span = "2 bytes: the scale d (fp16); 16 bytes: 32 four-bit codes", 4, (0, 15)
    elif type_name == "Q4_1":
        m = _f16(raw, 2)
        codes = _nibbles(raw[4:20])
        scale, offset, rule, fields = d, m, "w = d · q + m", {"d": d, "m": m}
        layout, bits, span = (
            "2 bytes: the scale d (fp16); 2 bytes: the offset m (fp16); 16 bytes: 32 four-bit codes",
            4,
            (0, 15),
        )
    elif type_name == "Q5_0":
        high = int(raw[2:6].view("<u4")[0])  # bit j is the fifth bit of weight j
        codes = _nibbles(raw[6:22]) | (((high >> np.arange(32)) & 1) << 4)
        scale, offset, rule, fields = d, -16 * d, "w = d · (q − 16)", {"d": d}
        layout = (
            "2 bytes: the scale d (fp16); 4 bytes: the fifth bit of each of the 32 codes; 16 bytes: their low four bits"
        )
        bits, span = 5, (0, 31)
    else:  # Q8_0
        codes = raw[2:34].view(np.int8).astype(np.int64)
        scale, offset, rule, fields = d, 0.0, "w = d · q", {"d": d}
        layout, bits, span = "2 bytes: the scale d (fp16); 32 bytes: 32 signed eight-bit codes", 8, (-128, 127)
    decoded = (np.float32(scale) * codes.astype(np.float32) + np.float32(offset)).astype(np.float32)
    return BlockLayout(
        type_name,
        n,
        size,
        codes,
        bits,
        span,
        n,
        np.array([scale]),
        np.array([offset]),
        decoded,
        fields,
        {},
        rule,
        layout,
    )


def _q4_k_scale_min(scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ggml's ``get_scale_min_k4``: the 8 six-bit scales and mins packed into 12 bytes."""
    sc, mn = np.zeros(8, dtype=np.int64), np.zeros(8, dtype=np.int64)
    s = scales.astype(np.int64)
    for j in range(8):
        if j < 4:
            sc[j], mn[j] = s[j] & 63, s[j + 4] & 63
        else:
            sc[j] = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4)
            mn[j] = (s[j + 4] >> 4) | ((s[j] >> 6) << 4)
    return sc, mn


def _q4_k(raw: np.ndarray) -> BlockLayout:
    d, dmin = _f16(raw, 0), _f16(raw, 2)
    sc, mn = _q4_k_scale_min(raw[4:16])
    qs = raw[16:144].astype(np.int64).reshape(4, 32)  # 4 chunks of 32 bytes: 64 weights each
    codes = np.concatenate([np.concatenate([chunk & 0x0F, chunk >> 4]) for chunk in qs])  # (256,)
    scales = np.float32(d) * sc.astype(np.float32)  # (8,)
    offsets = -np.float32(dmin) * mn.astype(np.float32)
    group = np.repeat(np.arange(8), 32)
    decoded = (scales[group] * codes.astype(np.float32) + offsets[group]).astype(np.float32)
    return BlockLayout(
        "Q4_K",
        256,
        144,
        codes,
        4,
        (0, 15),
        32,
        scales,
        offsets,
        decoded,
        {"d": d, "dmin": dmin},
        {"scale": sc, "min": mn},
        "w = d · sᵢ · q − dmin · mᵢ (group i of 32 weights)",
        "2 bytes: d (fp16); 2 bytes: dmin (fp16); 12 bytes: 8 six-bit scales sᵢ and 8 six-bit mins mᵢ; "
        "128 bytes: 256 four-bit codes",
    )


def _q6_k(raw: np.ndarray) -> BlockLayout:
    ql, qh = raw[0:128].astype(np.int64), raw[128:192].astype(np.int64)
    sc = raw[192:208].view(np.int8).astype(np.int64)
    d = _f16(raw, 208)
    codes = np.zeros(256, dtype=np.int64)
    for half in range(2):  # two halves of 128 weights
        low, high, base = ql[64 * half : 64 * half + 64], qh[32 * half : 32 * half + 32], 128 * half
        for l in range(32):
            codes[base + l] = (low[l] & 0x0F) | (((high[l] >> 0) & 3) << 4)
            codes[base + l + 32] = (low[l + 32] & 0x0F) | (((high[l] >> 2) & 3) << 4)
            codes[base + l + 64] = (low[l] >> 4) | (((high[l] >> 4) & 3) << 4)
            codes[base + l + 96] = (low[l + 32] >> 4) | (((high[l] >> 6) & 3) << 4)
    scales = np.float32(d) * sc.astype(np.float32)  # (16,) one per 16 weights
    offsets = -32 * scales
    group = np.repeat(np.arange(16), 16)
    decoded = (scales[group] * (codes - 32).astype(np.float32)).astype(np.float32)
    return BlockLayout(
        "Q6_K",
        256,
        210,
        codes,
        6,
        (0, 63),
        16,
        scales,
        offsets,
        decoded,
        {"d": d},
        {"scale": sc},
        "w = d · sᵢ · (q − 32) (group i of 16 weights)",
        "128 bytes: the low four bits of 256 six-bit codes; 64 bytes: their top two bits; 16 bytes: 16 "
        "signed eight-bit scales sᵢ; 2 bytes: d (fp16)",
    )


KERNEL_TYPES = ("Q4_0", "Q4_1", "Q4_K")  # the types the engine's 4-bit kernel runs as groups of 32 (quant_formats)


def _bfloat16(values: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 -> float32, rounding to nearest even (as torch's ``.to(torch.bfloat16)``)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return rounded.view(np.float32)


def kernel_held(layout: BlockLayout) -> np.ndarray | None:
    """What torch's 4-bit kernel multiplies by for this block (None for a type it does not run): the same codes,
    each group's scale s and zero z = offset + 8·s kept in bfloat16, w = (q − 8)·s + z (``quant_formats``)."""
    if layout.type_name not in KERNEL_TYPES:
        return None
    scale = _bfloat16(layout.scales)
    zero = _bfloat16(layout.offsets + 8 * layout.scales)
    group = np.repeat(np.arange(layout.groups), layout.group_size)
    return ((layout.codes - 8).astype(np.float32) * scale[group] + zero[group]).astype(np.float32)


def decode_block(type_name: str, raw: np.ndarray) -> BlockLayout:
    """One block of ``type_name`` from its bytes (``raw``: uint8, exactly one block)."""
    if type_name not in BLOCK_SIZES:
        raise ValueError(f"{type_name} blocks are not read here (only {', '.join(BLOCK_SIZES)})")
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    if raw.size != BLOCK_SIZES[type_name][1]:
        raise ValueError(f"a {type_name} block is {BLOCK_SIZES[type_name][1]} bytes, got {raw.size}")
    if type_name == "Q4_K":
        return _q4_k(raw)
    if type_name == "Q6_K":
        return _q6_k(raw)
    return _legacy(type_name, raw)


@dataclass(frozen=True)
class StoredLayout:
    tensor: str
    shape: tuple[int, int]  # (rows, columns), as the model multiplies it
    row: int
    block: int
    layout: BlockLayout
    reference: np.ndarray  # (n_weights,) the gguf package's own dequantization of the same block


def stored_layout(tensors: Mapping, tensor: str, row: int = 0, block: int = 0) -> StoredLayout | None:
    """Block ``block`` of row ``row`` of ``tensor`` (of ``read_gguf``'s tensors by name) as the file stores it,
    read here and by ``gguf``; None when the tensor is absent or not of a block type read here."""
    from gguf.quants import dequantize

    found = tensors.get(tensor)
    if found is None or found.tensor_type.name not in BLOCK_SIZES:
        return None
    type_name = found.tensor_type.name
    size = BLOCK_SIZES[type_name][1]
    stored_row = np.asarray(found.data).reshape(-1, np.asarray(found.data).shape[-1])[row]  # (bytes per row,)
    raw = np.ascontiguousarray(stored_row[block * size : (block + 1) * size], dtype=np.uint8)  # one block
    reference = dequantize(raw[None, :], found.tensor_type).astype(np.float32)[0]  # (1, bytes) -> (n_weights,)
    rows = int(found.shape[1]) if len(found.shape) > 1 else 1
    return StoredLayout(tensor, (rows, int(found.shape[0])), row, block, decode_block(type_name, raw), reference)
