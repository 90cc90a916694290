"""Batching benchmark: aggregate tokens/s at several batch sizes, ours (static, continuous) vs transformers.

Run ``python -m inference.bench.batching`` (about 3 minutes on a 2-core CPU) or with
``--quick``. Prints a table and writes ``bench-results/batching.json``.

The workload is fixed by a seed: every request has its own prompt length (8..64
tokens) and its own answer length (4..32 tokens, EOS ignored so lengths are exact),
all greedy. At batch size B there are 2B requests (4 at B = 1), all arriving at once:

- ours, static: chunks of B requests, left-padded; each chunk runs until its longest
  answer is done (finished rows idle in the batch);
- ours, continuous: B cache slots; a finished request's slot goes to the next one;
- transformers: ``generate()`` on the same weights, chunks of B, left-padded, each chunk
  run to its longest answer (only each request's own tokens are counted).

"tok/s" is useful output tokens / wall time of the whole workload, prefill included;
"decode tok/s" (ours only) counts decode steps alone, from the step records.
Ratios are against our batch 1 on the same metric, measured right before each batch
size on two of its requests: on a shared machine the load drifts by several times
within minutes, and a baseline from minutes earlier would skew them. A last table times one decode
forward alone (the model's ceiling, no sampling or scheduling) at each batch size,
interleaving the sizes and taking medians so that load from other processes on a
shared machine hits every size alike.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ..generation.engine import Engine, load_engine
from ..generation.sampling import SamplingParams
from ..model.kv_cache import KVCache
from ..number_text import whole_arg
from ..serving.continuous import run_continuous
from ..serving.padding import left_pad
from ..serving.requests import BatchRun
from ..serving.static import run_static
from ..threads import set_threads
from .report import write_report

RESULTS = Path("bench-results/batching.json")


@dataclass
class Row:
    runner: str  # "ours static", "ours continuous", "transformers", or "ours b1 ref" (the baseline)
    batch: int
    requests: int
    output_tokens: int
    seconds: float  # wall clock
    cpu_seconds: float  # this process's CPU time: what the work cost, minus time spent descheduled
    decode_tok_s: float | None  # ours only: decode steps alone, wall clock
    ratio_vs_ours_b1: float | None = None  # tok/s over the batch-1 baseline measured just before
    cpu_ratio_vs_ours_b1: float | None = None  # the same for tokens per CPU second

    @property
    def tok_s(self) -> float:
        return self.output_tokens / self.seconds

    @property
    def tok_per_cpu_s(self) -> float:
        return self.output_tokens / self.cpu_seconds


class Clock:
    """Wall time and process CPU time since construction."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def elapsed(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


Workload = list[tuple[list[int], int]]  # (prompt ids, answer length) per request
TEXT = "The quick brown fox jumps over the lazy dog while the cat sat on the mat. " * 8


def make_workload(engine: Engine, count: int, answer_range: tuple[int, int], seed: int) -> Workload:
    """``count`` requests of mixed prompt and answer lengths, the same for every runner."""
    rng = random.Random(seed)
    vocab_ids = engine.encode_prompt(TEXT)
    work = []
    for _ in range(count):
        start, length = rng.randrange(0, 16), rng.randint(8, 64)
        work.append((vocab_ids[start : start + length], rng.randint(*answer_range)))
    return work


def params_for(answer_len: int) -> SamplingParams:
    return SamplingParams(temperature=0.0, max_new_tokens=answer_len, stop_on_eos=False)


def chunks(items: list, size: int) -> list[list]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def decode_rate(runs: list[BatchRun]) -> float:
    steps = [s for run in runs for s in run.steps if s.phase == "decode"]
    tokens = sum(len(s.sampled) for s in steps)
    return tokens / max(sum(s.seconds for s in steps), 1e-9)


def bench_ours_static(engine: Engine, work: Workload, batch: int, runner: str = "ours static") -> Row:
    clock, runs = Clock(), []
    for chunk in chunks(work, batch):
        runs.append(run_static(engine, [p for p, _ in chunk], [params_for(n) for _, n in chunk]))
    return _row(runner, batch, work, runs, clock)


def bench_ours_continuous(engine: Engine, work: Workload, batch: int) -> Row:
    clock = Clock()
    run = run_continuous(engine, [p for p, _ in work], [params_for(n) for _, n in work], n_slots=batch)
    return _row("ours continuous", batch, work, [run], clock)


def _row(runner: str, batch: int, work: Workload, runs: list[BatchRun], clock: Clock) -> Row:
    seconds, cpu_seconds = clock.elapsed()
    tokens = sum(len(r.token_ids) for run in runs for r in run.results)
    assert tokens == sum(n for _, n in work), "every request must produce exactly its answer length"
    return Row(runner, batch, len(work), tokens, seconds, cpu_seconds, decode_rate(runs))


def bench_transformers(reference, work: Workload, batch: int, pad_id: int) -> Row:
    clock, tokens = Clock(), 0
    for chunk in chunks(work, batch):
        longest = max(n for _, n in chunk)
        ids, mask, _ = left_pad([p for p, _ in chunk], pad_id)  # (B, T) each
        width = ids.shape[1]
        with torch.inference_mode():
            out = reference.generate(
                input_ids=ids,
                attention_mask=mask.long(),
                do_sample=False,
                max_new_tokens=longest,
                min_new_tokens=longest,
                pad_token_id=pad_id,
            )
        assert out.shape[1] == width + longest
        tokens += sum(n for _, n in chunk)
    return Row("transformers", batch, len(work), tokens, *clock.elapsed(), None)


