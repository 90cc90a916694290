"""GGUF block formats read into integer groups, and float weights quantized into the same groups.

Owns the arithmetic of weight quantization, in numpy/torch, with no kernels and no modules:

- ``Int4Groups``: 4-bit codes in groups of 32 along the input dimension, each group with its
  own scale and zero, ``w = (q - 8) · scale + zero`` (the convention of torch's 4-bit group
  kernels). GGUF's Q4_0 (``w = d·(q - 8)``), Q4_1 (``w = d·q + m``, so zero ``m + 8d``) and
  Q4_K (sub-blocks of 32 inside 256, ``w = d·sc·q - dmin·m``) map onto it exactly.
- ``Int8Groups``: 8-bit codes in groups of 32 with one scale each, ``w = d · q`` (GGUF's Q8_0).
- ``Int8Rows``: 8-bit codes with one scale per output row (torch's per-channel 8-bit kernel).
- quantizers for float weights: int4 groups (min/max per group) and int8 rows (symmetric).

Every block decoder is checked against the ``gguf`` package's own ``dequantize`` in the tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

GROUP = 32  # weights per group along the input dimension, for every format here


@dataclass
class Int4Groups:
    codes: torch.Tensor  # (N, K) uint8 in 0..15
    scale: torch.Tensor  # (N, K / 32) float32
    zero: torch.Tensor  # (N, K / 32) float32: w = (q - 8) * scale + zero

    def dequantize(self) -> torch.Tensor:
        """The float32 weights (N, K) these groups stand for."""
        n, k = self.codes.shape
        q = self.codes.float().view(n, k // GROUP, GROUP)  # (N, K/32, 32)
        return ((q - 8) * self.scale[..., None] + self.zero[..., None]).view(n, k)

    @staticmethod
    def cat(parts: list[Int4Groups]) -> Int4Groups:
        """Row-wise concatenation (fused projections: Q, K, V one above the other)."""
        return Int4Groups(
            torch.cat([p.codes for p in parts]), torch.cat([p.scale for p in parts]), torch.cat([p.zero for p in parts])
        )


@dataclass
class Int8Groups:
    codes: torch.Tensor  # (N, K) int8
    scale: torch.Tensor  # (N, K / 32) float32 (float16: a table's own Q8_0 scales): w = q * scale

    def dequantize(self) -> torch.Tensor:
        n, k = self.codes.shape
        return (self.codes.float().view(n, k // GROUP, GROUP) * self.scale.float()[..., None]).view(n, k)


class HeldInt8Groups:
    """For a module that holds a Q8_0 matrix as the buffers ``group_codes`` (N, K) and ``group_scale`` (N, K/32):
    ``groups`` reads them as ``Int8Groups`` and, set to a tied token table's own, holds one copy of each."""

    group_codes: torch.Tensor
    group_scale: torch.Tensor

    @property
    def groups(self) -> Int8Groups:
        return Int8Groups(self.group_codes, self.group_scale)

    @groups.setter
    def groups(self, groups: Int8Groups) -> None:
        self.group_codes, self.group_scale = groups.codes.contiguous(), groups.scale.contiguous()


@dataclass
class Int8Rows:
    codes: torch.Tensor  # (N, K) int8
    scale: torch.Tensor  # (N,) float32: w = q * scale[row]

    def dequantize(self) -> torch.Tensor:
        return self.codes.float() * self.scale[:, None]


# -- GGUF blocks ------------------------------------------------------------------------------
def _f16(raw: np.ndarray, offset: int) -> np.ndarray:
    """The fp16 value at byte ``offset`` of every block, as float32: (rows, blocks)."""
    return np.ascontiguousarray(raw[..., offset : offset + 2]).view(np.float16)[..., 0].astype(np.float32)


