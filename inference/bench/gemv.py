"""How fast the exact float32 path could decode with torch's own matrix kernels: the one-row products alone.

    python -m inference.bench.gemv [--threads N] [--repeats 5] [--new-tokens 32]

A float32 decode step multiplies one row by every weight matrix of the model (the output
matrix included, the embedding lookup not). This times exactly those products, in the order
a step makes them, with ``torch.nn.functional.linear`` on the engine's own weights (nothing
else: no attention, norms or sampling), and prints, all measured in this run:

- the products' time per step and the bytes/s they stream, against a plain reduction over
  512 MiB (``read_bandwidth``, what the memory delivers), by two exact kernel paths: ``F.linear``
  on the engine's layout, and MKL's packed GEMM (what inductor's freezing uses for float32);
- the decode speed that time allows (a ceiling: a step cannot be faster than its products);
- our float32 decode, eager and with the compiled step, and transformers' float32 ``generate()``;
- the ceiling as a multiple of transformers: the most any exact float32 engine built on these
  kernels can reach, whatever it does around them.

The goal it checks: the float32 decode at 90 % of the faster path's ceiling (docs/quantization.md).
Writes ``bench-results/gemv.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch
import torch.nn.functional as F

from ..generation.engine import load_engine
from ..number_text import whole_arg
from ..threads import available_cores, set_threads
from .__main__ import PROMPT, ours_decode, read_bandwidth, step_tensors
from .references import TransformersReference, timed


def step_matrices(model: torch.nn.Module) -> list[torch.Tensor]:
    """Every matrix a float32 decode step multiplies by, each once (``step_tensors`` less the norms)."""
    return [t for t in step_tensors(model) if t.dim() == 2]


def products_seconds(matrices: list[torch.Tensor], repeats: int, packed: bool = False) -> float:
    """Median seconds of one pass of one-row products over ``matrices`` (the inputs made once, outside).

    ``packed``: MKL's packed GEMM (``torch.ops.mkl._mkl_linear`` on ``_mkl_reorder_linear_weight``'s copy),
    what inductor's freezing turns a float32 linear layer into; else ``F.linear`` on the engine's own layout."""
    rows = {w.shape[1]: torch.randn(1, w.shape[1], dtype=w.dtype) for w in matrices}  # (1, K) per width
    packs = [torch.ops.mkl._mkl_reorder_linear_weight(w, 1) for w in matrices] if packed else None

    def one_pass() -> None:
        if packs is None:
            for w in matrices:
                F.linear(rows[w.shape[1]], w)  # (1, K) · (N, K)ᵀ -> (1, N), in the weight's own storage
        else:
            for w, pack in zip(matrices, packs):
                torch.ops.mkl._mkl_linear(rows[w.shape[1]], pack, w, None, 1)  # (1, K) -> (1, N)

    one_pass()  # warm-up
    return statistics.median(timed(one_pass) for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m inference.bench.gemv")
    parser.add_argument("--threads", type=whole_arg, default=None)
    parser.add_argument("--repeats", type=whole_arg, default=5)
    parser.add_argument("--new-tokens", type=whole_arg, default=32)
    parser.add_argument("--no-compiled", action="store_true", help="leave out the compiled float32 step")
    parser.add_argument("--out", type=Path, default=Path("bench-results") / "gemv.json")
    args = parser.parse_args()
    threads = set_threads(args.threads or available_cores())
    engine = load_engine(device="cpu", dtype="float32")
    compiled = None
    if not args.no_compiled:
        compiled = load_engine(device="cpu", dtype="float32", compile=True)
        print(f"compiled float32 step: {compiled.wait_for_step().detail}")
    matrices = step_matrices(engine.model)
    nbytes = sum(w.nbytes for w in matrices)
    ids = engine.tokenizer.encode(PROMPT)
    reference = TransformersReference(engine.folder, torch.float32, "cpu")

    bandwidth = read_bandwidth(torch.device("cpu"))
    runs: dict[str, list[float]] = {"products": [], "packed": [], "ours": [], "compiled": [], "transformers": []}
    for _ in range(3):  # interleaved: the machine's noise falls on every figure alike
        runs["products"].append(products_seconds(matrices, args.repeats))
        runs["packed"].append(products_seconds(matrices, args.repeats, packed=True))
        runs["ours"].append(ours_decode(engine, ids, args.new_tokens))
        if compiled is not None:
            runs["compiled"].append(ours_decode(compiled, ids, args.new_tokens))
        runs["transformers"].append(reference.decode_tok_s(ids, args.new_tokens))
    median = {name: statistics.median(values) for name, values in runs.items() if values}
    hf = median["transformers"]
    print(
        f"{engine.config.name}, float32, {threads} thread(s): {len(matrices)} matrices, {nbytes / 2**20:.0f} MiB a step; "
        f"a reduction reads {bandwidth / 1e9:.1f} GB/s"
    )
    for name, label in (("products", "F.linear on our layout"), ("packed", "MKL packed (_mkl_linear)")):
        seconds = median[name]
        print(
            f"one-row products alone, {label}: {seconds * 1e3:.1f} ms a step, {nbytes / seconds / 1e9:.1f} GB/s "
            f"({nbytes / seconds / bandwidth:.0%}): a ceiling of {1 / seconds:.1f} tok/s, {1 / seconds / hf:.2f}x "
            "transformers"
        )
    ceiling = 1 / min(median["products"], median["packed"])  # the faster exact kernel path, measured here
    for name, label in (("ours", "ours, eager"), ("compiled", "ours, compiled step")):
        if name in median:
            print(
                f"{label}: {median[name]:.1f} tok/s, {median[name] / ceiling:.0%} of the faster ceiling, "
                f"{median[name] / hf:.2f}x transformers ({hf:.1f} tok/s)"
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "model": engine.config.name,
                "threads": threads,
                "matrices": len(matrices),
                "bytes_per_step": nbytes,
                "products_seconds": runs["products"],
                "packed_seconds": runs["packed"],
                "ours_tok_s": runs["ours"],
                "compiled_tok_s": runs["compiled"],
                "transformers_tok_s": runs["transformers"],
                "read_bandwidth_bytes_s": bandwidth,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
