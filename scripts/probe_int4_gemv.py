"""Probe (issue 22): one 4-bit product as inductor's own dequantizing loop, against ATen's ``_weight_int4pack_mm``.

    PYTHONPATH=. python scripts/probe_int4_gemv.py [--threads 1] [--calls 200]

One layer's shape (1536 × 576: SmolLM2's MLP up-projection), 4-bit codes in groups of 32 with a scale and a
zero each, one row of input (a decode step). ATen's kernel runs on the codes packed as the engine packs them
(``quant._pack_int4``); the loop unpacks two codes from each byte, dequantizes, multiplies and sums, compiled
by ``torch.compile`` with static shapes. Calls alternate, so the medians share the machine's hour. Prints both
medians and the ratio (docs/quantization.md, "Why the compiled step stays below llama.cpp on these machines").
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from inference.model import quant

N, K, GROUP = 1536, 576, 32


def dequantizing_product(x: torch.Tensor, pairs: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor):
    """x (K,) float32 times the weights held as ``pairs`` (N, K/2) uint8 (two codes a byte), scale/zero (N, K/32)."""
    low = (pairs & 15).to(torch.float32)  # (N, K/2): the even columns
    high = (pairs >> 4).to(torch.float32)  # (N, K/2): the odd columns
    codes = torch.stack([low, high], dim=-1).view(N, K // GROUP, GROUP)  # (N, K/32, 32)
    weights = (codes - 8) * scale[..., None] + zero[..., None]  # (N, K/32, 32)
    return (weights * x.view(1, K // GROUP, GROUP)).sum(dim=(-1, -2))  # (N,)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    codes = torch.randint(0, 16, (N, K), dtype=torch.uint8)
    scale = torch.rand(N, K // GROUP) * 0.01
    zero = torch.rand(N, K // GROUP) * 0.01
    x = torch.randn(1, K, dtype=torch.bfloat16)

    packed = quant._pack_int4(codes, torch.device("cpu"))
    scales_zeros = torch.stack([scale.t(), zero.t()], dim=-1).contiguous().to(torch.bfloat16)  # (K/32, N, 2)
    pairs = (codes[:, 0::2] | (codes[:, 1::2] << 4)).contiguous()  # (N, K/2)
    held_scale, held_zero = (t.to(torch.bfloat16).float() for t in (scale, zero))  # as the kernel holds them
    compiled = torch.compile(dequantizing_product, dynamic=False)
    x32 = x.float()[0]  # (K,)

    expected = quant._int4_matmul(x, packed, scales_zeros).float()[0]  # (N,)
    got = compiled(x32, pairs, held_scale, held_zero)
    print(
        f"largest difference {float((got - expected).abs().max()):.3g} (largest output {float(expected.abs().max()):.3g})"
    )
    aten_s, loop_s = [], []
    for _ in range(args.calls):
        started = time.perf_counter()
        quant._int4_matmul(x, packed, scales_zeros)
        aten_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        compiled(x32, pairs, held_scale, held_zero)
        loop_s.append(time.perf_counter() - started)
    aten, loop = statistics.median(aten_s), statistics.median(loop_s)
    print(
        f"{args.threads} thread(s), {args.calls} interleaved calls: ATen {aten * 1e6:.0f} µs, inductor's loop "
        f"{loop * 1e6:.0f} µs: the loop runs at {aten / loop:.2f}x ATen's speed; ATen reads the codes at "
        f"{N * K / 2 / aten / 1e9:.1f} GB/s"
    )


if __name__ == "__main__":
    main()
