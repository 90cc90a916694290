"""The candidate kernels for the 4-bit products, each inside one compiled graph: one token's products alone.

    python -m inference.bench.kernels [--kinds int4pack,int8rows,q8dot,groups,groups-bf16,groups-flat,dyn-int8]
                                      [--threads 2,1] [--rounds 5] [--packages DIR]

A decode step of SmolLM2 multiplies one row by 121 matrices: 30 layers × (Q/K/V stacked, O,
gate/up stacked, down) as Q4_1, and the tied Q8_0 output matrix. This compiles those products
alone (the file's own blocks, every size of rows dynamic) with AOTInductor and the engine's
options (freezing, max-autotune) into one package per candidate, the projections and the output
matrix apart, and times one pass of each at batch 1, interleaved: every candidate once per round,
at each thread count, medians over rounds. The candidates:

- ``int4pack``: today's modules (``quant.Int4Linear``, ``quant.Int8GroupLinear``): torch's packed 4-bit kernel,
  bfloat16 inputs (on AVX-512 inductor swaps in its weight-only micro-GEMM);
- ``int8rows``: ATen's ``_weight_int8pack_mm`` on the weights re-quantized to 8 bits per row (not exact: a
  row's scale cannot hold Q4_1's per-group scales and minimums), the engine's AVX2 choice without a compiler;
- ``q8dot``: our own kernels (``kernels.Q8DotLinear``, ``kernels.Q8DotHead``: int8 inputs per group of 32 times the
  file's codes, the output matrix's top 64 again with float inputs), the engine's AVX2 choice where it builds;
- ``groups``: ``GroupCodes``: int8 codes, each group's scale and zero in float32, float32 inputs, the product
  as tensor ops inductor compiles into the graph (exact);
  ``groups-bf16`` the same with inputs rounded to bfloat16 first; ``groups-flat`` the weights dequantized in the
  loop and one sum over the whole row instead of a sum per group;
- ``dyn-int8``: dynamic int8 activations, one scale per group of 32 (llama.cpp's Q8_1 × Q4_1), int32 dots.

Prints the medians and each against ``int4pack``. ``--eager`` times instead one product of each shape
(layer 0's four and the output matrix) called eagerly, interleaved the same way: the kernels' own speed,
each call's dispatch included. ``python -m inference.bench --modes
gguf-compiled@int4pack,gguf-compiled@groups`` times the whole step; ``python -m inference.bench.accuracy
--modes gguf-compiled@groups,gguf@kleidiai`` measures the accuracy. Writes ``bench-results/kernels.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from pathlib import Path

import torch
from torch import nn

from ..model import native
from ..model.gguf import cache_root, default_gguf_path, read_raw_weights
from ..model.kernels import Q8DotHead, Q8DotLinear
from ..model.loader import model_folder, read_config
from ..model.quant import EXACT_TOP, Int4Linear, Int8GroupLinear, Int8Linear
from ..model.quant_formats import GROUP, INT4_FORMATS, INT8_FORMATS, Int4Groups, Int8Groups, int8_rows_from_float
from ..model.weights import projection_sources
from ..number_text import whole_arg
from ..threads import set_threads
from .__main__ import cpu_kernels

KINDS = ("int4pack", "int8rows", "q8dot", "groups", "groups-bf16", "groups-flat", "dyn-int8")
OPTIONS = {"freezing": True, "max_autotune": True}  # the engine's (``decode_step.INDUCTOR_OPTIONS``)
CPU = torch.device("cpu")


def file_groups() -> dict[str, Int4Groups | Int8Groups]:
    """Every projection of the embedded model's GGUF as its groups, by engine name (not the token table)."""
    config = read_config(model_folder(None))
    raw = read_raw_weights(default_gguf_path())
    out = {}
    for name, hf_names in projection_sources(config).items():
        parts = [raw[hf] for hf in hf_names]
        types = {p.type_name for p in parts}
        if name == "embed":
            continue
        if types <= set(INT4_FORMATS):
            out[name] = Int4Groups.cat([INT4_FORMATS[p.type_name](p.raw) for p in parts])
        elif types <= set(INT8_FORMATS):
            q8 = [INT8_FORMATS["Q8_0"](p.raw) for p in parts]
            out[name] = Int8Groups(torch.cat([g.codes for g in q8]), torch.cat([g.scale for g in q8]))
    return out


