"""A class on one server: 20 tabs at once on a fresh ``streamlit run app.py``, through the websocket protocol.

Each tab (``tests.load_scenario.student``) opens one of four pages (five tabs per
page), types its own prompt and moves that page's slider, all released together.
Pass: every tab sees only its own prompt, no tab gets an exception, an error or a
"busy" message, the server's memory stays under a bound and a second round of
twenty new prompts does not grow it (every page cache has a limit), and the
Sampling page's continuations were batched across tabs. Then a teacher walks two pages
with a new prompt on each while ten tabs follow (``load_scenario.follow_class``): every
follower reaches each of the teacher's views and sees no other word. Median and p95
latency of a slider move and of a broadcast are printed (``-s``); they are not asserted
beyond a generous bound, the machine is shared.
The bigger run is ``scripts/bench_load.py``.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streamlit.proto.Element_pb2 import Element

from tests.load_scenario import (
    CLASS_SERVER_ENV,
    FOLLOW_KEY,
    MARKERS,
    WARM_UP_MARKER,
    AppServer,
    Heartbeats,
    StudentReport,
    _has_word,
    check_page,
    follow_class,
    latency_line,
    run_class,
    student,
    timings_of,
    words_in,
)
from tests.streamlit_client import Run

N_STUDENTS = 20
SAMPLING_REQUESTS_PER_TAB = 4  # the Sampling page submits its four continuations together
ROUNDS = 2  # the second with new prompts: a cache without a limit would grow here
# Measured here with the class settings (CLASS_SERVER_ENV): ~3,050 MiB warmed up, the app and the engine's
# child process together (two copies of the 4-bit model, 0.75 GiB of cache slots for the generation
# worker's 16 slots in the child, torch twice, streamlit); +145 MiB after the first round, +40 MiB after the
# second (caches still filling); scripts/bench_load.py: +1.0 % from round 2 to round 5.
RSS_HEADROOM_MIB = 512  # over the warmed-up server, after every round
RSS_ROUND_GROWTH_MIB = 128  # from the end of one round to the end of the next


def test_the_page_check_sees_another_tabs_word_and_a_missing_own_word():
    """The check the load test relies on, on hand-made pages (a positive control: it can fail)."""

    def page(*bodies: str) -> Run:
        run = Run("logits", 0.1)
        for i, body in enumerate(bodies):
            element = Element()
            element.markdown.body = body
            run.elements[(0, i)] = element
        return run

    report = StudentReport(0, "zebra")
    check_page(page("The prompt ends with **·zebra**", "**Greedy:** 'the lion'"), report, ["lion"], "ok")
    check_page(page("The prompt ends with **·lion**"), report, ["lion"], "leaky")
    check_page(page("The prompt ends with **·zebras**"), report, ["lion"], "plural")
    assert report.leaks == ["leaky: 'lion'"]  # generated text (**Greedy:**) is not the prompt: no leak
    assert report.missing == ["leaky", "plural"]


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(
        st.one_of(st.sampled_from(["lion", "lions", "sealion", "li", "on", "Lion", "seal"]), st.text(max_size=4)),
        max_size=30,
    ),
    words=st.lists(st.sampled_from(["lion", "seal", "sealion", "on", "lions", "li"]), min_size=1, max_size=6),
)
def test_the_one_pass_word_scan_finds_what_the_per_word_check_finds(pieces, words):
    """``words_in`` (one alternation over the page) and ``_has_word`` (one scan a word) agree, with words inside,
    around and beside one another, prefixes of each other, other cases and any characters between."""
    text = "".join(pieces)
    assert words_in(text, words) == {word for word in words if _has_word(text, word)}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # With a teacher key: students may follow a teacher (the last test); until a teacher broadcasts, nothing changes.
    env = {**CLASS_SERVER_ENV, "LLM_EXPLORER_TEACHER_KEY": FOLLOW_KEY}
    with AppServer(tmp_path_factory.mktemp("load") / "streamlit.log", extra_env=env) as app:
        yield app


def findings(reports: list[StudentReport]) -> list[str]:
    return [
        f"tab {r.index} ({r.word}): {item}"
        for r in reports
        for item in r.problems + r.leaks + [f"own word missing on {what}" for what in r.missing]
    ]


@pytest.mark.load
@pytest.mark.real_model
def test_a_class_of_twenty_on_one_server(server):
    warm = student(server.url, 0, WARM_UP_MARKER, MARKERS)  # all four pages once: imports, model, first runs
    assert findings([warm]) == []
    rss_warm = server.rss_mib()
    print(f"\nserver RSS warmed up: {rss_warm:,.0f} MiB")

    rss_after = []
    for round_index in range(ROUNDS):
        reports = run_class(server.url, N_STUDENTS, round_index, n_pages=1)
        rss_after.append(server.rss_mib())
        batch_sizes = [size for r in reports for size in r.batch_sizes]
        print(
            f"round {round_index + 1}: {N_STUDENTS} tabs, RSS {rss_after[-1]:,.0f} MiB, "
            f"largest batch seen {max(batch_sizes, default=0)}"
        )
        print("  " + latency_line("slider move (all pages)", timings_of(reports, "slider:")))
        for page in ("tokenization", "attention", "logits", "sampling"):
            print("  " + latency_line(f"slider move, {page}", timings_of(reports, f"slider:{page}")))
        print("  " + latency_line("prompt typed", timings_of(reports, "prompt:")))

        assert findings(reports) == []
        assert len(reports) == N_STUDENTS
        assert all(len(r.timings) == 3 for r in reports)  # open, type, move: every tab did all three
        # several tabs generated at once on the Sampling page: the shared engine batched them. One tab
        # submits at most 4 continuations at once, so a forward of more than 4 mixed tabs' requests.
        assert max(batch_sizes) > SAMPLING_REQUESTS_PER_TAB, batch_sizes

    assert max(rss_after) < rss_warm + RSS_HEADROOM_MIB
    assert all(later - earlier < RSS_ROUND_GROWTH_MIB for earlier, later in zip(rss_after, rss_after[1:]))


@pytest.mark.load
@pytest.mark.real_model
def test_heartbeat_tabs_keep_polling_as_a_browsers_tabs_do(server):
    """``bench_load.py --heartbeats``: tabs that only run the sidebar's fragment on its timer, until stopped."""
    with Heartbeats(server.url, 3) as beats:
        deadline = time.monotonic() + 60
        while beats.polls < 6 and time.monotonic() < deadline:  # two runs a tab (each opens its page first)
            time.sleep(0.1)
    assert beats.problems == [] and beats.polls >= 6
    stopped = beats.polls
    time.sleep(1.0)
    assert beats.polls == stopped  # their threads ended with the block


