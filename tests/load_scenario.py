"""A class on one server: many students at once, each with their own prompt, on different pages.

Owns what the load test (``tests/test_load.py``) and the load benchmark
(``scripts/bench_load.py``) share: starting a fresh ``streamlit run app.py`` and
reading its memory (``AppServer``), the words that make every student's prompt
recognisable (``MARKERS``), one student's walk through the story (``student``) and
what it observed (``StudentReport``), and running many at once (``run_class``).

A student's prompt ends with its own marker word, a single token that no page's
fixed text contains ("…, said the zebra"). Every page shows the prompt's last token
or all of its tokens, so a student checks on every page that its own word is there
and that no other student's word is anywhere on the page: a cache keyed by the
wrong thing would show up as someone else's word. The continuations the model
writes are left out of that scan: after "said the tiger" the model may well write
"The old leopard" (it does, at T = 1.25). That batched generation gives each caller
its own tokens is proven exactly, against solo runs, in ``tests/test_server.py``.
"""

from __future__ import annotations

import functools
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.streamlit_client import Run, StreamlitSession

ROOT = Path(__file__).resolve().parents[1]
STARTUP_S = 120  # server start + model load on 2 shared cores

# Animal names that are one token each (with their leading space) in SmolLM2's vocabulary.
MARKERS = [
    "zebra",
    "lizard",
    "parrot",
    "beaver",
    "camel",
    "donkey",
    "eagle",
    "falcon",
    "moose",
    "panda",
    "rabbit",
    "salmon",
    "turtle",
    "bison",
    "dolphin",
    "goose",
    "owl",
    "penguin",
    "tiger",
    "whale",
    "crab",
    "pigeon",
    "sheep",
    "goat",
    "horse",
    "frog",
    "snake",
    "shark",
    "wolf",
    "fox",
    "deer",
    "lion",
    "monkey",
    "spider",
    "kitten",
    "puppy",
    "chicken",
    "pony",
    "lobster",
    "squid",
    "giraffe",
    "leopard",
    "kangaroo",
    "squirrel",
    "gorilla",
    "hawk",
]
WARM_UP_MARKER = "octopus"  # the warm-up tab's word, never a student's
TEMPLATES = [
    "The cat sat on the mat because it was tired, said the {word}",
    "The dog slept by the door because it was late, said the {word}",
]  # one per round: caches must evict
PAGES = ["tokenization", "attention", "logits", "sampling"]
BATCH_CAPTION = re.compile(r"forwards of up to (\d+) requests")
# What the model wrote (Sampling page): the token strips and the texts quoting them.
GENERATED_CHARTS = frozenset({"greedy_vs_sampled", "two_settings"})
GENERATED_TEXTS = ("**Greedy:**", "**A:**")


def prompt_for(word: str, round_index: int = 0) -> str:
    return TEMPLATES[round_index % len(TEMPLATES)].format(word=word)


# -- the server ------------------------------------------------------------------------
# A class server's documented settings (README, docs/classroom.md): one torch thread per forward (many
# sessions run forwards at once, and two threads each on shared cores wait on each other), the file's own
# 4-bit blocks, the engine's work in a process of its own (no wait for the script threads' lock), and 32
# generation slots (twenty tabs keep 16 full).
CLASS_SERVER_ENV = {
    "LLM_EXPLORER_THREADS": "1",
    "LLM_EXPLORER_QUANT": "gguf",
    "LLM_EXPLORER_SERVER": "process",
    "LLM_EXPLORER_SLOTS": "32",
    "LLM_EXPLORER_KV_POSITIONS": "8192",
}
# The same with a teacher key (docs/classroom.md): students may follow the teacher (``follow_class``).


