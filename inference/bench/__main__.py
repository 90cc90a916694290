"""Engine benchmark: one row per weights mode, against transformers and llama.cpp measured in the same run.

    python -m inference.bench [--modes fp32,fp32-compiled,bf16,bf16-compiled,gguf,gguf-compiled,int8,int4]
                              [--new-tokens 64] [--repeats 3] [--threads N] [--device cpu]
                              [--model PATH.gguf | gemma-3-270m] [--no-memory]

Rows: ours in float32 and bfloat16 (dense), and each quantized mode (``quant="gguf"``:
the file's own blocks; "int8" / "int4": quantized on load); "-compiled": with the decode step
as one compiled graph (``compile=True``; the benchmark waits for it, and says whether it was
compiled or loaded from disk, and in how many seconds). For each row:

- decode tok/s at batch 1 (greedy, after an 11-token prompt; the steps after the first);
- aggregate decode tok/s at batch 16 (16 requests in one static batch, decode steps only);
- prefill tok/s on a 128-token prompt;
- the share of the memory-bandwidth bound: bytes of weights a decode step reads × tok/s
  / bandwidth, with the bandwidth a timed reduction over 512 MiB in the same run;
- ratios against transformers ``generate()`` (same dtype; float32 for the quantized rows)
  and against llama.cpp on the same GGUF file with the same thread count, when
  ``llama-cpp-python`` is installed (``requirements-bench.txt``; a 5-minute compile);
- memory (``inference/bench/memory.py``, unless ``--no-memory``): the mode loaded again alone in
  a fresh process, its resident size once loaded, its compiled step ready and 16 tokens decoded
  (anonymous + file-backed), and the bytes of the tensors it keeps; llama.cpp's the same way, in a
  fresh process without torch, with a 2,048-token context.

Machines here are noisy, so every system is measured once per repeat, interleaved, and
each figure is the median over repeats. Prints a table, writes ``bench-results/engine.json``.
Accuracy against the float32 reference is ``python -m inference.bench.accuracy``.

``--speculate`` runs the speculative decoding benchmark instead (``inference/bench/speculative.py``):
each drafter of ``--drafters`` against plain decoding, in one weights ``--mode``.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..generation.engine import Engine, load_engine
from ..generation.sampling import SamplingParams
from ..generation.speculative import DEFAULT_DRAFT_TOKENS
from ..model.loader import gguf_source
from ..number_text import whole_arg
from ..serving.static import run_static
from ..threads import available_cores, set_threads
from . import memory, speculative
from .modes import DEFAULT_MODES, MODES, kernel_of
from .references import LlamaCppReference, TransformersReference, llama_cpp_problem, timed
from .report import write_report

PROMPT = "The cat sat on the mat because it was tired."


def read_bandwidth(device: torch.device, megabytes: int = 512, repeats: int = 5) -> float:
    """Bytes/s read by a reduction over a large tensor: the rate at which weights can stream in."""
    source = torch.empty(megabytes * 2**20 // 4, dtype=torch.float32, device=device).normal_()
    best = min(timed(lambda: (source.sum(), _sync(device))) for _ in range(repeats))
    return source.nbytes / best


def cpu_kernels() -> dict:
    """The instruction set torch dispatches to and the one inductor generates code for, and whether inductor's
    4-bit weight micro-GEMM (``CppMicroGemmWoQInt4Avx512``, what freezing + max-autotune can pick for the
    compiled step's 4-bit products) exists for it: it is written for AVX-512 only; and the kernel the engine
    picks for the weight groups here (``inference.model.kernels``), with the CPU's flags that matter to it."""
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    from ..model.kernels import default_kernel

    isa = pick_vec_isa()
    name = type(isa).__name__.removeprefix("Vec") if isa else "none"
    return {
        "aten": torch.backends.cpu.get_cpu_capability(),
        "inductor": name,
        "int4_template": "AVX512" in name,
        "groups_kernel": default_kernel(torch.device("cpu")),
        "flags": cpu_flags(),
    }


def cpu_flags() -> list[str]:
    """The CPU's vector flags (from /proc/cpuinfo; empty where it has none): AVX2, AVX-512's, VNNI, BF16, NEON/SVE."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    line = next((ln for ln in text.splitlines() if ln.startswith(("flags", "Features"))), "")
    wanted = ("avx2", "fma", "avx512", "avx_vnni", "amx", "asimd", "sve", "i8mm", "bf16")
    return sorted({flag for flag in line.partition(":")[2].split() if flag.startswith(wanted)})


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def step_tensors(model: torch.nn.Module) -> list[torch.Tensor]:
    """The weights one decode step reads whole, each once: every projection (packed codes and scales
    included) and norm, and the output matrix; not the embedding (a lookup reads one row) or RoPE tables."""
    seen, out = set(), []
    # remove_duplicate=False: a tied output matrix is listed as "lm_head.weight" too (and read whole every step)
    tensors = list(model.named_parameters(remove_duplicate=False)) + list(model.named_buffers(remove_duplicate=False))
    for name, tensor in tensors:
        if name.startswith(("embed.", "rope.")) or tensor.data_ptr() in seen:
            continue
        seen.add(tensor.data_ptr())
        out.append(tensor.detach())
    return out


def weight_bytes(engine: Engine) -> int:
    """Bytes of weights one decode step reads: ``step_tensors`` plus one embedding row."""
    model = engine.model
    embed_row = model.config.d_model * (1 if model.quantization else torch.finfo(engine.dtype).bits // 8)
    return sum(t.nbytes for t in step_tensors(model)) + embed_row


@dataclass
class System:
    label: str
    decode: list[float] = field(default_factory=list)  # tok/s, batch 1, one per repeat
    batch16: list[float] = field(default_factory=list)
    prefill: list[float] = field(default_factory=list)

    def median(self, name: str) -> float | None:
        values = getattr(self, name)
        return statistics.median(values) if values else None


def ours_decode(engine: Engine, ids: list[int], new_tokens: int) -> float:
    params = SamplingParams(temperature=0, max_new_tokens=new_tokens, stop_on_eos=False)
    steps = list(engine.generate(ids, params))
    return (len(steps) - 1) / sum(s.seconds for s in steps[1:])


def ours_batch16(engine: Engine, ids: list[int], new_tokens: int) -> float:
    """Aggregate decode tok/s of 16 requests (the prompt with 16 different last tokens) in one static batch."""
    prompts = [ids[:-1] + [ids[-1] + i] for i in range(16)]
    run = run_static(
        engine, prompts, [SamplingParams(temperature=0, max_new_tokens=new_tokens, stop_on_eos=False)] * 16
    )
    decode = [s for s in run.steps if s.phase == "decode"]
    return sum(len(s.sampled) for s in decode) / sum(s.seconds for s in decode)


def ours_prefill(engine: Engine, ids: list[int]) -> float:
    cache = engine.new_cache(len(ids))
    return len(ids) / timed(lambda: (engine.prefill(ids, cache), _sync(engine.device)))


def run(
    modes: list[str],
    device: str | None,
    new_tokens: int,
    repeats: int,
    threads: int,
    model: str | None,
    with_memory: bool = True,
) -> dict:
    engines, compiled = {}, {}
    for mode in modes:  # one at a time: a compile in the background has the cores to itself
        engines[mode] = load_engine(
            model=model,
            device=device,
            dtype=MODES[mode][0],
            quant=MODES[mode][1],
            compile=MODES[mode][2],
            kernel=kernel_of(mode),
        )
        if MODES[mode][2]:
            status = engines[mode].wait_for_step()
            compiled[mode] = {"state": status.state, "detail": status.detail, "seconds": status.seconds}
            print(f"{mode}: decode step {status.line} ({status.detail})", flush=True)
    first = next(iter(engines.values()))
    short = first.tokenizer.encode(PROMPT)
    long = first.tokenizer.encode(" ".join([PROMPT] * 14))[:128]
    dtypes = sorted({torch.float32 if MODES[m][1] else _dtype(MODES[m][0]) for m in modes}, key=str)
    references = {dtype: TransformersReference(first.folder, dtype, str(first.device)) for dtype in dtypes}
    llama_problem = llama_cpp_problem() if first.device.type == "cpu" else "llama.cpp is measured on the CPU only"
    source = gguf_source(model)
    llama = LlamaCppReference(source, threads) if llama_problem is None and source is not None else None
    systems = {mode: System(f"ours, {mode}") for mode in modes}
    systems.update({f"hf-{d}": System(f"transformers, {str(d).removeprefix('torch.')}") for d in references})
    if llama is not None:
        systems["llama.cpp"] = System(f"llama.cpp {llama.version}")
    for engine in engines.values():  # warm-up: first-call allocations (and compilation) out of the timings
        ours_decode(engine, short, 4)
        ours_batch16(engine, short, 4)
    for _ in range(repeats):
        for mode, engine in engines.items():
            systems[mode].decode.append(ours_decode(engine, short, new_tokens))
            systems[mode].batch16.append(ours_batch16(engine, short, max(8, new_tokens // 4)))
            systems[mode].prefill.append(ours_prefill(engine, long))
        for dtype, reference in references.items():
            systems[f"hf-{dtype}"].decode.append(reference.decode_tok_s(short, new_tokens))
            systems[f"hf-{dtype}"].prefill.append(reference.prefill_tok_s(long))
        if llama is not None:
            systems["llama.cpp"].decode.append(llama.decode_tok_s(short, new_tokens))
            systems["llama.cpp"].prefill.append(llama.prefill_tok_s(long))
    bandwidth = read_bandwidth(first.device)
    rows = []
    for mode, engine in engines.items():
        system, reference_dtype = systems[mode], torch.float32 if MODES[mode][1] else engine.dtype
        decode, hf = system.median("decode"), systems[f"hf-{reference_dtype}"].median("decode")
        row = {
            "mode": mode,
            "weights": engine.weights_description,
            "decode_tok_s": decode,
            "batch16_tok_s": system.median("batch16"),
            "prefill_tok_s": system.median("prefill"),
            "weight_bytes_per_token": weight_bytes(engine),
            "bandwidth_share": weight_bytes(engine) * decode / bandwidth,
            "vs_transformers": decode / hf,
            "transformers_dtype": str(reference_dtype).removeprefix("torch."),
            "runs": {"decode": system.decode, "batch16": system.batch16, "prefill": system.prefill},
            "compiled_step": compiled.get(mode),
        }
        if llama is not None:
            row["vs_llama_cpp_decode"] = decode / systems["llama.cpp"].median("decode")
            row["vs_llama_cpp_prefill"] = row["prefill_tok_s"] / systems["llama.cpp"].median("prefill")
        if with_memory and engine.device.type == "cpu":  # a fresh process each (a compiled step: from disk now)
            row["memory"] = memory.measure(mode, model, threads)
        rows.append(row)
    reference_rows = {
        key: {
            "label": s.label,
            "decode_tok_s": s.median("decode"),
            "prefill_tok_s": s.median("prefill"),
            "runs": {"decode": s.decode, "prefill": s.prefill},
        }
        for key, s in systems.items()
        if key not in engines
    }
    if llama is not None and with_memory:  # a fresh process of its own, as each of our modes
        reference_rows["llama.cpp"]["memory"] = memory.measure_llama_cpp(source, threads)
    return {
        "model": first.config.name,
        "device": str(first.device),
        "threads": threads,
        "cpu_kernels": cpu_kernels(),
        "new_tokens": new_tokens,
        "repeats": repeats,
        "read_bandwidth_bytes_s": bandwidth,
        "rows": rows,
        "references": reference_rows,
        "llama_cpp": "measured" if llama is not None else (llama_problem or "the model is not a GGUF file"),
    }


def _dtype(name: str) -> torch.dtype:
    return {"float32": torch.float32, "bfloat16": torch.bfloat16}[name]


def print_table(report: dict) -> None:
    print(
        f"\n{report['model']} on {report['device']}, {report['threads']} thread(s); greedy, {report['new_tokens']} "
        f"tokens after an 11-token prompt; medians of {report['repeats']} interleaved runs; read bandwidth "
        f"{report['read_bandwidth_bytes_s'] / 1e9:.1f} GB/s"
    )
    kernels = report.get("cpu_kernels")
    if kernels:
        template = "available" if kernels["int4_template"] else "not available (it needs AVX-512)"
        print(
            f"CPU kernels: torch {kernels['aten']}, inductor {kernels['inductor']}; inductor's 4-bit micro-GEMM "
            f"{template}; weight groups by default on {kernels.get('groups_kernel', '?')}"
        )
        print(f"CPU flags: {' '.join(kernels.get('flags', [])) or 'unknown'}")
    has_llama = report["llama_cpp"] == "measured"
    print(
        f"{'mode':<14}{'decode':>10}{'batch 16':>10}{'prefill':>10}{'MiB/token':>11}{'BW share':>10}"
        f"{'vs HF':>8}" + (f"{'vs llama.cpp decode':>21}{'prefill':>9}" if has_llama else "")
    )
    for r in report["rows"]:
        line = (
            f"{r['mode']:<14}{r['decode_tok_s']:>8.1f}/s{r['batch16_tok_s']:>8.1f}/s{r['prefill_tok_s']:>8.0f}/s"
            f"{r['weight_bytes_per_token'] / 2**20:>11.0f}{100 * r['bandwidth_share']:>9.0f}%"
            f"{r['vs_transformers']:>7.2f}x"
        )
        if has_llama:
            line += f"{r['vs_llama_cpp_decode']:>20.2f}x{r['vs_llama_cpp_prefill']:>8.2f}x"
        print(line)
    for ref in report["references"].values():
        prefill = f", prefill {ref['prefill_tok_s']:.0f} tok/s" if ref["prefill_tok_s"] else ""
        print(f"  {ref['label']}: decode {ref['decode_tok_s']:.1f} tok/s{prefill}")
    if not has_llama:
        print(f"  llama.cpp left out: {report['llama_cpp']}")
    for result in [r.get("memory") for r in report["rows"]] + [report["references"].get("llama.cpp", {}).get("memory")]:
        if result:
            print("  " + "\n  ".join(memory.describe(result)[:2]))
    for r in report["rows"]:
        step = r.get("compiled_step")
        print(f"  {r['mode']}: {r['weights']}" + (f"; decode step {step['state']}: {step['detail']}" if step else ""))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m inference.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default=DEFAULT_MODES)
    parser.add_argument("--device", default=None)
    parser.add_argument(
        "--model",
        default=None,
        help="a .gguf file or a packaged model's name, e.g. gemma-3-270m (default: the embedded SmolLM2)",
    )
    parser.add_argument("--new-tokens", type=whole_arg, default=64)
    parser.add_argument("--repeats", type=whole_arg, default=3)
    parser.add_argument(
        "--threads",
        type=whole_arg,
        default=None,
        help="torch and llama.cpp CPU threads (default: every core)",
    )
    parser.add_argument("--out", default=None, help="default: bench-results/engine.json (or speculative.json)")
    parser.add_argument("--no-memory", action="store_true", help="leave out each mode's memory in a fresh process")
    parser.add_argument("--speculate", action="store_true", help="the speculative decoding benchmark instead")
    parser.add_argument("--drafters", default=speculative.DEFAULT_DRAFTERS, help="with --speculate: lookup, self:k")
    parser.add_argument(
        "--draft-tokens",
        type=whole_arg,
        default=DEFAULT_DRAFT_TOKENS,
        help="with --speculate: tokens drafted per step",
    )
    parser.add_argument("--mode", default="fp32", help="with --speculate: the one weights mode (see --modes)")
    parser.add_argument(
        "--prompts", default=None, help=f"with --speculate: some of {', '.join(speculative.PROMPTS)} (default: all)"
    )
    args = parser.parse_args(argv)
    threads = set_threads(
        args.threads or available_cores()
    )  # the entry point's one setting; every engine runs under it
    if args.speculate:
        if args.mode not in MODES:
            parser.error(f"unknown mode {args.mode!r}: choose from {sorted(MODES)}")
        _speculate(args, threads)
        return
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown modes {unknown}: choose from {sorted(MODES)}")
    report = run(modes, args.device, args.new_tokens, args.repeats, threads, args.model, not args.no_memory)
    print_table(report)
    write_report(report, args.out or "bench-results/engine.json")


def _speculate(args: argparse.Namespace, threads: int) -> None:
    dtype, quant, compiled = MODES[args.mode]
    engine = load_engine(
        model=args.model, device=args.device, dtype=dtype, quant=quant, compile=compiled, kernel=kernel_of(args.mode)
    )
    if compiled:
        print(f"{args.mode}: decode step {engine.wait_for_step().line}", flush=True)
    before = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    drafters = [d for d in args.drafters.split(",") if d]
    prompts = [p for p in args.prompts.split(",") if p] if args.prompts else None
    unknown = [p for p in prompts or [] if p not in speculative.PROMPTS]
    if unknown:
        raise SystemExit(f"unknown prompts {unknown}: choose from {', '.join(speculative.PROMPTS)}")
    report = speculative.run(engine, drafters, args.draft_tokens, args.new_tokens, args.repeats, prompts)
    after = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    report.update(threads=threads, mode=args.mode, loadavg=[before, after])
    speculative.print_table(report, threads, (before, after))
    write_report(report, args.out or "bench-results/speculative.json")


if __name__ == "__main__":
    main()
