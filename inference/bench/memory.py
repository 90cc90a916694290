"""Memory benchmark: what one engine holds, each weights mode loaded alone in a fresh process.

    python -m inference.bench.memory [--modes gguf,gguf-compiled,fp32] [--model PATH.gguf] [--threads N]

Each mode runs in a child process of its own, so nothing loaded before it counts: the child imports
torch, the engine and the libraries any load needs (transformers' tokenizers, gguf), reads its
baseline, then loads the engine (``load_engine``), waits for its compiled step where the mode has one,
and decodes 16 tokens. At each point it reads ``/proc/self/smaps_rollup`` (Linux): the resident size,
split into anonymous memory (the process's own: weights, caches, the heap) and file-backed pages
(libraries and any file mapped, such as a checkpoint), and names the largest mappings. Beside these,
``held_bytes`` is what the engine's own tensors take, each storage once: the weights as they are kept.
llama.cpp on the same GGUF file is read the same way in a child of its own that holds neither torch
nor the engine (``measure_llama_cpp``, ``inference/bench/resident.py``). The engine benchmark
(``python -m inference.bench``) reports these figures beside the speed, llama.cpp's beside ours.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

from ..number_text import whole_arg
from .modes import MODES, kernel_of
from .report import write_report
from .resident import PROMPT, Resident, largest_mappings, mapped_data_files

MIB = 2**20
POINTS = ("baseline", "loaded", "step_ready", "decoded")  # when a child reads its memory
COMPILER_MODULES = ("torch._dynamo", "torch._inductor", "sympy")


def held_bytes(model) -> int:
    """Bytes of the model's own tensors, each storage counted once (tied and shared tensors once): its parameters,
    its buffers and the groups a quantized module keeps for inspection."""
    import torch

    storages: dict[int, int] = {}
    for module in model.modules():
        tensors = [*module._parameters.values(), *module._buffers.values()]
        groups = getattr(module, "groups", None)
        if groups is not None and hasattr(groups, "__dataclass_fields__"):
            tensors += [value for value in vars(groups).values() if isinstance(value, torch.Tensor)]
        for tensor in tensors:
            if tensor is not None and not tensor.is_meta:
                storage = tensor.untyped_storage()
                storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values())


def measure_here(mode: str, model: str | None, threads: int | None, new_tokens: int = 16) -> dict:
    """One engine's memory in this process (meant to be a fresh one: ``measure``)."""
    import gguf  # noqa: F401 - the libraries any load imports, in the baseline
    import transformers  # noqa: F401

    from ..generation.engine import load_engine
    from ..generation.sampling import SamplingParams
    from ..threads import set_threads

    if threads:
        set_threads(threads)
    dtype, quant, compiled = MODES[mode]
    points = {"baseline": Resident.now()}
    engine = load_engine(model=model, dtype=dtype, quant=quant, compile=compiled, kernel=kernel_of(mode))
    points["loaded"] = Resident.now()
    status = engine.wait_for_step()
    points["step_ready"] = Resident.now()
    params = SamplingParams(temperature=0, max_new_tokens=new_tokens, stop_on_eos=False)
    list(engine.generate(engine.encode_prompt(PROMPT), params))
    points["decoded"] = Resident.now()
    return {
        "mode": mode,
        "model": engine.config.name,
        "points": {name: asdict(value) for name, value in points.items()},
        "held_bytes": held_bytes(engine.model),
        "step": None if status is None else f"{status.state}: {status.detail}",
        # torch's compiler in Python, which only compiling needs (~70 MiB of modules): imported by then, or not
        "compiler_modules": sorted(name for name in COMPILER_MODULES if name in sys.modules),
        "largest_mappings": largest_mappings(),
        "mapped_files": mapped_data_files(),
    }


def measure(mode: str, model: str | None = None, threads: int | None = None) -> dict:
    """``measure_here`` in a fresh child process (the figures are that engine's alone)."""
    command = [sys.executable, "-m", "inference.bench.memory", "--child", mode]
    command += ["--model", str(model)] if model else []
    command += ["--threads", str(threads)] if threads else []
    done = subprocess.run(command, capture_output=True, text=True, cwd=Path(__file__).parents[2])
    if done.returncode != 0:
        raise RuntimeError(f"measuring {mode} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure_llama_cpp(gguf_path: Path, threads: int) -> dict:
    """llama.cpp's memory on ``gguf_path`` in a fresh child that runs ``resident.py`` by its path: the standard
    library and llama.cpp only (``-P``: nothing from this folder on the path), so neither torch nor the engine counts.
    """
    script = Path(__file__).with_name("resident.py")
    command = [sys.executable, "-P", str(script), str(gguf_path), str(threads)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"measuring llama.cpp failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def describe(result: dict) -> list[str]:
    """A result in lines: resident size (anonymous + file-backed) at each point, the weights held, the mappings."""
    points = result["points"]
    cells = [
        f"{name} {points[name]['rss'] / MIB:.0f} ({points[name]['anonymous'] / MIB:.0f} + {points[name]['file'] / MIB:.0f})"
        for name in POINTS
        if name in points  # llama.cpp has no compiled step to wait for
    ]
    lines = [f"{result['mode']}: RSS MiB (anonymous + file) " + ", ".join(cells)]
    if "held_bytes" in result:
        step = f"; step {result['step']}" if result["step"] else ""
        compiler = result.get("compiler_modules")
        imported = f"; compiler imported: {', '.join(compiler) or 'none'}" if compiler is not None else ""
        lines.append(f"  tensors held {result['held_bytes'] / MIB:.0f} MiB" + step + imported)
    else:
        lines.append(f"  a {result['context']:,}-token context, {result['tokens']} tokens decoded")
    lines += [
        f"  {rss / MIB:7.1f} MiB ({anon / MIB:.1f} anonymous)  {name}" for name, rss, anon in result["largest_mappings"]
    ]
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m inference.bench.memory", description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="gguf,gguf-compiled", help="weights modes, as the engine benchmark's")
    parser.add_argument("--model", default=None, help="a .gguf file or a packaged model's name")
    parser.add_argument("--threads", type=whole_arg, default=None)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)  # one mode, measured here, as JSON
    parser.add_argument("--out", default="bench-results/memory.json")
    args = parser.parse_args(argv)
    modes = [m for m in (args.child or args.modes).split(",") if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown modes {unknown}: choose from {sorted(MODES)}")
    if args.child:
        print(json.dumps(measure_here(args.child, args.model, args.threads)))
        return
    results = [measure(mode, args.model, args.threads) for mode in modes]
    for result in results:
        print("\n".join(describe(result)))
    write_report(results, args.out)


if __name__ == "__main__":
    main()
