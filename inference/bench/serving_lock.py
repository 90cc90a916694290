"""How much a generation worker loses to the threads beside it: a thread worker against a process worker.

    python -m inference.bench.serving_lock [--quant gguf] [--busy 0,2,8] [--new-tokens 10]

A web server runs every session's script in a thread of one process. The engine server's
worker, when it is one more thread there, takes Python's interpreter lock back after each
torch call of a decode step, and waits for it while another thread runs Python. This
puts ``--busy`` threads that only run Python (what a page does between its torch calls:
building a chart, a JSON message) beside each worker and times the same four requests of
``--new-tokens`` tokens (what the Sampling page asks for) on:

- ``EngineServer``: the worker thread in this process;
- ``ProcessServer``: the worker in a child process (its own lock; it shares only the cores).

Printed, all measured in this run: the seconds for the four and the median decode step,
each against the same server with no busy thread, and thread / process. One worker torch
thread each (a class server's setting). A thread worker with busy threads beside it can
take minutes (that is the finding); ``--limit`` stops a measurement there and reports it
as "over" (checked when the waiting thread gets the lock back, which the same convoy delays:
a run may end well past it). Writes ``bench-results/serving_lock.json``.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import threading
import time
from pathlib import Path

from ..generation.engine import load_engine
from ..generation.sampling import SamplingParams
from ..number_text import NumberError, real_arg, whole_arg, whole_list
from ..serving.config import ServeConfig
from ..serving.process import ProcessServer
from ..serving.server import EngineServer
from ..threads import set_threads
from .report import write_report


def busy_python(stop: threading.Event) -> None:
    """Run Python (and nothing that gives up the lock) until ``stop``."""
    while not stop.is_set():
        total = 0
        for number in range(10_000):
            total += number


def four_requests(server, tag: str, new_tokens: int, limit: float) -> tuple[float, float]:
    """(seconds for four sampled requests submitted together, median decode step seconds); inf past ``limit``."""
    started = time.perf_counter()
    before = len(server.recent_steps)
    handles = [
        server.submit(
            f"The cat sat on the mat, said the {tag} {i}",
            SamplingParams(temperature=0.8, seed=i, max_new_tokens=new_tokens),
        )
        for i in range(4)
    ]
    try:
        for handle in handles:
            handle.result(timeout=max(0.0, limit - (time.perf_counter() - started)))
    except TimeoutError:
        for handle in handles:
            handle.cancel()
        return float("inf"), float("inf")
    steps = [s.seconds for s in server.recent_steps[before:] if s.phase == "decode"]
    return time.perf_counter() - started, statistics.median(steps)


def measure(server, busy: list[int], new_tokens: int, limit: float) -> dict[int, tuple[float, float]]:
    four_requests(server, "warm-up", new_tokens, limit=600)  # a process server's child loads here
    found = {}
    for count in busy:
        stop = threading.Event()
        threads = [threading.Thread(target=busy_python, args=(stop,), daemon=True) for _ in range(count)]
        for thread in threads:
            thread.start()
        found[count] = four_requests(server, f"busy {count}", new_tokens, limit)
        stop.set()
        for thread in threads:
            thread.join()
        print(
            f"  {type(server).__name__:14} {count} busy thread(s): {_seconds(found[count][0])} for the four, "
            f"decode step {_seconds(found[count][1], 1000, 'ms')}",
            flush=True,
        )
    return found


def _seconds(value: float, scale: float = 1.0, unit: str = "s") -> str:
    return "over the limit" if value == float("inf") else f"{value * scale:.2f} {unit}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m inference.bench.serving_lock")
    parser.add_argument("--quant", default="gguf", help="the engine's weights mode (none for float32)")
    parser.add_argument("--busy", default="0,2,8", help="busy Python threads beside the worker, comma-separated")
    parser.add_argument("--new-tokens", type=whole_arg, default=10)
    parser.add_argument("--limit", type=real_arg, default=60.0, help="seconds one measurement may take")
    parser.add_argument("--out", type=Path, default=Path("bench-results") / "serving_lock.json")
    args = parser.parse_args(argv)
    try:
        busy = sorted(set(whole_list(args.busy, "--busy", low=0)) | {0})
    except NumberError as error:
        parser.error(str(error))

    set_threads(1)  # the script threads' setting on a class server; each worker sets its own (config.threads)
    load = functools.partial(load_engine, quant=None if args.quant == "none" else args.quant)
    engine, config = load(), ServeConfig(threads=1)
    print(
        f"four requests of {args.new_tokens} tokens, {args.quant} weights, Python {sys.version.split()[0]}, "
        f"switch interval {sys.getswitchinterval() * 1000:g} ms"
    )
    results = {}
    for kind, make in (
        ("thread", lambda: EngineServer(engine, config)),
        ("process", lambda: ProcessServer(engine, load, config)),
    ):
        with make() as server:
            results[kind] = measure(server, busy, args.new_tokens, args.limit)
    print(
        f"\n{'busy threads':>12} {'thread worker':>14} {'vs idle':>8} {'process worker':>15} {'vs idle':>8} "
        f"{'thread / process':>17}"
    )
    for count in busy:
        (thread_s, _), (process_s, _) = results["thread"][count], results["process"][count]
        ratio = "—" if thread_s == float("inf") else f"{thread_s / process_s:.1f}×"
        ratio = f"> {args.limit / process_s:.0f}×" if thread_s == float("inf") else ratio
        print(
            f"{count:12d} {_seconds(thread_s):>14} {thread_s / results['thread'][0][0]:7.1f}× "
            f"{_seconds(process_s):>15} {process_s / results['process'][0][0]:7.1f}× {ratio:>17}"
        )
    report = {
        "quant": args.quant,
        "new_tokens": args.new_tokens,
        "limit_s": args.limit,
        "results": {
            kind: {str(n): {"four_s": v[0], "step_s": v[1]} for n, v in r.items()} for kind, r in results.items()
        },
    }
    write_report(report, args.out, indent=2)


if __name__ == "__main__":
    main()
