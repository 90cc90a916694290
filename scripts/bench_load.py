"""A class on one server, the big run: many tabs at once on a fresh ``streamlit run app.py``.

    .venv/bin/python scripts/bench_load.py [--students 20] [--rounds 3] [--pages 4] [--slider-moves 2]

Each tab (``tests.load_scenario.student``) opens a page, types its own prompt, then walks
``--pages`` of Tokenization → Attention → Logits → Sampling from its own starting point,
moving each page's slider ``--slider-moves`` times; all tabs start together. Every round
uses new prompts, so the page caches must evict. Prints, per page and overall, the median
and p95 time of a slider move (send → script_finished) next to the same move made by
one tab alone on the same server in the same run (the ratio is what to compare across
machines), the largest generation batch the Sampling page reported, the server's RSS
after each round, and every finding (an error, another tab's word, a missing own word).
Writes ``bench-results/load.json``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for tests.load_scenario, run as a script from anywhere

from tests.load_scenario import (CLASS_SERVER_ENV, MARKERS, PAGES, SLIDERS, WARM_UP_MARKER, AppServer, StudentReport,  # noqa: E402
                                 percentile, prompt_for, run_class, student, timings_of)
from tests.streamlit_client import StreamlitSession  # noqa: E402


def alone(url: str, moves: int) -> dict[str, list[float]]:
    """Slider-move seconds per page for one tab alone on the (warm, otherwise idle) server."""
    seconds: dict[str, list[float]] = {}
    with StreamlitSession(url) as tab:
        tab.open(PAGES[0])
        tab.set("_w_prompt", prompt_for(WARM_UP_MARKER))
        for page in PAGES:
            tab.open(page)
            key, value_for = SLIDERS[page]
            seconds[page] = [tab.set(key, value_for(0, step)).seconds for step in range(1, moves + 1)]
    return seconds


def stats(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "median": statistics.median(values), "p95": percentile(values, 95),
            "max": max(values)} if values else {"n": 0}


def findings(reports: list[StudentReport]) -> list[str]:
    return [f"tab {r.index} ({r.word}): {item}" for r in reports
            for item in r.problems + r.leaks + [f"own word missing on {what}" for what in r.missing]]


def main() -> None:
    parser = argparse.ArgumentParser(prog="scripts/bench_load.py")
    parser.add_argument("--students", type=int, default=20, help=f"tabs at once (at most {len(MARKERS)})")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pages", type=int, default=4, choices=range(1, len(PAGES) + 1))
    parser.add_argument("--slider-moves", type=int, default=2, help="slider moves per page per tab")
    parser.add_argument("--reference-moves", type=int, default=5, help="moves per page for the one-tab reference")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds one run may take before it counts as failed")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "load.json")
    args = parser.parse_args()

    log = Path(tempfile.mkdtemp(prefix="bench-load-")) / "streamlit.log"
    with AppServer(log, extra_env=CLASS_SERVER_ENV) as server:
        rss = {"started": server.rss_mib()}
        warm = student(server.url, 0, WARM_UP_MARKER, MARKERS)  # every page once: imports, model, first runs
        rss["warmed up"] = server.rss_mib()
        reference = alone(server.url, args.reference_moves)
        rounds = []
        for round_index in range(args.rounds):
            started = time.perf_counter()
            reports = run_class(server.url, args.students, round_index, args.pages, args.slider_moves, args.timeout)
            rounds.append({"seconds": time.perf_counter() - started, "reports": reports})
            rss[f"after round {round_index + 1}"] = server.rss_mib()
            print(f"round {round_index + 1}: {args.students} tabs in {rounds[-1]['seconds']:.1f} s, "
                  f"RSS {rss[f'after round {round_index + 1}']:,.0f} MiB", flush=True)
        reference_after = alone(server.url, args.reference_moves)  # the same tab alone again: drift check

    every = [r for rnd in rounds for r in rnd["reports"]]
    problems = findings([warm]) + findings(every)
    ref_all = [s for values in reference.values() for s in values]
    ref_after_all = [s for values in reference_after.values() for s in values]
    loaded_all = timings_of(every, "slider:")
    batch_sizes = [size for r in every for size in r.batch_sizes]

    print(f"\n{args.students} tabs at once × {args.rounds} rounds, {args.pages} page(s) each, "
          f"{args.slider_moves} slider move(s) per page; {len(loaded_all)} slider moves in all")
    print(f"{'slider move':26} {'alone median':>12} {'loaded median':>13} {'loaded p95':>10} {'p95 / alone':>11}")
    rows = [(page, reference[page], timings_of(every, f"slider:{page}")) for page in PAGES]
    rows.append(("all pages", ref_all, loaded_all))
    for name, ref, loaded in rows:
        if not loaded:
            continue
        ref_median = statistics.median(ref)
        print(f"{name:26} {ref_median:11.2f}s {statistics.median(loaded):12.2f}s {percentile(loaded, 95):9.2f}s "
              f"{percentile(loaded, 95) / ref_median:10.1f}×")
    ref_median = statistics.median(ref_all)
    print(f"\np95 of a slider move under {args.students} tabs = {percentile(loaded_all, 95) / ref_median:.1f}× "
          f"the single-tab median ({percentile(loaded_all, 95):.2f} s vs {ref_median:.2f} s; median "
          f"{statistics.median(loaded_all) / ref_median:.1f}×). Single tab again after the rounds: median "
          f"{statistics.median(ref_after_all):.2f} s.")
    for prefix, label in (("open:", "page opened"), ("prompt:", "prompt typed")):
        values = timings_of(every, prefix)
        print(f"{label:26} median {statistics.median(values):.2f} s, p95 {percentile(values, 95):.2f} s")
    print(f"largest generation batch reported on the Sampling page: {max(batch_sizes, default=0)} "
          f"(of {len(batch_sizes)} pages with continuations; {sum(b > 1 for b in batch_sizes)} batched with others)")
    print("server RSS: " + ", ".join(f"{name} {value:,.0f} MiB" for name, value in rss.items()))
    print(f"findings: {len(problems)}" + "".join(f"\n  {p}" for p in problems[:20]))

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "students": args.students, "rounds": args.rounds, "pages": args.pages, "slider_moves": args.slider_moves,
        "round_seconds": [rnd["seconds"] for rnd in rounds],
        "alone": {page: stats(values) for page, values in reference.items()} | {"all": stats(ref_all)},
        "alone_after": stats(ref_after_all),
        "loaded": {page: stats(timings_of(every, f"slider:{page}")) for page in PAGES} | {"all": stats(loaded_all)},
        "max_batch_size": max(batch_sizes, default=0), "rss_mib": rss, "findings": problems,
    }, indent=2))
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")


if __name__ == "__main__":
    main()