class GroupCodes(nn.Module):
    """y = x @ W.T with W as int8 codes in groups of 32, ``w = q · scale + zero`` (no zero: Q8_0), as tensor ops.

    The int8 -> bfloat16 conversion of the codes is the one inductor's freezing leaves in the graph
    (``constant_folding.is_woq_int8_pattern``), so the codes stay one byte a weight; small integers are exact in
    bfloat16, the products and sums are float32. ``bf16``: the inputs rounded to bfloat16 first; ``flat``: the
    weights dequantized in the loop and one sum over the row instead of one per group.
    """

    def __init__(self, groups, bf16: bool = False, flat: bool = False) -> None:
        super().__init__()
        self.out_features, self.in_features = groups.codes.shape
        if isinstance(groups, Int4Groups):
            codes, zero = (groups.codes.to(torch.int16) - 8).to(torch.int8), groups.zero  # w = (q - 8)·scale + zero
        else:
            codes, zero = groups.codes, None  # w = q · scale
        self.register_buffer("codes", codes.contiguous())  # (N, K) int8
        self.register_buffer("scale", groups.scale.float().contiguous())  # (N, K/32)
        self.register_buffer("zero", None if zero is None else zero.float().contiguous())
        self.bf16, self.flat = bf16, flat

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.bf16:
            x = x.to(torch.bfloat16).float()
        n, k = self.out_features, self.in_features
        if not self.flat:
            m = x.shape[0]
            xg = x.view(m, 1, k // GROUP, GROUP)  # (M, 1, G, 32)
            codes = self.codes.view(n, k // GROUP, GROUP).to(torch.bfloat16).float()  # (N, G, 32), exact
            y = ((xg * codes).sum(-1) * self.scale).sum(-1)  # (M, N, G) -> (M, N)
            if self.zero is not None:
                y = y + xg.sum(-1).view(m, k // GROUP) @ self.zero.t()  # (M, G) @ (G, N): each zero · Σx
            return y
        xg = x.view(x.shape[0], 1, k // GROUP, GROUP)  # (M, 1, G, 32)
        w = self.codes.view(n, k // GROUP, GROUP).to(torch.bfloat16).float() * self.scale[..., None]  # (N, G, 32)
        if self.zero is not None:
            w = w + self.zero[..., None]
        return (xg * w).sum((-1, -2))  # (M, N)


class DynamicInt8(nn.Module):
    """Inputs quantized to int8 with one scale per group of 32 (Q8_1-like), int32 dots with the int8 codes."""

    def __init__(self, groups) -> None:
        super().__init__()
        self.inner = GroupCodes(groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inner = self.inner
        m, k = x.shape[0], inner.in_features
        xg = x.view(m, k // GROUP, GROUP)  # (M, G, 32)
        step = xg.abs().amax(-1).clamp_min(1e-30) / 127  # (M, G)
        xq = (xg / step[..., None]).round().to(torch.int32)  # (M, G, 32)
        codes = inner.codes.view(inner.out_features, k // GROUP, GROUP).to(torch.int32)  # (N, G, 32)
        dots = (xq[:, None] * codes).sum(-1)  # (M, N, G) int32
        y = (dots.float() * step[:, None] * inner.scale).sum(-1)  # (M, N)
        if inner.zero is not None:
            y = y + (xq.sum(-1).float() * step) @ inner.zero.t()  # (M, G) @ (G, N)
        return y


def candidate(kind: str, groups) -> nn.Module:
    if kind == "int4pack":
        return Int4Linear(groups, None, CPU) if isinstance(groups, Int4Groups) else Int8GroupLinear(groups, None, CPU)
    if kind == "int8rows":
        return Int8Linear(int8_rows_from_float(groups.dequantize()), None, CPU)
    if kind == "q8dot":
        return (
            Q8DotLinear(groups, None, CPU)
            if isinstance(groups, Int4Groups)
            else Q8DotHead(groups, None, CPU, EXACT_TOP)
        )
    if kind in ("groups", "groups-bf16", "groups-flat"):
        return GroupCodes(groups, bf16=kind == "groups-bf16", flat=kind == "groups-flat")
    if kind == "dyn-int8":
        return DynamicInt8(groups)
    raise ValueError(f"unknown kind {kind!r}: choose from {KINDS}")


class Products(nn.Module):
    """One row through every matrix: the inputs of width 576 and 1536 made once (the values do not matter)."""

    def __init__(self, modules: list[nn.Module], widths: list[int]) -> None:
        super().__init__()
        self.products = nn.ModuleList(modules)
        self.widths = widths

    def forward(self, narrow: torch.Tensor, wide: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(p(narrow if w == narrow.shape[1] else wide) for p, w in zip(self.products, self.widths))


def compiled_pass(kind: str, part: str, groups: dict, folder: Path):
    """The package of one candidate's products (``part``: "proj" or "head"), compiled once and kept in ``folder``."""
    names = [n for n in groups if (n == "lm_head") == (part == "head")]
    model = Products([candidate(kind, groups[n]) for n in names], [groups[n].codes.shape[1] for n in names]).eval()
    narrow_width = next(g.codes.shape[1] for g in groups.values())
    wide_width = max(g.codes.shape[1] for g in groups.values())
    ours = kind == "q8dot"  # the package calls our kernels' C entry points: keyed by their library too
    build = f"-{native.library_path().parent.name}" if ours else ""
    path = folder / f"{kind}-{part}-{torch.backends.cpu.get_cpu_capability()}-{torch.__version__}{build}.pt2"
    if not path.exists():
        rows = torch.export.Dim("rows", min=1, max=4096)
        example = (torch.randn(3, narrow_width), torch.randn(3, wide_width))
        options = {**OPTIONS, **native.compile_options()} if ours else OPTIONS
        with torch.no_grad(), native.linking() if ours else contextlib.nullcontext():
            exported = torch.export.export(model, example, dynamic_shapes=({0: rows}, {0: rows}), strict=False)
            torch._inductor.aoti_compile_and_package(exported, package_path=str(path), inductor_configs=options)
    runner = torch._inductor.aoti_load_package(str(path))
    inputs = (torch.randn(1, narrow_width), torch.randn(1, wide_width))
    with torch.no_grad():
        error = max(float((a - b).abs().max()) for a, b in zip(runner(*inputs), model(*inputs)))
    return runner, inputs, error


def run(kinds: list[str], threads: list[int], rounds: int, folder: Path) -> dict:
    set_threads(max(threads))
    groups = file_groups()
    folder.mkdir(parents=True, exist_ok=True)
    passes, errors = {}, {}
    for kind in kinds:
        for part in ("proj", "head"):
            started = time.perf_counter()
            runner, inputs, error = compiled_pass(kind, part, groups, folder)
            passes[kind, part], errors[f"{kind}/{part}"] = (runner, inputs), error
            print(f"{kind} {part}: ready in {time.perf_counter() - started:.0f} s", flush=True)
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    times: dict[str, list[float]] = {}
    for _ in range(rounds):
        for count in threads:
            set_threads(count)
            for (kind, part), (runner, inputs) in passes.items():
                for _ in range(3):
                    runner(*inputs)  # warm-up
                samples = []
                for _ in range(20):
                    started = time.perf_counter()
                    runner(*inputs)
                    samples.append(time.perf_counter() - started)
                times.setdefault(f"{kind}/{part}/{count}", []).append(statistics.median(samples))
    return {
        "cpu_kernels": cpu_kernels(),
        "threads": threads,
        "rounds": rounds,
        "loadavg_before_after": [load_before, Path("/proc/loadavg").read_text().split()[:3]],
        "compiled_vs_eager_max_abs": errors,
        "seconds": times,
    }


def run_eager(kinds: list[str], threads: list[int], rounds: int) -> dict:
    """Median seconds of one eager call per product shape (layer 0's and the output matrix) and thread count."""
    groups = file_groups()
    names = [n for n in groups if n.startswith("layers.0.")] + ["lm_head"]
    modules = {(name, kind): candidate(kind, groups[name]) for name in names for kind in kinds}
    inputs = {name: torch.randn(1, groups[name].codes.shape[1]) for name in names}
    times: dict[str, list[float]] = {}
    with torch.no_grad():
        for _ in range(rounds):
            for count in threads:
                set_threads(count)
                for (name, kind), module in modules.items():
                    for _ in range(3):
                        module(inputs[name])  # warm-up
                    started = time.perf_counter()
                    for _ in range(30):
                        module(inputs[name])
                    times.setdefault(f"{kind}/{name}/{count}", []).append((time.perf_counter() - started) / 30)
    return {"cpu_kernels": cpu_kernels(), "threads": threads, "rounds": rounds, "eager_seconds": times}


def print_eager(report: dict) -> None:
    seconds = {key: statistics.median(values) for key, values in report["eager_seconds"].items()}
    keys = [key.split("/") for key in seconds]
    kinds, names = list(dict.fromkeys(k for k, _, _ in keys)), list(dict.fromkeys(n for _, n, _ in keys))
    print(f"{'product':<22}{'threads':>8}" + "".join(f"{kind + ' µs':>16}" for kind in kinds))
    for count in report["threads"]:
        for name in names:
            row = "".join(f"{seconds[f'{kind}/{name}/{count}'] * 1e6:>16.1f}" for kind in kinds)
            print(f"{name:<22}{count:>8}{row}")


def print_table(report: dict) -> None:
    kernels = report["cpu_kernels"]
    print(f"torch {kernels['aten']}, inductor {kernels['inductor']}; flags: {' '.join(kernels['flags'])}")
    print(f"load average before / after timing: {report['loadavg_before_after']}")
    seconds = {key: statistics.median(values) for key, values in report["seconds"].items()}
    print(f"{'kernel':<14}{'threads':>8}{'products ms':>13}{'output ms':>11}{'token ms':>10}{'vs int4pack':>13}")
    for count in report["threads"]:
        base = seconds.get(f"int4pack/proj/{count}", 0) + seconds.get(f"int4pack/head/{count}", 0)
        for kind in dict.fromkeys(key.split("/")[0] for key in seconds):
            proj, head = seconds[f"{kind}/proj/{count}"], seconds[f"{kind}/head/{count}"]
            ratio = f"{base / (proj + head):.2f}×" if base else "-"
            print(f"{kind:<14}{count:>8}{proj * 1e3:>13.2f}{head * 1e3:>11.2f}{(proj + head) * 1e3:>10.2f}{ratio:>13}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m inference.bench.kernels", description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--threads", default="2,1", help="thread counts, comma-separated")
    parser.add_argument("--rounds", type=whole_arg, default=5)
    parser.add_argument("--packages", type=Path, default=None, help="where the compiled passes are kept")
    parser.add_argument("--eager", action="store_true", help="time one eager call per product shape instead")
    parser.add_argument("--out", type=Path, default=Path("bench-results/kernels.json"))
    args = parser.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        parser.error(f"unknown kinds {unknown}: choose from {KINDS}")
    try:
        threads = [int(t) for t in args.threads.split(",") if t]
    except ValueError:
        parser.error(f"--threads takes whole numbers separated by commas, got {args.threads!r}")
    if not threads or min(threads) < 1:
        parser.error("--threads needs at least one count of 1 or more")
    if args.eager:
        report = run_eager(kinds, threads, args.rounds)
        print_eager(report)
    else:
        report = run(kinds, threads, args.rounds, args.packages or cache_root() / "kernel-bench")
        print_table(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
