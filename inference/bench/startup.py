"""How long the compiled decode step takes to be ready: a cold start (nothing on disk) and a warm restart.

    python -m inference.bench.startup [--modes gguf,fp32,bf16] [--model gemma-3-270m] [--threads N] [--restart-only]

Each start is a fresh process, as a server restart is: it loads the engine, then builds its
``DecodeStep`` in a folder of its own. Cold: an empty folder and an empty inductor cache
(``TORCHINDUCTOR_CACHE_DIR``), so everything is compiled and autotuned. Warm: the same folder again,
so the package compiled by the cold start is loaded. ``--restart-only`` skips the cold start and
measures one restart of the app as it is: the app's own folder (``cache_root()/compiled-steps``) and
inductor's own cache, where a package is already kept (on a loaded machine a cold start with
max-autotune takes many minutes; each package's manifest records its compile seconds). Prints, per mode, the seconds from the process's
start to the model loaded and to the compiled step ready, and writes ``bench-results/startup.json``.
The goal: a warm restart has the compiled step ready within 20 s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ..number_text import whole_arg

CHILD = r"""
import json, sys, time
started = time.perf_counter()
from pathlib import Path
from inference.generation.engine import load_engine
from inference.model.decode_step import DecodeStep
from inference.threads import set_threads
model, dtype, quant, folder, threads = sys.argv[1:6]
set_threads(int(threads))
engine = load_engine(model=model or None, dtype=dtype, quant=quant or None)
loaded = time.perf_counter()
step = DecodeStep(engine.model, quant or dtype, Path(folder), background=False)
print(json.dumps({"load_seconds": loaded - started, "ready_seconds": time.perf_counter() - started,
                  "state": step.status.state, "detail": step.status.detail}))
"""
MODES = {"fp32": ("float32", ""), "bf16": ("bfloat16", ""), "gguf": ("float32", "gguf")}


def start(model: str, mode: str, folder: Path, inductor_cache: Path | None, threads: int) -> dict:
    """One fresh process: load, then make the compiled step ready; its timings."""
    dtype, quant = MODES[mode]
    env = {**os.environ, **({"TORCHINDUCTOR_CACHE_DIR": str(inductor_cache)} if inductor_cache else {})}
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", CHILD, model, dtype, quant, str(folder), str(threads)],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m inference.bench.startup", description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="gguf")
    parser.add_argument("--model", default="")
    parser.add_argument("--threads", type=whole_arg, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path, default=Path("bench-results") / "startup.json")
    parser.add_argument(
        "--restart-only",
        action="store_true",
        help="one restart with the app's own package folder and inductor cache (no cold start)",
    )
    args = parser.parse_args(argv)
    rows = []
    for mode in args.modes.split(","):
        if args.restart_only:
            from ..model.gguf import cache_root

            rows.append(
                {"mode": mode, "restart": start(args.model, mode, cache_root() / "compiled-steps", None, args.threads)}
            )
            _print(mode, "restart", rows[-1]["restart"])
            continue
        with tempfile.TemporaryDirectory(prefix="step-startup-") as scratch:
            folder, inductor = Path(scratch) / "steps", Path(scratch) / "inductor"
            cold = start(args.model, mode, folder, inductor, args.threads)
            warm = start(args.model, mode, folder, inductor, args.threads)
        rows.append({"mode": mode, "cold": cold, "warm": warm})
        for name, run in (("cold", cold), ("warm", warm)):
            _print(mode, name, run)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"model": args.model or "default", "threads": args.threads, "rows": rows}, indent=1))


def _print(mode: str, name: str, run: dict) -> None:
    if "error" in run:
        print(f"{mode:<5} {name}: failed: {run['error']}")
    else:
        print(
            f"{mode:<5} {name}: model loaded at {run['load_seconds']:.1f} s, compiled step ready at "
            f"{run['ready_seconds']:.1f} s ({run['detail']})",
            flush=True,
        )


if __name__ == "__main__":
    main()