def bench_decode_forward(
    engine: Engine, batches: list[int], cached: int = 48, repeats: int = 7
) -> dict[int, dict[str, float]]:
    """Tokens/s (wall and CPU) of one decode forward per batch size: medians of interleaved repeats."""
    caches: dict[int, KVCache] = {}
    for batch in batches:
        caches[batch] = engine.new_cache(cached + repeats + 1, batch_size=batch)
        prompt = torch.full((batch, cached), 5, device=engine.device)  # (B, S)
        engine.prefill_batch(prompt, caches[batch])
    times: dict[int, list[tuple[float, float]]] = {batch: [] for batch in batches}
    for _ in range(repeats):
        for batch in batches:
            token = torch.full((batch, 1), 7, device=engine.device)  # (B, 1)
            clock = Clock()
            engine.decode_batch(token, caches[batch])
            times[batch].append(clock.elapsed())
    median = lambda values: sorted(values)[len(values) // 2]  # noqa: E731
    return {
        batch: {"tok_s": batch / median([w for w, _ in t]), "tok_per_cpu_s": batch / median([c for _, c in t])}
        for batch, t in times.items()
    }


def run(quick: bool, threads: int) -> dict:
    set_threads(threads)  # the entry point's one setting
    engine = load_engine(device="cpu", dtype="float32")
    from transformers import AutoModelForCausalLM

    reference = AutoModelForCausalLM.from_pretrained(str(engine.folder), dtype=torch.float32).eval()
    batches, answers = ([1, 4, 8], (2, 12)) if quick else ([1, 4, 16, 32], (4, 24))
    warm = make_workload(engine, 2, (2, 2), seed=1)
    bench_ours_static(engine, warm, 2)  # first-call allocations out of the timings
    rows: list[Row] = []
    for batch in batches:
        work = make_workload(engine, 4 if batch == 1 else min(2 * batch, 32), answers, seed=batch)
        baseline = bench_ours_static(
            engine, work if batch == 1 else work[:2], 1, "ours static" if batch == 1 else "ours b1 ref"
        )
        measured = (
            [baseline]
            if batch == 1
            else [baseline, bench_ours_static(engine, work, batch), bench_ours_continuous(engine, work, batch)]
        )
        measured.append(bench_transformers(reference, work, batch, pad_id=0))
        for row in measured:
            row.ratio_vs_ours_b1 = row.tok_s / baseline.tok_s
            row.cpu_ratio_vs_ours_b1 = row.tok_per_cpu_s / baseline.tok_per_cpu_s
        rows.extend(measured)
        print(f"  batch {batch}: done", flush=True)
    forward_only = bench_decode_forward(engine, batches)
    return {
        "model": engine.config.name,
        "dtype": "float32",
        "device": "cpu",
        "threads": threads,
        "cpu_count": os.cpu_count(),
        "load_average_at_end": os.getloadavg(),
        "machine": platform.machine(),
        "torch": torch.__version__,
        "quick": quick,
        "answer_range": answers,
        "rows": [{**asdict(r), "tok_s": r.tok_s, "tok_per_cpu_s": r.tok_per_cpu_s} for r in rows],
        "decode_forward": {str(b): v for b, v in forward_only.items()},
    }


def print_table(report: dict) -> None:
    print(
        f"\n{report['model']} fp32 CPU, {report['threads']} thread(s); mixed prompts 8-64, answers "
        f"{report['answer_range'][0]}-{report['answer_range'][1]} tokens, greedy; 'x b1' = over the "
        f"batch-1 baseline run just before"
    )
    print(
        f"{'runner':<16}{'batch':>6}{'reqs':>5}{'tokens':>7}{'wall s':>8}{'tok/s':>7}{'x b1':>6}"
        f"{'cpu s':>7}{'tok/cpu-s':>10}{'x b1':>6}{'decode tok/s':>13}"
    )
    for r in report["rows"]:
        decode = f"{r['decode_tok_s']:.1f}" if r["decode_tok_s"] is not None else "-"
        print(
            f"{r['runner']:<16}{r['batch']:>6}{r['requests']:>5}{r['output_tokens']:>7}{r['seconds']:>8.1f}"
            f"{r['tok_s']:>7.1f}{r['ratio_vs_ours_b1']:>6.2f}{r['cpu_seconds']:>7.1f}{r['tok_per_cpu_s']:>10.1f}"
            f"{r['cpu_ratio_vs_ours_b1']:>6.2f}{decode:>13}"
        )
    forward = report["decode_forward"]
    print("\none decode forward alone (medians, batch sizes interleaved):")
    base = forward["1"]
    for batch, rate in forward.items():
        wall, cpu = rate["tok_s"], rate["tok_per_cpu_s"]
        print(
            f"  batch {batch:>3}: {wall:7.1f} tok/s ({wall / base['tok_s']:5.2f}x b1)"
            f"   {cpu:7.1f} tok/cpu-s ({cpu / base['tok_per_cpu_s']:5.2f}x b1)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="batches 1, 4, 8 and short answers (about a minute)")
    parser.add_argument(
        "--threads",
        type=whole_arg,
        default=1,
        help="torch CPU threads (default 1: on a shared 2-core machine, 2 threads that "
        "compete with other processes run many times slower)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    report = run(args.quick, args.threads)
    print_table(report)
    print()
    write_report(report, args.out, indent=2)


if __name__ == "__main__":
    main()
