"""A class on one server, the big run: many tabs at once on a fresh ``streamlit run app.py``.

    .venv/bin/python scripts/bench_load.py [--students 20] [--rounds 3] [--pages 4] [--slider-moves 2]
    .venv/bin/python scripts/bench_load.py --replicas 2 [--students 20] [--rounds 4] [--followers 10]

Each tab (``tests.load_scenario.student``) opens a page, types its own prompt, then walks
``--pages`` of Tokenization → Attention → Logits → Sampling from its own starting point,
moving each page's slider ``--slider-moves`` times; all tabs start together. Every round
uses new prompts, so the page caches must evict. Prints, per page and overall, the median
and p95 time of a slider move (send → script_finished) next to the same move made by
one tab alone on the same server in the same run (the ratio is what to compare across
machines), the largest generation batch the Sampling page reported, the server's RSS (with its
child processes) after each round with its growth (round to round, and the least-squares line over the rounds), the
CPU seconds a student action cost the server process (the page runs) and the engine's processes below it over the
rounds, and every finding (an error, another tab's word, a missing own word). Writes ``bench-results/load.json``.

``--heartbeats N`` adds N tabs that only keep their heartbeat through the rounds (the sidebar's fragment, every
0.5 s): a browser's tab runs it all the time, the test client's student tabs never do, so 20 give a real class's
load.

``--replicas N`` compares a school with one server in the same run (``compare_replicas``): one server as today
(the room in its memory) and N replicas behind HAProxy sharing a Redis room (``tests/school.py``, the config
``scripts/run-school.sh`` generates), with the same class settings each, all started together; then, ``--rounds``
times, the class's round and the followers on one and on the other, the order swapped every time. It prints the
slider-move and broadcast p95 of each, and their ratios (the issue's goals: broadcast <= 1.2x, slider <= 1.1x),
with /proc/loadavg and each process's RSS. On one small machine the N replicas share its cores with the one server's
idle process: this shows what the proxy and the shared room cost, not what more machines (or cores) would add.
Writes ``bench-results/load_replicas.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
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
    Heartbeats,
    StudentReport,
    _process_tree,
    _rss_kib,
    follow_class,
    percentile,
    prompt_for,
    run_class,
    student,
    timings_of,
)
from tests.streamlit_client import StreamlitSession  # noqa: E402

DEFAULT_OUT = ROOT / "bench-results" / "load.json"
GOALS = {"slider p95": 1.1, "broadcast p95": 1.2}  # issue 24: a school's figure / one server's, at most


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
    # the paged K/V pool: every slot's whole length (the default) against the class server's 8,192 positions
    "kvpool": ({"LLM_EXPLORER_KV_POSITIONS": ""}, {"LLM_EXPLORER_KV_POSITIONS": "8192"}),
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
        with Heartbeats(server.url, args.heartbeats, args.timeout) as beats:
            time.sleep(2.0 if args.heartbeats else 0.0)  # their tabs open first
            cpu_before, polls_before = cpu_split(server.proc.pid), beats.polls
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
            cpu_after, polls = cpu_split(server.proc.pid), beats.polls - polls_before
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
        "cpu_rounds": {what: cpu_after[what] - cpu_before[what] for what in cpu_before},
        "heartbeats": {"tabs": args.heartbeats, "polls": polls, "problems": beats.problems},
        "follow": follow,
    }


def rss_growth(after_rounds: list[float]) -> dict:
    """Round to round, the RSS's change in per cent; over three rounds or more, also the least-squares line through
    them (MiB, and per cent of their mean, a round): one step moves by a few per cent either way (the heaps, the
    moment it is read), so the line says more about growth than any one step."""
    if len(after_rounds) < 2:
        return {}
    growth = {"steps_percent": [100 * (b - a) / a for a, b in zip(after_rounds, after_rounds[1:])]}
    if len(after_rounds) >= 3:
        slope = statistics.linear_regression(range(len(after_rounds)), after_rounds).slope
        growth["trend_mib"] = slope
        growth["trend_percent"] = 100 * slope / statistics.fmean(after_rounds)
    return growth


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
    growth = rss_growth([value for name, value in result["rss"].items() if name.startswith("after round")])
    if growth:
        print(
            "RSS growth a round: "
            + ", ".join(f"{step:+.1f} %" for step in growth["steps_percent"])
            + (
                f"; least-squares trend {growth['trend_mib']:+.1f} MiB ({growth['trend_percent']:+.2f} %) a round"
                if "trend_mib" in growth
                else ""
            )
        )
    actions = sum(len(r.timings) for r in every)
    wall = sum(rnd["seconds"] for rnd in result["rounds"])
    beats = result["heartbeats"]
    problems += beats["problems"]
    if beats["tabs"]:
        print(
            f"heartbeats: {beats['tabs']} more tabs, {beats['polls']} fragment runs ({beats['polls'] / wall:.0f} a s)"
        )
    cpu = {what: seconds / actions for what, seconds in result["cpu_rounds"].items()}
    print(
        f"CPU a student action ({actions} actions in {wall:.0f} s of rounds"
        + (", with the heartbeats'" if beats["tabs"] else "")
        + "): "
        + ", ".join(
            f"{what} {1000 * per:.0f} ms (busy {result['cpu_rounds'][what] / wall:.0%} of one core)"
            for what, per in cpu.items()
        )
    )
    print(f"findings: {len(problems)}" + "".join(f"\n  {p}" for p in problems[:20]))
    return {
        "figures": figures,
        "rss_mib": result["rss"],
        "rss_growth": growth,
        "findings": problems,
        "max_batch_size": max(batch_sizes, default=0),
        "round_seconds": [rnd["seconds"] for rnd in result["rounds"]],
        "cpu_seconds_per_action": cpu,
    }


# -- one server against a school of N replicas ---------------------------------------------------------------------
def pause_broadcast(url: str, timeout: float) -> None:
    """A teacher's tab turns "Broadcast my view" off: the next round's students keep their own pages."""
    with StreamlitSession(url, timeout=timeout) as teacher:
        teacher.query_string = f"teacher={FOLLOW_KEY}"
        teacher.open("")
        teacher.set("_w_class_broadcast", False)


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of these processes and every process below them (``/proc/<pid>/stat``)."""
    return sum(own_cpu_seconds(pid) for pid in {child for root in pids for child in _process_tree(root)})


