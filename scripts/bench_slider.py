"""How long a temperature-slider move takes to rerun the Logits page, server-side (AppTest, in-process).

    .venv/bin/python scripts/bench_slider.py [--moves 20]

Prints the median and p90 rerun time of a slider move next to a rerun with nothing
changed, measured in the same run (their ratio is what to compare across machines).
The forward pass is cached, so a move should cost little more than a plain rerun.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]


def timed_run(at: AppTest) -> float:
    started = time.perf_counter()
    at.run()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(prog="scripts/bench_slider.py")
    parser.add_argument("--moves", type=int, default=20)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.run()
    at.switch_page("pages/logits.py")
    at.run()
    moves, plain = [], []
    for i in range(args.moves):  # interleaved, so drifting machine load hits both alike
        at.slider(key="_w_temperature").set_value(round(0.3 + 0.05 * (i % 30), 2))
        moves.append(timed_run(at))
        plain.append(timed_run(at))
    assert not at.exception, [e.value for e in at.exception]
    for name, values in (("slider move", moves), ("plain rerun", plain)):
        ordered = sorted(values)
        print(
            f"{name:12}: median {1000 * statistics.median(values):6.1f} ms, "
            f"p90 {1000 * ordered[int(0.9 * (len(ordered) - 1))]:6.1f} ms"
        )
    print(f"slider move / plain rerun: {statistics.median(moves) / statistics.median(plain):.2f}x")


if __name__ == "__main__":
    main()
