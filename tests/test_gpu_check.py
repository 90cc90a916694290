"""The GPU check's logic, on the CPU with tiny shapes, so that its run on a lent GPU is its first real run, not
its first run (``python -m inference.bench.gpu --device cpu --tiny --compile-backend eager``).

Checked: the script runs with the packages the GPU machine lacks made unimportable (gguf, streamlit,
plotly, llama.cpp), every check passes (device against CPU, the static step, captured and compiled, against the eager
engine in bfloat16 and on the 4-bit path, both families), every speed row is written for batch 1 and the
big batch, a budget cuts the tail and says what it left out, the script's time limits add up to less
than the 8 minutes a lent machine gives it, and the carried-wheels script only ever lists pure-Python wheels.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from inference.bench import gpu

# What a lent GPU machine's python3 lacks (it has torch, numpy, safetensors, tokenizers, transformers).
MISSING_THERE = ("gguf", "streamlit", "plotly", "llama_cpp")
BLOCKER = f"""
import importlib.abc, sys

class _MissingOnTheGpuMachine(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {MISSING_THERE!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (as on a lent GPU machine)", name=name)

sys.meta_path.insert(0, _MissingOnTheGpuMachine())
"""


def test_the_gpu_check_runs_on_the_cpu_with_tiny_shapes(tmp_path):
    """The script as the GPU machine runs it (its own python3 stands in: this one), on the CPU and tiny shapes."""
    root = Path(__file__).parents[1]
    site = tmp_path / "site"  # a sitecustomize that makes the GPU machine's missing packages unimportable
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)
    out = tmp_path / "out"
    env = {
        **os.environ,
        "OUT": str(out),
        "PYTHON": sys.executable,
        "GPU_CHECK_DEVICE": "cpu",
        "GPU_CHECK_ARGS": "--tiny --compile-backend eager",
        "PYTHONPATH": str(site),
    }
    done = subprocess.run(
        ["bash", str(root / "scripts" / "gpu-check.sh")],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert "as on a lent GPU machine" not in done.stdout + done.stderr  # nothing reached for a missing package
    checks = json.loads((out / "checks.json").read_text())
    assert done.returncode == 0, (done.stdout[-2000:], [c for c in checks if not c["ok"]])
    names = {c["name"] for c in checks}
    for name, mode in (("tiny-llama", "bfloat16"), ("tiny-llama", "int4"), ("tiny-gemma", "bfloat16")):
        assert f"{name} {mode}: captured step equals eager" in names
        assert f"{name} {mode}: compiled step equals eager" in names
    speed = json.loads((out / "speed.json").read_text())
    rows = {(r["model"], r["mode"], r["kind"], r["batch"]) for r in speed["rows"]}
    assert ("smollm2", "bf16", "compiled", 4) in rows and ("gemma", "int4", "captured", 1) in rows
    assert all(r["tok_s"] > 0 for r in speed["rows"]) and speed["left_out"] == []
    assert json.loads((out / "env.json").read_text())["tiny"] is True
    tests = (out / "gpu-tests.txt").read_text()
    assert "skipped" in tests and "error" not in tests.lower()  # collected without the missing packages, then skipped


def test_the_blocker_blocks():
    """The positive control of the run above: its sitecustomize does make a missing package unimportable."""
    code = BLOCKER + "\ntry:\n    import gguf\nexcept ModuleNotFoundError as exc:\n    print(exc)\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert "as on a lent GPU machine" in done.stdout


def test_the_script_fits_in_eight_minutes():
    """The limits in gpu-check.sh (each step's ``timeout``) add up to less than the 8 minutes it is given."""
    check = (Path(__file__).parents[1] / "scripts" / "gpu-check.sh").read_text()
    limits = [int(n) for n in re.findall(r"^\s*timeout (\d+) ", check, flags=re.MULTILINE)]
    assert len(limits) == 2 and sum(limits) <= 8 * 60 - 15, limits  # 15 s for nvidia-smi, unpacking, start-up
    budget = int(re.search(r"GPU_CHECK_BUDGET:-(\d+)", check).group(1))
    assert budget < limits[-1]  # the benchmark's budget stops new rows before its timeout kills it


def test_a_budget_leaves_rows_out_and_says_which(tmp_path):
    gpu.main(["--device", "cpu", "--tiny", "--compile-backend", "eager", "--out", str(tmp_path), "--budget", "0"])
    speed = json.loads((tmp_path / "speed.json").read_text())
    assert speed["rows"] == [] and "speed smollm2 bf16 eager batch 1" in speed["left_out"]


def test_the_carried_wheels_are_pure_python():
    script = (Path(__file__).parents[1] / "scripts" / "gpu-wheels.sh").read_text()
    assert "--only-binary=:all:" in script and "none-any.whl" in script
    check = (Path(__file__).parents[1] / "scripts" / "gpu-check.sh").read_text()
    commands = [line for line in check.splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in commands if re.search(r"(?<![\w-])pip3?(?![\w-])|setup\.sh", line)]  # no install
