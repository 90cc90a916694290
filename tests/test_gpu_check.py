"""The GPU check's logic, on the CPU with tiny shapes, so that its run on a lent GPU is its first real run, not
its first run (``python -m inference.bench.gpu --device cpu --tiny --compile-backend eager``).

Checked: every check passes (device against CPU, the static step, captured and compiled, against the eager
engine in bfloat16 and on the 4-bit path, both families), every speed row is written for batch 1 and the
big batch, a budget cuts the tail and says what it left out, and the carried-wheels script only ever
lists pure-Python wheels.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from inference.bench import gpu


def test_the_gpu_check_runs_on_the_cpu_with_tiny_shapes(tmp_path):
    """The script as the GPU machine runs it (its own python3 stands in: this one), on the CPU and tiny shapes."""
    root = Path(__file__).parents[1]
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable, "GPU_CHECK_DEVICE": "cpu",
           "GPU_CHECK_ARGS": "--tiny --compile-backend eager"}
    done = subprocess.run(["bash", str(root / "scripts" / "gpu-check.sh")], env=env, cwd=root, capture_output=True,
                          text=True, timeout=600)
    checks = json.loads((tmp_path / "checks.json").read_text())
    assert done.returncode == 0, (done.stdout[-2000:], [c for c in checks if not c["ok"]])
    names = {c["name"] for c in checks}
    for name, mode in (("tiny-llama", "bfloat16"), ("tiny-llama", "int4"), ("tiny-gemma", "bfloat16")):
        assert f"{name} {mode}: captured step equals eager" in names
        assert f"{name} {mode}: compiled step equals eager" in names
    speed = json.loads((tmp_path / "speed.json").read_text())
    rows = {(r["model"], r["mode"], r["kind"], r["batch"]) for r in speed["rows"]}
    assert ("smollm2", "bf16", "compiled", 4) in rows and ("gemma", "int4", "captured", 1) in rows
    assert all(r["tok_s"] > 0 for r in speed["rows"]) and speed["left_out"] == []
    assert json.loads((tmp_path / "env.json").read_text())["tiny"] is True
    assert "no CUDA GPU" in (tmp_path / "gpu-tests.txt").read_text() or "skipped" in (tmp_path / "gpu-tests.txt").read_text()


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
