"""A class on one server, the big run: many tabs at once on a fresh ``streamlit run app.py``.

    .venv/bin/python scripts/bench_load.py [--students 20] [--rounds 3] [--pages 4] [--slider-moves 2]

Each tab (``tests.load_scenario.student``) opens a page, types its own prompt, then walks
``--pages`` of Tokenization → Attention → Logits → Sampling from its own starting point,
moving each page's slider ``--slider-moves`` times; all tabs start together. Every round
uses new prompts, so the page caches must evict. Prints, per page and overall, the median
and p95 time of a slider move (send → script_finished) next to the same move made by
one tab alone on the same server in the same run (the ratio is what to compare across
machines), the largest generation batch the Sampling page reported, the server's RSS (with its
child processes) after each round, and every finding (an error, another tab's word, a missing own word).
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

from tests.load_scenario import (  # noqa: E402
    CLASS_SERVER_ENV,
    FOLLOW_KEY,
    FOLLOW_PAGES,
    MARKERS,
    PAGES,
    SLIDERS,
    WARM_UP_MARKER,
    AppServer,
    StudentReport,
    follow_class,
    percentile,
    prompt_for,
    run_class,
    student,
    timings_of,
)
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
    return (
        {"n": len(values), "median": statistics.median(values), "p95": percentile(values, 95), "max": max(values)}
        if values
        else {"n": 0}
    )


def findings(reports: list[StudentReport]) -> list[str]:
    return [
        f"tab {r.index} ({r.word}): {item}"
        for r in reports
        for item in r.problems + r.leaks + [f"own word missing on {what}" for what in r.missing]
    ]


# Levers that are one server setting each: (name, the setting as it was, the setting now). ``--lever`` runs the
# whole benchmark once per setting, one server after the other, and prints each figure's ratio.
LEVERS = {
    "gc": ({"STREAMLIT_RUNNER_POST_SCRIPT_GC": "true"}, {"STREAMLIT_RUNNER_POST_SCRIPT_GC": "false"}),
    # the fast path (issue 12) for every forward of the class server: the file's 4-bit blocks, bf16 activations
    "quant": ({"LLM_EXPLORER_QUANT": "none"}, {"LLM_EXPLORER_QUANT": "gguf"}),
    # the generation worker in a process of its own (its own interpreter lock), on the class server's file blocks
    "server": (
        {"LLM_EXPLORER_QUANT": "gguf", "LLM_EXPLORER_SERVER": "thread"},
        {"LLM_EXPLORER_QUANT": "gguf", "LLM_EXPLORER_SERVER": "process"},
    ),
    # a prompt's start computed once for every request that begins with it (and the same prompt once per step)
    "prefix": ({"LLM_EXPLORER_PREFIX_CACHE": "off"}, {"LLM_EXPLORER_PREFIX_CACHE": "on"}),
    # the generation server's cache slots: 16 (the default) against 32 (the class server's setting)
    "slots": ({"LLM_EXPLORER_SLOTS": "16"}, {"LLM_EXPLORER_SLOTS": "32"}),
    # the decode step as one compiled graph (issue 22), in the engine's child too; its package already on disk
    "compile": ({"LLM_EXPLORER_COMPILE": "off"}, {"LLM_EXPLORER_COMPILE": "on"}),
}


def measure(args, env: dict[str, str]) -> dict:
    """The whole scenario on a fresh server started with ``env``: warm-up, the one-tab reference, the rounds,
    the followers, the one-tab reference again."""
    log = Path(tempfile.mkdtemp(prefix="bench-load-")) / "streamlit.log"
    with AppServer(log, extra_env={**CLASS_SERVER_ENV, "LLM_EXPLORER_TEACHER_KEY": FOLLOW_KEY, **env}) as server:
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
            print(
                f"round {round_index + 1}: {args.students} tabs in {rounds[-1]['seconds']:.1f} s, "
                f"RSS {rss[f'after round {round_index + 1}']:,.0f} MiB",
                flush=True,
            )
        follow = (
            follow_class(
                server.url, args.followers, MARKERS[-args.broadcasts :], args.timeout, new_rounds=args.new_rounds
            )
            if args.followers
            else None
        )
        reference_after = alone(server.url, args.reference_moves)  # the same tab alone again: drift check
    every = [r for rnd in rounds for r in rnd["reports"]]
    return {
        "env": env,
        "warm": warm,
        "reference": reference,
        "reference_after": reference_after,
        "rounds": rounds,
        "every": every,
        "rss": rss,
        "follow": follow,
    }


def report(args, result: dict) -> dict:
    """Print one server's table; return its figures (seconds) by name."""
    every, reference = result["every"], result["reference"]
    problems = findings([result["warm"]]) + findings(every)
    ref_all = [s for values in reference.values() for s in values]
    loaded_all = timings_of(every, "slider:")
    batch_sizes = [size for r in every for size in r.batch_sizes]
    figures: dict[str, float] = {}
    print(
        f"\n== server env {result['env'] or 'as configured'}: {args.students} tabs at once × {args.rounds} rounds, "
        f"{args.pages} page(s) each, {args.slider_moves} slider move(s) per page; {len(loaded_all)} slider moves"
    )
    print(f"{'slider move':26} {'alone median':>12} {'loaded median':>13} {'loaded p95':>10} {'p95 / alone':>11}")
    rows = [(page, reference[page], timings_of(every, f"slider:{page}")) for page in PAGES]
    rows.append(("all pages", ref_all, loaded_all))
    for name, ref, loaded in rows:
        if not loaded:
            continue
        ref_median = statistics.median(ref)
        figures[f"slider {name} median"] = statistics.median(loaded)
        figures[f"slider {name} p95"] = percentile(loaded, 95)
        print(
            f"{name:26} {ref_median:11.2f}s {statistics.median(loaded):12.2f}s {percentile(loaded, 95):9.2f}s "
            f"{percentile(loaded, 95) / ref_median:10.1f}×"
        )
    figures["slider alone median"] = statistics.median(ref_all)
    print(
        f"single tab again after the rounds: median {statistics.median([s for v in result['reference_after'].values() for s in v]):.2f} s"
    )
    for prefix, label in (("open:", "page opened"), ("prompt:", "prompt typed")):
        values = timings_of(every, prefix)
        figures[f"{label} median"], figures[f"{label} p95"] = statistics.median(values), percentile(values, 95)
        print(f"{label:26} median {statistics.median(values):.2f} s, p95 {percentile(values, 95):.2f} s")
        for page in PAGES:  # which page a slow open or prompt was on
            on_page = timings_of(every, f"{prefix}{page}")
            if on_page:
                figures[f"{label}, {page}, p95"] = percentile(on_page, 95)
                print(
                    f"  {page:24} n={len(on_page)} median {statistics.median(on_page):.2f} s, "
                    f"p95 {percentile(on_page, 95):.2f} s"
                )
    follow = result["follow"]
    if follow is not None:
        flat = [s for per in follow.latencies for s in per]
        reached = [s for s in flat if s != float("inf")]
        figures["broadcast median"] = statistics.median(flat)
        figures["broadcast p95"] = percentile(flat, 95) if len(reached) == len(flat) else float("inf")
        figures["follower poll median"] = statistics.median(follow.poll_seconds)
        print(
            f"broadcast to {args.followers} followers   median {figures['broadcast median']:.2f} s, "
            f"p95 {figures['broadcast p95']:.2f} s ({len(reached)} of {len(flat)} reached); one poll median "
            f"{figures['follower poll median']:.2f} s over {len(follow.poll_seconds)} polls"
        )
        rounds = [s for per in follow.round_latencies for s in per]
        if rounds:
            figures["new round median"], figures["new round p95"] = statistics.median(rounds), percentile(rounds, 95)
            print(
                f"new draw round reaching {args.followers} open Class pages: median {figures['new round median']:.2f} s, "
                f"p95 {figures['new round p95']:.2f} s ({sum(s != float('inf') for s in rounds)} of {len(rounds)})"
            )
        for offset, page in enumerate(FOLLOW_PAGES):  # which page the teacher was on when a broadcast was slow
            on_page = [s for per in follow.latencies[offset :: len(FOLLOW_PAGES)] for s in per]
            if on_page:
                figures[f"broadcast, {page}, p95"] = percentile(on_page, 95)
                print(
                    f"  {page:24} n={len(on_page)} median {statistics.median(on_page):.2f} s, "
                    f"p95 {percentile(on_page, 95):.2f} s"
                )
        problems += follow.problems + follow.leaks + follow.missed
    print(
        f"largest generation batch reported on the Sampling page: {max(batch_sizes, default=0)} "
        f"(of {len(batch_sizes)} pages with continuations; {sum(b > 1 for b in batch_sizes)} batched with others)"
    )
    print("server RSS: " + ", ".join(f"{name} {value:,.0f} MiB" for name, value in result["rss"].items()))
    print(f"findings: {len(problems)}" + "".join(f"\n  {p}" for p in problems[:20]))
    return {
        "figures": figures,
        "rss_mib": result["rss"],
        "findings": problems,
        "max_batch_size": max(batch_sizes, default=0),
        "round_seconds": [rnd["seconds"] for rnd in result["rounds"]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="scripts/bench_load.py")
    parser.add_argument("--students", type=int, default=20, help=f"tabs at once (at most {len(MARKERS)})")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pages", type=int, default=4, choices=range(1, len(PAGES) + 1))
    parser.add_argument("--slider-moves", type=int, default=2, help="slider moves per page per tab")
    parser.add_argument("--reference-moves", type=int, default=5, help="moves per page for the one-tab reference")
    parser.add_argument("--followers", type=int, default=20, help="tabs following a teacher after the rounds (0: none)")
    parser.add_argument("--broadcasts", type=int, default=4, help="the teacher's page + prompt changes they follow")
    parser.add_argument(
        "--new-rounds",
        type=int,
        default=3,
        help="then draw rounds the teacher starts on the Class page, each reaching the followers' open page",
    )
    parser.add_argument("--lever", choices=sorted(LEVERS), help="run once with the setting as it was, once as now")
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="seconds one run may take before it counts as failed"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "load.json")
    args = parser.parse_args()

    settings = list(LEVERS[args.lever]) if args.lever else [{}]
    results = [report(args, measure(args, env)) for env in settings]
    if args.lever:
        before, after = (r["figures"] for r in results)
        print(f"\n== lever {args.lever!r}: {settings[0]} -> {settings[1]}, same scenario, one server after the other")
        print(f"{'figure':34} {'before':>9} {'after':>9} {'after / before':>15}")
        for name in before:
            if name in after and before[name] not in (0, float("inf")):
                print(f"{name:34} {before[name]:8.2f}s {after[name]:8.2f}s {after[name] / before[name]:14.2f}×")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "students": args.students,
                "rounds": args.rounds,
                "pages": args.pages,
                "slider_moves": args.slider_moves,
                "followers": args.followers,
                "lever": args.lever,
                "servers": [{"env": env, **r} for env, r in zip(settings, results)],
            },
            indent=2,
            default=str,
        )
    )
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")


if __name__ == "__main__":
    main()