class AppServer:
    """A fresh ``streamlit run app.py`` on a free localhost port (a context manager)."""

    def __init__(self, log_path: Path, extra_env: dict[str, str] | None = None) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlit",
                "run",
                "app.py",
                "--server.port",
                str(self.port),
                "--server.address",
                "127.0.0.1",
                "--server.headless",
                "true",
                "--server.fileWatcherType",
                "none",
                "--browser.gatherUsageStats",
                "false",
            ],
            cwd=ROOT,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(extra_env or {})},
        )

    def wait_healthy(self, timeout: float = STARTUP_S) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with code {self.proc.returncode}")
            try:
                with urllib.request.urlopen(self.url + "/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        raise TimeoutError(f"no healthy server at {self.url} after {timeout:.0f} s")

    def rss_mib(self) -> float:
        """The resident memory (VmRSS) of the server and its child processes (a process engine server), in MiB."""
        return sum(_rss_kib(pid) for pid in _process_tree(self.proc.pid)) / 1024

    def __enter__(self) -> AppServer:
        try:
            self.wait_healthy()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def _process_tree(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    tree, index = [pid], 0
    while index < len(tree):
        for task in Path(f"/proc/{tree[index]}/task").glob("*/children"):
            tree += [int(child) for child in task.read_text().split()]
        index += 1
    return tree


def _rss_kib(pid: int) -> int:
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except FileNotFoundError:  # ended since the tree was read
        return 0
    return next((int(line.split()[1]) for line in lines if line.startswith("VmRSS:")), 0)


# -- one student -------------------------------------------------------------------------
@dataclass
class StudentReport:
    index: int
    word: str
    timings: list[tuple[str, float]] = field(default_factory=list)  # (what, seconds): "open:attention", ...
    problems: list[str] = field(default_factory=list)  # exceptions, errors, busy messages
    leaks: list[str] = field(default_factory=list)  # another student's word on this student's page
    missing: list[str] = field(default_factory=list)  # pages that did not show this student's own word
    batch_sizes: list[int] = field(default_factory=list)  # from the Sampling page's caption


def _has_word(text: str, word: str) -> bool:
    return re.search(rf"(?<![A-Za-z]){word}(?![A-Za-z])", text) is not None


@functools.lru_cache(maxsize=256)
def _any_word(words: tuple[str, ...]) -> re.Pattern:
    if not all(word.isalpha() and word.isascii() for word in words):
        raise ValueError(f"marker words are ASCII letters only, got {words!r}")
    return re.compile(rf"(?<![A-Za-z])(?:{'|'.join(words)})(?![A-Za-z])")


def words_in(text: str, words: list[str]) -> set[str]:
    """The ``words`` (ASCII letters) that ``_has_word`` finds in ``text``, in one pass over it rather than one a
    word: a page's text with its charts' JSON runs to hundreds of KB, and the per-word scans of 20 tabs took ~30 %
    of the load generator's samples, on the cores the server under test shares. A match ends before a non-letter,
    so the next word's match (after a non-letter) never starts inside it: no word is hidden by another's match."""
    return {match.group(0) for match in _any_word(tuple(words)).finditer(text)}


def check_page(run: Run, report: StudentReport, others: list[str], what: str) -> None:
    """Own word shown, no other student's word, no exception or error; collect the batch size."""
    texts = run.texts()
    page_text = "\n".join(run.texts(GENERATED_CHARTS, GENERATED_TEXTS))
    report.problems += [f"{what}: {problem}" for problem in run.problems]
    report.problems += [f"{what}: {el.alert.body}" for el in run.of_type("alert") if "busy" in el.alert.body]
    found = words_in(page_text, [report.word, *others])
    if report.word not in found:
        report.missing.append(what)
    report.leaks += [f"{what}: {word!r}" for word in others if word in found]
    for text in texts:
        report.batch_sizes += [int(n) for n in BATCH_CAPTION.findall(text)]


# The slider each page's student moves, and the value for student i (distinct values spread the cache keys).
SLIDERS = {
    "tokenization": ("_w_tok_vocab", lambda i, step: 260 + (7 * i + 11 * step) % 140),
    "attention": ("_w_att_layer", lambda i, step: (3 * i + 7 * step) % 30),
    "logits": ("_w_temperature", lambda i, step: round(0.3 + 0.05 * ((i + step) % 30), 2)),
    "sampling": ("_w_temperature", lambda i, step: round(0.4 + 0.05 * ((i + step) % 20), 2)),
}


def student(
    url: str,
    index: int,
    word: str,
    others: list[str],
    round_index: int = 0,
    n_pages: int = 4,
    slider_moves: int = 1,
    start: threading.Barrier | None = None,
    timeout: float = 120.0,
) -> StudentReport:
    """One browser tab: open a page, type its prompt, then walk ``n_pages`` of the four pages from its own
    starting point (student i starts at page i mod 4), moving each page's slider ``slider_moves`` times."""
    report = StudentReport(index, word)
    order = (PAGES[index % len(PAGES) :] + PAGES[: index % len(PAGES)])[:n_pages]
    if start is not None:
        start.wait()
    try:
        with StreamlitSession(url, timeout=timeout) as tab:
            run = tab.open(order[0])
            report.timings.append((f"open:{order[0]}", run.seconds))
            run = tab.set("_w_prompt", prompt_for(word, round_index))
            report.timings.append((f"prompt:{order[0]}", run.seconds))
            check_page(run, report, others, f"{order[0]} after typing")
            for position, page in enumerate(order):
                if position:
                    run = tab.open(page)
                    report.timings.append((f"open:{page}", run.seconds))
                    check_page(run, report, others, page)
                key, value_for = SLIDERS[page]
                for step in range(slider_moves):
                    run = tab.set(key, value_for(index, step + round_index))
                    report.timings.append((f"slider:{page}", run.seconds))
                    check_page(run, report, others, f"{page} after moving {key}")
    except Exception as exc:  # noqa: BLE001  (a timeout or a closed socket is a finding, not a crash)
        report.problems.append(f"{type(exc).__name__}: {exc}")
    return report


def run_class(
    url: str, n_students: int, round_index: int = 0, n_pages: int = 4, slider_moves: int = 1, timeout: float = 120.0
) -> list[StudentReport]:
    """``n_students`` tabs at once (one thread each, released together); their reports in order."""
    if n_students > len(MARKERS):
        raise ValueError(f"at most {len(MARKERS)} students (one marker word each), got {n_students}")
    words = MARKERS[:n_students]
    reports: list[StudentReport | None] = [None] * n_students
    start = threading.Barrier(n_students)

    def one(i: int) -> None:
        others = [w for w in MARKERS + [WARM_UP_MARKER] if w != words[i]]  # including unused ones
        reports[i] = student(url, i, words[i], others, round_index, n_pages, slider_moves, start, timeout)

    threads = [threading.Thread(target=one, args=(i,), name=f"student-{i}") for i in range(n_students)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [r for r in reports if r is not None]


# -- summaries ---------------------------------------------------------------------------
def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation between order statistics."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def timings_of(reports: list[StudentReport], prefix: str) -> list[float]:
    return [seconds for r in reports for what, seconds in r.timings if what.startswith(prefix)]


def latency_line(label: str, values: list[float]) -> str:
    if not values:
        return f"{label}: no samples"
    return (
        f"{label}: n={len(values)} median {statistics.median(values):.2f} s, "
        f"p95 {percentile(values, 95):.2f} s, max {max(values):.2f} s"
    )


# -- a class that follows the teacher ---------------------------------------------------------
ROUND_HEADING = re.compile(r"Draw round \d+:")  # the Class page's heading of the round it shows
FOLLOW_KEY = "load-test-teacher-key"  # the class server's teacher key (CLASS_SERVER_ENV's teacher variant)
FOLLOW_PAGES = ["logits", "attention", "tokenization", "sampling"]  # the teacher's walk, one word per stop


@dataclass
class FollowReport:
    """What the followers saw: per broadcast, each follower's seconds from the teacher's run to its own page."""

    latencies: list[list[float]] = field(default_factory=list)  # [broadcast][follower]; inf = never reached
    poll_seconds: list[float] = field(default_factory=list)  # one timed-fragment run (a poll) of any follower
    problems: list[str] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)  # a word on a follower's page that the teacher never typed
    missed: list[str] = field(default_factory=list)  # a follower that never reached a broadcast: what it showed
    round_latencies: list[list[float]] = field(default_factory=list)  # [new round][follower]: on its open Class page


def timer_polls(tab: StreamlitSession, stop: threading.Event) -> Iterator[Run]:
    """The tab's timed fragment runs, one every ``run_every`` from the start of the last (the browser's timer), until
    ``stop`` is set."""
    while not stop.is_set():
        started = time.perf_counter()
        yield tab.poll()
        interval = min(tab.fragments.values(), default=0.5)
        stop.wait(max(0.0, interval - (time.perf_counter() - started)))


class Heartbeats:
    """``n`` tabs that only keep their heartbeat, as every open tab does in a browser (the sidebar's fragment,
    ``run_every`` 0.5 s) and the test client's student tabs do not: started with the scenario, stopped after it
    (a context manager). ``polls`` counts the fragment runs they asked for."""

    def __init__(self, url: str, n: int, timeout: float = 120.0) -> None:
        self.url, self.n, self.timeout = url, n, timeout
        self._polls = [0] * n  # each tab's own count (one writer each)
        self.problems: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._tab, args=(i,), name=f"heartbeat-{i}") for i in range(n)]

    @property
    def polls(self) -> int:
        return sum(self._polls)

    def _tab(self, i: int) -> None:
        try:
            with StreamlitSession(self.url, timeout=self.timeout) as tab:
                tab.open("")
                for run in timer_polls(tab, self._stop):
                    self._polls[i] += 1
                    self.problems += [f"heartbeat tab {i}: {p}" for p in run.problems]
        except Exception as exc:  # noqa: BLE001  (a finding, not a crash)
            self.problems.append(f"heartbeat tab {i}: {type(exc).__name__}: {exc}")

    def __enter__(self) -> Heartbeats:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()