def own_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of this one process, all its threads (0 once it has ended)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime (fields 14 and 15 of stat)


def cpu_split(pid: int) -> dict[str, float]:
    """CPU seconds so far of the server process itself (the page runs, under one GIL) and of the processes below it
    (the engine's), which is where a class's time goes on a 2-core machine."""
    return {"server": own_cpu_seconds(pid), "engine": sum(own_cpu_seconds(p) for p in _process_tree(pid) if p != pid)}


def compare_replicas(args) -> dict:
    """One server and a school of ``args.replicas`` replicas, started together, the same scenario on each in turn."""
    from tests.redis_server import REDIS_SERVER, RedisServer
    from tests.school import HAPROXY, School

    missing = [name for name, path in (("redis-server", REDIS_SERVER), ("haproxy", HAPROXY)) if path is None]
    if missing:
        raise SystemExit(
            f"bench_load.py --replicas needs Debian's {' and '.join(missing)} (apt-get install {' '.join(missing)})"
        )
    folder = Path(tempfile.mkdtemp(prefix="bench-school-"))
    env = {**CLASS_SERVER_ENV, "LLM_EXPLORER_TEACHER_KEY": FOLLOW_KEY}  # the same class settings everywhere
    redis_server = RedisServer(folder)
    redis_server.start()
    school_env = {
        **env,
        "LLM_EXPLORER_ROOM": redis_server.url,
        "LLM_EXPLORER_CLASS_ID": "bench",
        "STREAMLIT_SERVER_COOKIE_SECRET": secrets.token_hex(24),
    }
    school = None
    try:
        with AppServer(folder / "one-server.log", extra_env=env) as one:
            school = School(
                folder, ROOT / "app.py", per_replica=200, env=school_env, startup_s=300, replicas=args.replicas
            )
            name = f"{args.replicas} replica{'s' * (args.replicas != 1)}"
            urls = {"one server": one.url, name: school.url}
            for url in [one.url, *(school.replica_url(r) for r in school.ports)]:  # every engine warm, every page once
                warm = student(url, 0, WARM_UP_MARKER, MARKERS)
                if findings([warm]):
                    raise SystemExit(f"warm-up on {url}: {findings([warm])}")
            rss = {"one server": one.rss_mib(), **{f"replica {r}": school.rss_mib(r) for r in school.ports}}
            print(f"warmed up; RSS {', '.join(f'{k} {v:,.0f} MiB' for k, v in rss.items())}; load {loadavg()}")
            samples = {
                target: {"slider": [], "broadcast": [], "findings": [], "actions": 0, "cpu": 0.0} for target in urls
            }
            processes = {  # whose CPU time a target's class rounds take
                "one server": [one.proc.pid],
                name: [p.pid for p in school.replicas.values()] + [redis_server.process.pid, school.haproxy.pid],
            }
            parts = {"redis-server": [redis_server.process.pid], "haproxy": [school.haproxy.pid]}
            cpu_before = {what: cpu_seconds(pids) for what, pids in parts.items()}
            per_repeat = []
            words = MARKERS[-args.broadcasts :]
            for repeat in range(args.rounds):
                order = list(urls) if repeat % 2 == 0 else list(reversed(urls))
                before = loadavg()
                figures = {target: {} for target in urls}
                for target in order:  # the class's round on one, then on the other
                    cpu_start = cpu_seconds(processes[target])
                    reports = run_class(
                        urls[target], args.students, repeat, args.pages, args.slider_moves, args.timeout
                    )
                    samples[target]["cpu"] += cpu_seconds(processes[target]) - cpu_start
                    samples[target]["slider"] += timings_of(reports, "slider:")
                    samples[target]["actions"] += sum(len(r.timings) for r in reports)
                    samples[target]["findings"] += findings(reports)
                    figures[target]["slider p95"] = percentile(timings_of(reports, "slider:"), 95)
                for target in order:  # then the followers on one, then on the other
                    if not args.followers:
                        break
                    follow = follow_class(urls[target], args.followers, words, args.timeout)
                    flat = [seconds for per in follow.latencies for seconds in per]
                    samples[target]["broadcast"] += flat
                    samples[target]["findings"] += follow.problems + follow.leaks + follow.missed
                    figures[target]["broadcast p95"] = percentile(flat, 95)
                    pause_broadcast(urls[target], args.timeout)
                per_repeat.append({"order": order, "load before": before, "load after": loadavg(), "figures": figures})
                print(
                    f"repeat {repeat + 1} ({' then '.join(order)}; load {before} -> {loadavg()}): "
                    + "; ".join(
                        f"{figure} {figures[name][figure] / figures['one server'][figure]:.2f}x"
                        for figure in GOALS
                        if figure in figures[name]
                    ),
                    flush=True,
                )
            rss_after = {"one server": one.rss_mib(), **{f"replica {r}": school.rss_mib(r) for r in school.ports}}
            rss_after["redis-server"] = _rss_kib(redis_server.process.pid) / 1024
            rss_after["redis used_memory"] = redis_server.client().info("memory")["used_memory"] / 2**20
            rss_after["haproxy"] = _rss_kib(school.haproxy.pid) / 1024
            cpu = {what: cpu_seconds(pids) - cpu_before[what] for what, pids in parts.items()}  # the whole run
    finally:
        if school is not None:
            school.stop()
        redis_server.stop()
    return report_replicas(args, name, samples, per_repeat, {"warmed up": rss, "after": rss_after}, cpu)