def _nibbles(qs: np.ndarray) -> np.ndarray:
    """16 bytes per block -> 32 codes: the low nibbles are weights 0..15, the high ones 16..31."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=-1)


def _blocks(raw: np.ndarray, block_bytes: int) -> np.ndarray:
    """(rows, bytes) -> (rows, blocks, block_bytes)."""
    rows = raw.shape[0]
    return raw.reshape(rows, -1, block_bytes)


def q4_0(raw: np.ndarray) -> Int4Groups:
    """Q4_0 blocks (rows, K/32·18 bytes): fp16 d, 16 bytes of codes; w = d·(q - 8)."""
    blocks = _blocks(raw, 18)
    d = _f16(blocks, 0)  # (N, K/32)
    codes = _nibbles(blocks[..., 2:18])  # (N, K/32, 32)
    return _int4(codes, d, np.zeros_like(d))


def q4_1(raw: np.ndarray) -> Int4Groups:
    """Q4_1 blocks (rows, K/32·20 bytes): fp16 d and m, 16 bytes of codes; w = d·q + m = d·(q - 8) + (m + 8d)."""
    blocks = _blocks(raw, 20)
    d, m = _f16(blocks, 0), _f16(blocks, 2)  # (N, K/32) each
    codes = _nibbles(blocks[..., 4:20])  # (N, K/32, 32)
    return _int4(codes, d, m + 8 * d)


def q4_k(raw: np.ndarray) -> Int4Groups:
    """Q4_K super-blocks (rows, K/256·144 bytes): fp16 d and dmin, 12 bytes of 6-bit sub-block scales and
    mins, 128 bytes of codes. Sub-block j of 32 weights: w = d·sc_j·q - dmin·m_j."""
    blocks = _blocks(raw, 144)
    d, dmin = _f16(blocks, 0), _f16(blocks, 2)  # (N, K/256)
    packed = blocks[..., 4:16].astype(np.uint8)  # (N, K/256, 12)
    sc, mn = np.empty(packed.shape[:-1] + (8,), np.uint8), np.empty(packed.shape[:-1] + (8,), np.uint8)
    sc[..., :4], mn[..., :4] = packed[..., 0:4] & 63, packed[..., 4:8] & 63
    sc[..., 4:] = (packed[..., 8:12] & 0x0F) | ((packed[..., 0:4] >> 6) << 4)
    mn[..., 4:] = (packed[..., 8:12] >> 4) | ((packed[..., 4:8] >> 6) << 4)
    qs = blocks[..., 16:144].reshape(*blocks.shape[:-1], 4, 32)  # (N, K/256, 4 chunks, 32)
    codes = np.stack([qs & 0x0F, qs >> 4], axis=-2)  # (N, K/256, 4, 2, 32): low nibbles first
    codes = codes.reshape(*blocks.shape[:-1], 8, 32)  # (N, K/256, 8 sub-blocks, 32)
    scale = d[..., None] * sc.astype(np.float32)  # (N, K/256, 8)
    minimum = dmin[..., None] * mn.astype(np.float32)  # (N, K/256, 8)
    rows = raw.shape[0]
    return _int4(codes.reshape(rows, -1, GROUP), scale.reshape(rows, -1), (8 * scale - minimum).reshape(rows, -1))


def q8_0(raw: np.ndarray) -> Int8Groups:
    """Q8_0 blocks (rows, K/32·34 bytes): fp16 d, 32 signed bytes; w = d·q."""
    blocks = _blocks(raw, 34)
    d = _f16(blocks, 0)  # (N, K/32)
    codes = np.ascontiguousarray(blocks[..., 2:34]).view(np.int8)  # (N, K/32, 32)
    rows = raw.shape[0]
    return Int8Groups(torch.from_numpy(codes.reshape(rows, -1).copy()), torch.from_numpy(d.copy()))


def _int4(codes: np.ndarray, scale: np.ndarray, zero: np.ndarray) -> Int4Groups:
    rows = codes.shape[0]
    return Int4Groups(
        torch.from_numpy(codes.reshape(rows, -1).astype(np.uint8)),
        torch.from_numpy(np.ascontiguousarray(scale, dtype=np.float32)),
        torch.from_numpy(np.ascontiguousarray(zero, dtype=np.float32)),
    )


def split_int8_groups(groups: Int8Groups) -> Int4Groups:
    """8-bit groups as 4-bit groups of twice the width that a product with [x, x] turns back into them, exactly.

    Each code q (-128..127) is 16·hi + lo with hi = q >> 4 in -8..7 and lo = q & 15 in 0..15. The
    first K columns hold hi + 8 with scale 16·d and zero 0 (so w = 16·d·hi), the next K hold lo with
    scale d and zero 8·d (so w = d·lo): x·W_hi + x·W_lo = x·(q·d). The scales are exact multiples of
    d by powers of two, so rounding d to any float format rounds every one of them the same way.
    """
    wide = groups.codes.to(torch.int16)  # (N, K)
    high, low = (wide >> 4) + 8, wide & 15  # (N, K) each, codes 0..15
    d = groups.scale  # (N, K/32)
    return Int4Groups(
        torch.cat([high, low], dim=1).to(torch.uint8),
        torch.cat([16 * d, d], dim=1),
        torch.cat([torch.zeros_like(d), 8 * d], dim=1),
    )


INT4_FORMATS = {"Q4_0": q4_0, "Q4_1": q4_1, "Q4_K": q4_k}  # map exactly onto 4-bit groups of 32
INT8_FORMATS = {"Q8_0": q8_0}  # maps exactly onto 8-bit groups of 32


# -- float weights ------------------------------------------------------------------------------
def int4_from_float(weight: torch.Tensor) -> Int4Groups:
    """Asymmetric 4-bit groups of 32: each group's min and max span the 16 codes (``quant="int4"``)."""
    n, k = weight.shape
    groups = weight.detach().float().contiguous().view(n, k // GROUP, GROUP)  # (N, K/32, 32)
    low, high = groups.amin(-1), groups.amax(-1)  # (N, K/32)
    scale = ((high - low) / 15).clamp_min(torch.finfo(torch.float32).tiny)
    codes = ((groups - low[..., None]) / scale[..., None]).round().clamp(0, 15).to(torch.uint8)
    return Int4Groups(codes.view(n, k), scale, low + 8 * scale)


def int8_rows_from_float(weight: torch.Tensor) -> Int8Rows:
    """Symmetric 8-bit codes with one scale per output row (``quant="int8"``, and 8-bit formats re-quantized)."""
    weight = weight.detach().float().contiguous()
    scale = (weight.abs().amax(-1) / 127).clamp_min(torch.finfo(torch.float32).tiny)  # (N,)
    codes = (weight / scale[:, None]).round().clamp(-127, 127).to(torch.int8)
    return Int8Rows(codes, scale)
