"""Engine benchmark: our prefill/decode speed against transformers on the same weights, same run.

    python -m inference.bench [--model SmolLM2-135M-Instruct,gemma-3-270m] [--dtypes float32,bfloat16]
                              [--new-tokens 64] [--repeats 3] [--device cpu] [--threads N]

Prints a table and writes ``bench-results/engine.json``. Machines here are noisy, so
every figure that matters is a ratio against a reference measured in the same run,
interleaved (ours, theirs, ours, theirs, ...) and summarised by the median:
- decode tok/s with the KV cache, without it, and transformers ``generate()``;
- prefill tok/s on a ~128-token prompt;
- the share of the memory-bandwidth bound: weight bytes x tok/s / bandwidth, where the
  bandwidth is a reduction over a large tensor timed in the same run (decode must read
  every weight once per token, so bandwidth / weight bytes is the ceiling in tok/s).
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from ..generation.engine import Engine, load_engine
from ..generation.sampling import SamplingParams
from ..model.packages import SMOLLM2
from ..threads import available_cores, set_threads
from .reference import transformers_model

PROMPT = "The cat sat on the mat because it was tired."
# More decode references measured in the same run, interleaved with ours: name -> (engine, prompt ids,
# new tokens) -> tok/s. llama.cpp on the engine's own GGUF (``reference.gguf_source(engine.folder)``)
# belongs here; each entry adds a run, a column and an ours/it ratio.
EXTRA_DECODE: dict[str, Callable[[Engine, list[int], int], float]] = {}


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def read_bandwidth(device: torch.device, megabytes: int = 512, repeats: int = 5) -> float:
    """Bytes/s read by a reduction over a large tensor: the rate at which weights can stream in."""
    source = torch.empty(megabytes * 2**20 // 4, dtype=torch.float32, device=device).normal_()
    best = min(timed(lambda: (source.sum(), _sync(device))) for _ in range(repeats))
    return source.nbytes / best


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def weight_bytes(engine: Engine) -> int:
    unique = {p.data_ptr(): p.nbytes for p in engine.model.parameters()}
    return sum(unique.values())


def ours_decode(engine: Engine, ids: list[int], new_tokens: int, use_cache: bool) -> float:
    """Decode tok/s: the steps after the first (the first token comes from the prefill)."""
    params = SamplingParams(temperature=0, max_new_tokens=new_tokens, stop_on_eos=False)
    steps = list(engine.generate(ids, params, use_cache=use_cache))
    return (len(steps) - 1) / sum(s.seconds for s in steps[1:])


def ours_prefill(engine: Engine, ids: list[int]) -> float:
    cache = engine.new_cache(len(ids))
    return len(ids) / timed(lambda: (engine.prefill(ids, cache), _sync(engine.device)))


def hf_decode(reference, ids: list[int], new_tokens: int, device: torch.device) -> float:
    """transformers generate(): (time for N tokens - time for 1 token) / (N - 1)."""
    inputs = torch.tensor([ids], device=device)

    def run(n: int) -> float:
        return timed(lambda: reference.generate(inputs, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                                                pad_token_id=0))
    return (new_tokens - 1) / max(run(new_tokens) - run(1), 1e-9)


def bench_dtype(dtype: str, device: str | None, new_tokens: int, repeats: int, model: str = SMOLLM2) -> dict:
    engine = load_engine(model=model, device=device, dtype=dtype)
    reference = transformers_model(engine.folder, engine.dtype, engine.device)
    short = engine.tokenizer.encode(PROMPT)
    long = engine.tokenizer.encode(" ".join([PROMPT] * 11))[:128]
    ours_decode(engine, short, 4, True)  # warm-up both
    hf_decode(reference, short, 4, engine.device)
    runs: dict[str, list[float]] = {"ours_cache": [], "ours_no_cache": [], "hf_generate": [], "ours_prefill": []}
    runs.update({name: [] for name in EXTRA_DECODE})
    for _ in range(repeats):
        runs["ours_cache"].append(ours_decode(engine, short, new_tokens, True))
        runs["hf_generate"].append(hf_decode(reference, short, new_tokens, engine.device))
        for name, measure in EXTRA_DECODE.items():
            runs[name].append(measure(engine, short, new_tokens))
        runs["ours_no_cache"].append(ours_decode(engine, short, max(8, new_tokens // 2), False))
        runs["ours_prefill"].append(ours_prefill(engine, long))
    medians = {name: statistics.median(values) for name, values in runs.items()}
    bandwidth = read_bandwidth(engine.device)
    weights = weight_bytes(engine)
    return {
        "model": engine.config.name, "dtype": dtype, "device": str(engine.device), "threads": torch.get_num_threads(),
        "new_tokens": new_tokens, "repeats": repeats, "runs": runs, "median_tok_s": medians,
        "ratio_cache_vs_hf": medians["ours_cache"] / medians["hf_generate"],
        "ratio_cache_vs_no_cache": medians["ours_cache"] / medians["ours_no_cache"],
        "weight_bytes": weights, "read_bandwidth_bytes_s": bandwidth,
        "bandwidth_share": weights * medians["ours_cache"] / bandwidth,
        "bandwidth_bound_tok_s": bandwidth / weights,
        "hf_bandwidth_share": weights * medians["hf_generate"] / bandwidth,
        "prefill_tokens": len(long),
        **{f"ratio_cache_vs_{name}": medians["ours_cache"] / medians[name] for name in EXTRA_DECODE},
    }


def print_table(results: list[dict]) -> None:
    print(f"{'model':22} {'dtype':9} {'device':6} {'decode+cache':>13} {'no cache':>9} {'HF generate':>12} "
          f"{'ours/HF':>8} {'cache/no':>9} {'prefill':>9} {'BW share':>9}"
          + "".join(f" {name:>12} {'ours/' + name:>12}" for name in EXTRA_DECODE))
    for r in results:
        m = r["median_tok_s"]
        print(f"{r['model']:22} {r['dtype']:9} {r['device']:6} {m['ours_cache']:10.1f}t/s {m['ours_no_cache']:6.1f}t/s "
              f"{m['hf_generate']:9.1f}t/s {r['ratio_cache_vs_hf']:7.2f}x {r['ratio_cache_vs_no_cache']:8.2f}x "
              f"{m['ours_prefill']:6.0f}t/s {100 * r['bandwidth_share']:8.0f}%"
              + "".join(f" {m[name]:9.1f}t/s {r['ratio_cache_vs_' + name]:11.2f}x" for name in EXTRA_DECODE))
    for r in results:
        print(f"{r['model']} {r['dtype']}: weights {r['weight_bytes'] / 2**20:.0f} MiB, read bandwidth "
              f"{r['read_bandwidth_bytes_s'] / 1e9:.1f} GB/s -> bound {r['bandwidth_bound_tok_s']:.1f} tok/s; "
              f"ours at {100 * r['bandwidth_share']:.0f}%, transformers at {100 * r['hf_bandwidth_share']:.0f}%")
    print(f"(medians of {results[0]['repeats']} interleaved runs; bandwidth = a timed sum over 512 MiB)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m inference.bench")
    parser.add_argument("--model", default=SMOLLM2,
                        help="comma-separated models: packaged names (gemma-3-270m), .gguf files or HF folders")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--device", default=None)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: every core)")
    parser.add_argument("--out", default="bench-results/engine.json")
    args = parser.parse_args(argv)
    set_threads(args.threads or available_cores())  # the entry point's one setting; both engines run under it
    results = [bench_dtype(d, args.device, args.new_tokens, args.repeats, model)
               for model in args.model.split(",") for d in args.dtypes.split(",")]
    print_table(results)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