def report_replicas(args, name: str, samples: dict, per_repeat: list[dict], rss: dict, cpu: dict) -> dict:
    print(
        f"\n== one server against {name} behind HAProxy with the Redis room: {args.students} tabs at once, "
        f"{args.followers} followers x {args.broadcasts} broadcasts, {args.rounds} repeats, interleaved (load now {loadavg()})"
    )
    print(f"{'figure':22} {'one server':>11} {name:>11} {'ratio':>7} {'goal':>6}")
    figures = {}
    for figure, key in (("slider p95", "slider"), ("slider median", "slider"), ("broadcast p95", "broadcast"),
                        ("broadcast median", "broadcast")):  # fmt: skip
        one, many = samples["one server"][key], samples[name][key]
        if not one or not many:
            continue
        pick = (lambda v: percentile(v, 95)) if figure.endswith("p95") else statistics.median
        figures[figure] = {"one server": pick(one), name: pick(many), "ratio": pick(many) / pick(one)}
        goal = f"<= {GOALS[figure]}x" if figure in GOALS else ""
        print(
            f"{figure:22} {pick(one):10.2f}s {pick(many):10.2f}s {pick(many) / pick(one):6.2f}x {goal:>6}  (n={len(one)}, {len(many)})"
        )
    for figure in GOALS:
        ratios = [
            r["figures"][name][figure] / r["figures"]["one server"][figure]
            for r in per_repeat
            if figure in r["figures"][name]
        ]
        if ratios:
            print(f"{figure} ratio per repeat: " + ", ".join(f"{x:.2f}" for x in ratios))
    print(
        "RSS: "
        + "; ".join(
            f"{when}: " + ", ".join(f"{k} {v:,.0f} MiB" for k, v in values.items()) for when, values in rss.items()
        )
    )
    cpu |= {f"{t}, class rounds": samples[t]["cpu"] for t in ("one server", name)}
    print(
        "CPU seconds of the class rounds, per student action (a page opened, a prompt typed, a slider moved): "
        + ", ".join(
            f"{t} {samples[t]['cpu']:.0f} s / {samples[t]['actions']} = {samples[t]['cpu'] / samples[t]['actions']:.3f} s"
            for t in ("one server", name)
            if samples[t]["actions"]
        )
        + "; over the whole run: "
        + ", ".join(f"{what} {cpu[what]:.1f} s" for what in ("redis-server", "haproxy"))
    )
    problems = samples["one server"]["findings"] + samples[name]["findings"]
    print(f"findings: {len(problems)}" + "".join(f"\n  {p}" for p in problems[:20]))
    result = {"figures": figures, "per_repeat": per_repeat, "rss_mib": rss, "cpu_seconds": cpu, "findings": problems}
    out = args.out if args.out != DEFAULT_OUT else DEFAULT_OUT.with_name("load_replicas.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, **result}, indent=2, default=str))
    print(f"wrote {out}")
    return result


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
    parser.add_argument(
        "--heartbeats",
        type=int,
        default=0,
        help="N more tabs that only run their heartbeat through the rounds (every 0.5 s), as the students' own tabs "
        "do in a browser and the test client's do not (20: a real class's load)",
    )
    parser.add_argument("--lever", choices=sorted(LEVERS), help="run once with the setting as it was, once as now")
    parser.add_argument(
        "--now-first",
        action="store_true",
        help="with --lever: the setting as now first, then as it was (swapping the order shows the machine's drift)",
    )
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="seconds one run may take before it counts as failed"
    )
    parser.add_argument(
        "--replicas",
        type=int,
        default=0,
        help="compare one server with N replicas behind HAProxy sharing a Redis room, interleaved (0: one server only)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    if args.replicas:
        compare_replicas(args)
        return

    settings = list(LEVERS[args.lever]) if args.lever else [{}]
    order = [1, 0] if args.lever and args.now_first else list(range(len(settings)))
    measured = {index: report(args, measure(args, settings[index])) for index in order}
    results = [measured[index] for index in range(len(settings))]  # as it was, then as now, whichever ran first
    if args.lever:
        before, after = (r["figures"] for r in results)
        first = "the setting as now" if args.now_first else "the setting as it was"
        print(
            f"\n== lever {args.lever!r}: {settings[0]} -> {settings[1]}, same scenario, one server after the other "
            f"({first} first)"
        )
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
                "now_first": bool(args.lever and args.now_first),
                "servers": [{"env": env, **r} for env, r in zip(settings, results)],
            },
            indent=2,
            default=str,
        )
    )
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")


if __name__ == "__main__":
    main()