def follow_class(
    url: str, n_followers: int, words: list[str], timeout: float = 120.0, reach_s: float = 60.0, new_rounds: int = 0
) -> FollowReport:
    """A teacher (teacher-only link) walks ``FOLLOW_PAGES``, typing a prompt with a new word on each, while
    ``n_followers`` tabs poll as a browser does (every ``run_every`` of the sidebar's fragment). A follower
    has "reached" a broadcast at the end of its first whole-app run, after the teacher typed, that is on the
    teacher's page and shows the teacher's word; its latency counts from the end of the teacher's run as the
    teacher's tab saw it (0 when the follower got there first).

    Then, with ``new_rounds``, the teacher opens the Class page (the followers follow) and starts that many
    draw rounds there: a follower has the new round at the end of its first whole-app run on the Class page
    that shows "Draw round <n>:" (its heartbeat saw the room's rounds change), counted from the teacher's
    click (``FollowReport.round_latencies``)."""
    report = FollowReport()
    runs: list[list[tuple[float, str, list[str]]]] = [[] for _ in range(n_followers)]  # (end, page, texts)
    stop = threading.Event()
    ready = threading.Barrier(n_followers + 1)

    def follower(i: int) -> None:
        try:
            with StreamlitSession(url, timeout=timeout) as tab:
                run = tab.open("")
                runs[i].append((time.perf_counter(), tab.page, run.texts(GENERATED_CHARTS, GENERATED_TEXTS)))
                try:
                    ready.wait()
                except threading.BrokenBarrierError:
                    return
                for run in timer_polls(tab, stop):
                    report.poll_seconds.append(run.seconds)
                    report.problems += [f"follower {i}: {p}" for p in run.problems]
                    if run.full:
                        runs[i].append((time.perf_counter(), tab.page, run.texts(GENERATED_CHARTS, GENERATED_TEXTS)))
        except Exception as exc:  # noqa: BLE001
            report.problems.append(f"follower {i}: {type(exc).__name__}: {exc}")
            if not ready.broken:
                ready.abort()

    threads = [threading.Thread(target=follower, args=(i,), name=f"follower-{i}") for i in range(n_followers)]
    for thread in threads:
        thread.start()
    try:
        with StreamlitSession(url, timeout=timeout) as teacher:
            teacher.query_string = f"teacher={FOLLOW_KEY}"
            teacher.open("")
            ready.wait(timeout=timeout)
            for step, word in enumerate(words):
                teacher.open(FOLLOW_PAGES[step % len(FOLLOW_PAGES)])
                typed = time.perf_counter()  # no page can show the word before this
                run = teacher.set("_w_prompt", prompt_for(word))
                report.problems += [f"teacher: {p}" for p in run.problems]
                sent, page = time.perf_counter(), teacher.page
                deadline = sent + reach_s
                latencies = [float("inf")] * n_followers
                while time.perf_counter() < deadline and float("inf") in latencies:
                    for i in range(n_followers):
                        if latencies[i] == float("inf"):
                            done = next(
                                (
                                    end
                                    for end, at, texts in list(runs[i])
                                    if end >= typed and at == page and _has_word("\n".join(texts), word)
                                ),
                                None,
                            )
                            if done is not None:
                                # A follower can finish before the teacher's tab has read the end of its own run
                                # (the room has the view when the teacher's script ends; 21 client threads share
                                # this process): that counts as 0 s.
                                latencies[i] = max(0.0, done - sent)
                    time.sleep(0.05)
                report.latencies.append(latencies)
                for i in (i for i, seconds in enumerate(latencies) if seconds == float("inf")):
                    shown = [
                        (round(end - sent, 2), at, _has_word("\n".join(texts), word))
                        for end, at, texts in list(runs[i])
                        if end >= typed - 5
                    ][-4:]
                    report.missed.append(
                        f"follower {i} never showed {word!r} on {page!r}; its whole-app runs "
                        f"since 5 s before (seconds after the teacher's, page, word shown): {shown}"
                    )
            if new_rounds:
                opened = time.perf_counter()
                teacher.open("class")
                _reached(runs, lambda at, texts: at == "class", opened, reach_s)  # every follower on the Class page
                for _ in range(new_rounds):
                    clicked = time.perf_counter()
                    run = teacher.click("class_new_draws")
                    report.problems += [f"teacher: {p}" for p in run.problems]
                    heading = next(
                        (m.group(0) for text in run.texts() for m in [ROUND_HEADING.search(text)] if m), None
                    )
                    if heading is None:
                        report.problems.append("teacher: no draw round after 'New draw round'")
                        break
                    latencies = _reached(
                        runs,
                        lambda at, texts, h=heading: at == "class" and any(h in t for t in texts),
                        clicked,
                        reach_s,
                    )
                    report.round_latencies.append(latencies)
                    report.missed += [
                        f"follower {i} never showed {heading!r}" for i, s in enumerate(latencies) if s == float("inf")
                    ]
    except Exception as exc:  # noqa: BLE001
        report.problems.append(f"teacher: {type(exc).__name__}: {exc}")
    finally:
        stop.set()
        ready.abort()  # a teacher that failed early must not leave followers waiting
        for thread in threads:
            thread.join()
    taught = set(words)
    for i, seen in enumerate(runs):
        for _, page, texts in seen:
            shown = words_in("\n".join(texts), MARKERS + [WARM_UP_MARKER])
            report.leaks += [f"follower {i} on {page}: {w!r}" for w in sorted(shown - taught)]
    return report


def _reached(runs: list[list[tuple[float, str, list[str]]]], shows, since: float, reach_s: float) -> list[float]:
    """Per follower, seconds from ``since`` to the end of its first whole-app run after it for which
    ``shows(page, texts)`` holds (inf when none came within ``reach_s``)."""
    latencies = [float("inf")] * len(runs)
    deadline = since + reach_s
    while time.perf_counter() < deadline and float("inf") in latencies:
        for i, seen in enumerate(runs):
            if latencies[i] == float("inf"):
                done = next((end for end, at, texts in list(seen) if end >= since and shows(at, texts)), None)
                if done is not None:
                    latencies[i] = done - since
        time.sleep(0.05)
    return latencies
