"""How fast the exact float32 path could decode with torch's own matrix kernels: the one-row products alone.

    python -m inference.bench.gemv [--threads N] [--repeats 5] [--new-tokens 32]

A float32 decode step multiplies one row by every weight matrix of the model (the output
matrix included, the embedding lookup not). This times exactly those products, in the order
a step makes them, with ``torch.nn.functional.linear`` on the engine's own weights (nothing
else: no attention, norms or sampling), and prints, all measured in this run:

- the products' time per step and the bytes/s they stream, against a plain reduction over
  512 MiB (``read_bandwidth``, what the memory delivers);
- the decode speed that time allows (a ceiling: a step cannot be faster than its products);
- our float32 decode and transformers' float32 ``generate()``;
- the ceiling as a multiple of transformers: the most any exact float32 engine built on these
  kernels can reach, whatever it does around them.

It answers whether "exact float32 at 2x transformers" is reachable on this machine with
torch's kernels (see docs/quantization.md). Writes ``bench-results/gemv.json``.
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch
import torch.nn.functional as F

from ..generation.engine import load_engine
from ..threads import available_cores, set_threads
from .__main__ import PROMPT, ours_decode, read_bandwidth, step_tensors
from .references import TransformersReference, timed


def step_matrices(model: torch.nn.Module) -> list[torch.Tensor]:
    """Every matrix a float32 decode step multiplies by, each once (``step_tensors`` less the norms)."""
    return [t for t in step_tensors(model) if t.dim() == 2]


def products_seconds(matrices: list[torch.Tensor], repeats: int) -> float:
    """Median seconds of one pass of one-row products over ``matrices`` (the inputs made once, outside)."""
    rows = {w.shape[1]: torch.randn(1, w.shape[1], dtype=w.dtype) for w in matrices}  # (1, K) per width

    def one_pass() -> None:
        for w in matrices:
            F.linear(rows[w.shape[1]], w)  # (1, K) · (N, K)ᵀ -> (1, N), in the weight's own storage

    one_pass()  # warm-up
    return statistics.median(timed(one_pass) for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m inference.bench.gemv")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--out", type=Path, default=Path("bench-results") / "gemv.json")
    args = parser.parse_args()
    threads = set_threads(args.threads or available_cores())
    engine = load_engine(device="cpu", dtype="float32")
    matrices = step_matrices(engine.model)
    nbytes = sum(w.nbytes for w in matrices)
    ids = engine.tokenizer.encode(PROMPT)
    reference = TransformersReference(engine.folder, torch.float32, "cpu")

    bandwidth = read_bandwidth(torch.device("cpu"))
    products, ours, theirs = [], [], []
    for _ in range(3):  # interleaved: the machine's noise falls on every figure alike
        products.append(products_seconds(matrices, args.repeats))
        ours.append(ours_decode(engine, ids, args.new_tokens))
        theirs.append(reference.decode_tok_s(ids, args.new_tokens))
    seconds, ours_tok_s, hf_tok_s = statistics.median(products), statistics.median(ours), statistics.median(theirs)
    ceiling = 1 / seconds
    print(f"{engine.config.name}, float32, {threads} thread(s): {len(matrices)} matrices, {nbytes / 2**20:.0f} MiB a step")
    print(f"one-row products alone: {seconds * 1e3:.1f} ms a step, {nbytes / seconds / 1e9:.1f} GB/s "
          f"({nbytes / seconds / bandwidth:.0%} of the {bandwidth / 1e9:.1f} GB/s a reduction reads)")
    print(f"decode ceiling with these kernels: {ceiling:.1f} tok/s; ours {ours_tok_s:.1f} tok/s "
          f"({ours_tok_s / ceiling:.0%} of it); transformers {hf_tok_s:.1f} tok/s")
    print(f"ceiling / transformers: {ceiling / hf_tok_s:.2f}x; ours / transformers: {ours_tok_s / hf_tok_s:.2f}x")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "model": engine.config.name, "threads": threads, "matrices": len(matrices), "bytes_per_step": nbytes,
        "products_seconds": products, "ours_tok_s": ours, "transformers_tok_s": theirs,
        "read_bandwidth_bytes_s": bandwidth}, indent=2))


if __name__ == "__main__":
    main()