N_FOLLOWERS = 10
# A liveness bound, not a speed goal: every follower must get there (a lost broadcast never does). Alone it
# takes ~1.2 s (p95); in a full suite on a loaded 2-core machine one run took over 30 s for 9 of 10 followers,
# so 90 s. The latency itself is the benchmark's job (scripts/bench_load.py --followers; goal p95 <= 2 s).
FOLLOW_REACH_S = 90.0


@pytest.mark.load
@pytest.mark.real_model
def test_followers_track_the_teacher_and_see_nothing_else(server):
    """Runs after the class above (a teacher's broadcast would move every student of that class): a teacher
    walks two pages with a new prompt on each, ten tabs follow. Every follower reaches each of the teacher's
    pages with the teacher's prompt, shows no word the teacher never typed, and gets no error. Then the
    teacher starts two draw rounds on the Class page: each reaches every follower's open page."""
    words = MARKERS[-2:]  # one token each, and no student of the class above typed them
    report = follow_class(server.url, N_FOLLOWERS, words, reach_s=FOLLOW_REACH_S, new_rounds=2)
    flat = [seconds for per_broadcast in report.latencies for seconds in per_broadcast]
    rounds = [seconds for per_round in report.round_latencies for seconds in per_round]
    print("\n" + latency_line(f"broadcast reaching {N_FOLLOWERS} followers", flat))
    print("  " + latency_line(f"new draw round reaching {N_FOLLOWERS} open Class pages", rounds))
    print("  " + latency_line("one follower poll (timed fragment run)", report.poll_seconds))
    assert report.problems == [] and report.leaks == []
    assert len(report.latencies) == len(words) and len(report.round_latencies) == 2
    assert all(seconds < FOLLOW_REACH_S for seconds in rounds), report.missed  # a round that never arrives fails
    # Every follower reaches every broadcast. Followers that "never" did (seen in 2 of 5 full-suite runs) had
    # two causes: the count (a fast follower finished before the teacher's tab read the end
    # of its own run, and only later runs were counted; now counted from when the teacher typed), and a lost
    # page switch (Streamlit folds a fragment timer's rerun into a pending st.switch_page and keeps the old
    # page, and the follower had already counted the broadcast as applied; fixed in ui/classroom.follow).
    assert all(seconds < FOLLOW_REACH_S for seconds in flat), report.missed


def test_the_benchmarks_growth_is_each_step_and_the_least_squares_line():
    """``scripts/bench_load.py`` reports the RSS's growth round to round and, over three rounds or more, the line's
    slope: one step back does not hide the rise."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("bench_load", Path(__file__).parents[1] / "scripts" / "bench_load.py")
    bench_load = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_load)
    growth = bench_load.rss_growth([1000.0, 1030.0, 1020.0, 1030.0])
    assert growth["steps_percent"] == pytest.approx([3.0, -100 / 103, 100 / 102])
    assert growth["trend_mib"] == pytest.approx(8.0)  # least squares through (0, 1000), (1, 1030), (2, 1020), (3, 1030)
    assert growth["trend_percent"] == pytest.approx(100 * 8.0 / 1020.0)
    assert bench_load.rss_growth([1000.0, 1010.0]) == {"steps_percent": [pytest.approx(1.0)]}
    assert bench_load.rss_growth([1000.0]) == {}
