"""Is any page slower than in another checkout? The same tab walks on each tree's class server, interleaved.

    .venv/bin/python scripts/bench_trees.py --base /path/to/other/checkout [--repeats 3] [--students 6]

For each repeat, and for each tree in turn (the other checkout, then this one), starts a fresh class
server (``tests.load_scenario.CLASS_SERVER_ENV``) from that tree, warms it up with two tabs, then
lets ``--students`` tabs walk Tokenization → Attention → Logits → Sampling one after another (the
load scenario's own ``student``: open, type a new prompt, move each page's slider three times), for
two rounds of prompts. One tab at a time, so each figure is that tree's own cost, not a queue behind
other tabs: the server's CPU seconds (the Streamlit process and the engine's child) over the walks,
and each action's median seconds. Prints both trees' medians over the repeats and their ratio
(this tree / the other): what to compare across machines. A tree is imported from its own folder in
a child process, so the two never share a module. Writes ``bench-results/trees.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, statistics, sys, tempfile, time
from pathlib import Path
root = Path(sys.argv[1]); students = int(sys.argv[2])
sys.path.insert(0, str(root)); os.chdir(root)
from tests.load_scenario import CLASS_SERVER_ENV, MARKERS, WARM_UP_MARKER, AppServer, student
TICK = os.sysconf("SC_CLK_TCK")

def tree_cpu(pid):
    # CPU seconds (user + system) of pid and every process below it, from /proc
    tree, total, index = [pid], 0.0, 0
    while index < len(tree):
        for task in Path(f"/proc/{tree[index]}/task").glob("*/children"):
            tree += [int(child) for child in task.read_text().split()]
        index += 1
    for each in tree:
        try:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += (int(fields[11]) + int(fields[12])) / TICK  # utime, stime
    return total

with tempfile.TemporaryDirectory() as tmp, AppServer(Path(tmp) / "server.log", CLASS_SERVER_ENV) as server:
    for index in range(2):  # warm-up: imports, the first forwards, the compiled step's load
        student(server.url, index, WARM_UP_MARKER, [], index, 4, 2)
    cpu, wall = tree_cpu(server.proc.pid), time.perf_counter()
    reports = [student(server.url, i, MARKERS[i], [], r, 4, 3) for r in range(2) for i in range(students)]
    cpu, wall = tree_cpu(server.proc.pid) - cpu, time.perf_counter() - wall
actions = {}
for report in reports:
    if report.problems:
        raise SystemExit(f"tab {report.index}: {report.problems}")
    for name, seconds in report.timings:
        actions.setdefault(name, []).append(seconds)
print(json.dumps({"cpu_s": cpu, "wall_s": wall, "actions": {k: statistics.median(v) for k, v in sorted(actions.items())}}))
"""


def one_run(tree: Path, students: int) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tree), str(students)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the run on {tree} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(prog="scripts/bench_trees.py", description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="the other checkout (its own tests/load_scenario.py)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--students", type=int, default=6, help="tabs, one after another, per round (two rounds)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "trees.json")
    args = parser.parse_args()
    trees = {"base": args.base.resolve(), "this": ROOT}
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    for repeat in range(args.repeats):
        for name, tree in trees.items():  # interleaved: a drifting machine load hits both alike
            with open("/proc/loadavg") as handle:
                load = handle.read().split()[0]
            runs[name].append(one_run(tree, args.students))
            print(f"repeat {repeat + 1} {name}: {runs[name][-1]['cpu_s']:.1f} CPU s (load {load} before)", flush=True)

    def median(name: str, get) -> float:
        return statistics.median(get(run) for run in runs[name])

    rows = [("server CPU seconds", lambda run: run["cpu_s"]), ("wall seconds", lambda run: run["wall_s"])]
    rows += [(action, lambda run, a=action: run["actions"][a]) for action in runs["this"][0]["actions"]]
    print(f"\n{'':26}{'base':>9}{'this':>9}  this/base (medians of {args.repeats})")
    table = {}
    for label, get in rows:
        base, this = median("base", get), median("this", get)
        table[label] = {"base": base, "this": this, "ratio": this / base}
        print(f"{label:26}{base:9.3f}{this:9.3f}  {this / base:.2f}x")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"base": str(trees["base"]), "repeats": args.repeats, "table": table}, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
