"""A class on one server, in one process: the room's counting rules, and two AppTest sessions, a teacher
and a student, sharing ``ui.class_page.broadcast.room()`` (a ``st.cache_resource``, so every session of the process
gets the same one, as on a real server).

- the follower tracks the teacher's page and settings, steps off and back on;
- a student cannot broadcast: a wrong key (typed or in a link) gets a message and changes nothing, and a
  server without a key has no teacher at all;
- a forged broadcast goes through the link parser on the follower's side and is refused like a link;
- pooled draws are the sum of each student's own draws, and sending the same draws again (a reload, a
  double click) adds nothing.

The room's rules and the two-session tests run against both stores (``store``): the room in the server's memory
(the default) and the Redis room every replica of a class shares (``LLM_EXPLORER_ROOM``, a real ``redis-server``;
``tests/test_redis_room.py`` has what only a shared store can do: replicas at once, outages, corrupt data).
"""

from __future__ import annotations

import json
import secrets
from collections import Counter

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from inference import SamplingParams, settings
from tests.apptest_utils import APP, assert_clean
from ui.class_page import broadcast
from ui.class_page.draws import DRAWS_PER_PRESS
from ui.classroom import room as room_module
from ui.classroom import settings as class_settings
from ui.classroom.room import Experiment, Room, RoomError, RoomUnavailable
from ui.common import format as fmt
from ui.common import state

KEY = "correct horse battery staple"
TIMEOUT = 120


EXPERIMENT = Experiment("m", "p", False, SamplingParams())


@pytest.fixture(params=["memory", "redis"])
def store(request, monkeypatch):
    """Which store the room lives in: the operator's settings for it (``LLM_EXPLORER_ROOM``, a fresh class id),
    and ``make()``, a new empty room of that store."""
    if request.param == "memory":
        monkeypatch.delenv(settings.PREFIX + "ROOM", raising=False)
        return Room
    from ui.classroom.redis_room import RedisRoom

    server = request.getfixturevalue("redis_server")
    monkeypatch.setenv(settings.PREFIX + "ROOM", server.url)
    monkeypatch.setenv(settings.PREFIX + "CLASS_ID", "t" + secrets.token_hex(6))
    return lambda: RedisRoom.from_url(server.url, "t" + secrets.token_hex(6))


@pytest.fixture
def class_server(monkeypatch, store):
    """A teacher key set by the operator, and an empty room (in either store)."""
    monkeypatch.setenv(broadcast.TEACHER_KEY_ENV, KEY)
    broadcast.room.clear()
    assert isinstance(broadcast.room(), Room) == (store is Room)  # the app's room is the store under test
    yield
    broadcast.room.clear()


def session(query: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for name, value in (query or {}).items():
        at.query_params[name] = value
    at.run()
    assert_clean(at)
    return at


def unlock(at: AppTest, key: str) -> None:
    at.text_input(key="_w_class_key").input(key)
    at.button(key="class_unlock").click()
    at.run()


def teacher_on_class_page(prompt: str | None = None) -> AppTest:
    """A teacher's tab (the key typed) on the Class page, with ``prompt`` typed first when given."""
    teacher = session()
    unlock(teacher, KEY)
    if prompt is not None:
        teacher.text_area(key="_w_prompt").input(prompt)
        teacher.run()
    teacher.switch_page("pages/class.py")
    teacher.run()
    return teacher


# ---- the room on its own ----------------------------------------------------------------------------------
def test_a_draw_round_keeps_its_logits_until_the_next_round(store):
    """The logits a round draws from are kept with it, byte for byte, and only for that round: a recount from a
    student's seed reads them, never a forward run again (whose last bits depend on the engine's path)."""
    room = store()
    logits = np.arange(-3.0, 3.0, 0.25, dtype="<f4").tobytes()  # raw bytes, any values (zeros, NUL bytes) kept
    first = room.new_draw_round(EXPERIMENT, logits=logits)
    assert room.round_logits(first) == logits
    assert room.round_logits("0" * 12) is None  # another round's id
    room.new_guess_round(EXPERIMENT)  # a guess round leaves the draw round's logits alone
    assert room.round_logits(first) == logits
    second = room.new_draw_round(EXPERIMENT, logits=b"\x00" * 8)
    assert room.round_logits(first) is None and room.round_logits(second) == b"\x00" * 8
    third = room.new_draw_round(EXPERIMENT)  # a round started without logits keeps none (not the last round's)
    assert room.round_logits(third) is None


def test_each_draw_counts_once_and_the_pool_is_the_sum_of_the_students_draws(store):
    room = store()
    round_id = room.new_draw_round(EXPERIMENT)
    assert room.add_draws(round_id, "a", 0, [1, 2, 3]) == 3
    assert room.add_draws(round_id, "a", 0, [1, 2, 3]) == 0  # the same draws again (a reload): nothing added
    assert room.add_draws(round_id, "a", 2, [3, 4]) == 1  # overlapping: only draw 3 is new
    assert room.add_draws(round_id, "b", 0, [4, 4]) == 2
    with pytest.raises(RoomError, match="never counted"):
        room.add_draws(round_id, "b", 5, [1])  # a gap: draws 2-4 were never sent
    pooled = room.draw_round().counts()
    own = [room.draw_round().draws[s] for s in ("a", "b")]
    assert own == [[1, 2, 3, 4], [4, 4]]
    assert sum(pooled.values()) == sum(map(len, own)) == 6 and pooled[4] == 3
    view = room.draw_view("a")  # what a class page polls: the pooled counts without the streams
    assert (view.pooled, view.students, view.mine, view.round_id) == (pooled, 2, 4, round_id)
    assert room.draw_view("nobody").mine == 0
    new_round = room.new_draw_round(EXPERIMENT)
    with pytest.raises(RoomError, match="round is over"):
        room.add_draws(round_id, "a", 4, [1])  # a draw for the old round
    assert room.draw_round().round_id == new_round and room.draw_round().counts() == {}


def test_a_guess_is_one_per_student_and_closes_at_the_reveal(store):
    room = store()
    round_id = room.new_guess_round(EXPERIMENT)
    room.guess(round_id, "a", " mat ")
    room.guess(round_id, "a", "floor")  # a second guess replaces the first
    room.guess(round_id, "b", "mat")
    assert room.guess_round().guesses == {"a": "floor", "b": "mat"}
    room.reveal(round_id)
    with pytest.raises(RoomError, match="closed"):
        room.guess(round_id, "c", "rug")
    with pytest.raises(RoomError, match="one word"):
        store().guess(round_id, "a", "x" * (room_module.MAX_GUESS_CHARS + 1))


def test_a_new_round_press_delivered_twice_starts_one_round(store):
    """Under load Streamlit can deliver one click twice; the teacher's press names the round its page showed."""
    room = store()
    experiment = EXPERIMENT
    first = room.new_guess_round(experiment, replacing=None)  # the page showed no round
    assert room.new_guess_round(experiment, replacing=None) == first  # the same press again: no second round
    assert room.guess_round().number == 1
    second = room.new_guess_round(experiment, replacing=first)  # the next press, from the page that showed round 1
    assert second != first and room.guess_round().number == 2
    assert room.new_draw_round(experiment, replacing=None) == room.new_draw_round(experiment, replacing=None)
    assert room.draw_round().number == 1


def test_the_broadcast_version_grows_only_on_a_change(store):
    room = store()
    assert room.broadcast("", {}) == 0  # the empty room's own view: no change
    assert room.broadcast("logits", {"prompt": "a"}) == 1
    assert room.broadcast("logits", {"prompt": "a"}) == 1
    assert room.broadcast("sampling", {"prompt": "a"}) == 2
    assert room.current().page == "sampling" and room.current().query == {"prompt": "a"} and room.current().live
    assert room.pause() == 3 and room.pause() == 3 and not room.current().live  # paused once
    assert room.broadcast("sampling", {"prompt": "a"}) == 4  # live again: a change
    with pytest.raises(RoomError):
        room.broadcast("logits", {"prompt": "x" * (room_module.MAX_QUERY_VALUE + 1)})


def test_a_heartbeat_tick_reads_the_rounds_the_broadcast_and_the_count_at_once(store):
    """``heartbeat`` (one round trip on a shared room) says what ``rounds``, ``current`` and ``followers`` say, and
    marks the follower seen; a teacher's tick (no student) changes nothing."""
    room = store()
    assert room.heartbeat(None, 5) == room_module.Beat(room_module.Rounds(None, None, False), room.current(), 0)
    draw_id, guess_id = room.new_draw_round(EXPERIMENT), room.new_guess_round(EXPERIMENT)
    room.reveal(guess_id)
    room.broadcast("logits", {"prompt": "a"})
    beat = room.heartbeat("s1", None)  # a follower's tick: seen, nothing counted
    assert beat.followers is None and beat.rounds == room.rounds() == room_module.Rounds(draw_id, guess_id, True)
    assert beat.broadcast == room.current() and beat.broadcast.page == "logits"
    room.heartbeat("s2", None)
    assert room.heartbeat(None, 5).followers == room.followers(5) == 2  # the teacher's tick counts them
    assert room.heartbeat(None, 5).followers == 2


def test_teacher_tokens_follow_one_rule_in_both_stores(store, monkeypatch):
    """A token lasts ``TEACHER_TOKEN_TTL_S`` after its last use (issued or checked), a class keeps
    ``MAX_TEACHER_TOKENS`` (a new one drops the one unused longest), and a revoked one is gone: in either store."""
    import time

    room = store()
    tokens = [room.issue_teacher_token() for _ in range(room_module.MAX_TEACHER_TOKENS)]
    assert all(room.is_teacher_token(token) for token in tokens)  # each checked, in this order: a use each
    assert room.is_teacher_token(tokens[0])  # used again: now tokens[1] is the one unused longest
    newest = room.issue_teacher_token()
    assert not room.is_teacher_token(tokens[1])
    assert room.is_teacher_token(tokens[0]) and room.is_teacher_token(newest)
    room.revoke_teacher_token(newest)
    assert not room.is_teacher_token(newest) and not room.is_teacher_token(secrets.token_hex(16))

    from ui.classroom import redis_room

    for module in (room_module, redis_room):  # a school day, shortened to a second
        monkeypatch.setattr(module, "TEACHER_TOKEN_TTL_S", 1.0)
    kept, idle = room.issue_teacher_token(), room.issue_teacher_token()
    time.sleep(0.6)
    assert room.is_teacher_token(kept)  # a use: another second from now
    time.sleep(0.6)
    assert room.is_teacher_token(kept) and not room.is_teacher_token(idle)  # idle for 1.2 s: expired


# ---- two sessions --------------------------------------------------------------------------------------
@pytest.mark.real_model
def test_the_follower_tracks_the_teachers_page_and_settings(class_server):
    teacher, student = session(), session()
    unlock(teacher, KEY)
    assert teacher.session_state[state.CLASS_TEACHER] is True
    teacher.text_area(key="_w_prompt").input("The dog slept by the door")
    teacher.run()
    teacher.switch_page("pages/logits.py")
    teacher.run()
    teacher.slider(key="_w_temperature").set_value(1.3)
    teacher.run()
    assert_clean(teacher)

    student.run()  # the browser's poll reruns the app when the version changed; AppTest reruns by hand
    assert_clean(student)
    assert student.session_state["_page"] == "logits"
    assert student.session_state["prompt"] == "The dog slept by the door"
    assert student.slider(key="_w_temperature").value == 1.3

    # stepping off: the teacher moves on, the student stays where it is
    student.toggle(key="_w_class_follow").set_value(False)
    student.run()
    teacher.switch_page("pages/tokenization.py")
    teacher.run()
    student.run()
    assert student.session_state["_page"] == "logits" and student.session_state["temperature"] == 1.3
    # and back on: the teacher's view at once
    student.toggle(key="_w_class_follow").set_value(True)
    student.run()
    assert_clean(student)
    assert student.session_state["_page"] == "tokenization"


@pytest.mark.real_model
def test_a_follower_whose_page_switch_was_lost_switches_again(class_server, monkeypatch):
    """Streamlit folds a rerun request that arrives while ``st.switch_page``'s is pending (a fragment timer's)
    into one that keeps the later request's page, so the run after a switch can land on the old page. The
    follower must not count the broadcast as applied there: its next run switches again."""
    teacher, student = session(), session()
    unlock(teacher, KEY)
    teacher.switch_page("pages/logits.py")
    teacher.run()
    teacher.text_area(key="_w_prompt").input("The dog slept by the door")
    teacher.run()
    assert_clean(teacher)

    lost: list[str] = []

    def switch_then_lose(script: str) -> None:  # the run ends as at a switch; the next run is on the old page
        lost.append(script)
        broadcast.st.stop()

    monkeypatch.setattr(broadcast.st, "switch_page", switch_then_lose)
    student.run()
    assert lost == ["pages/logits.py"] and student.session_state["_page"] != "logits"
    monkeypatch.undo()
    monkeypatch.setenv(broadcast.TEACHER_KEY_ENV, KEY)
    student.run()  # the next run (the follower's poll saw the version still not applied)
    assert_clean(student)
    assert student.session_state["_page"] == "logits"
    assert student.session_state["prompt"] == "The dog slept by the door"


@pytest.mark.real_model
def test_a_student_cannot_broadcast(class_server):
    teacher, student = session(), session()
    unlock(teacher, KEY)
    version = broadcast.room().current().version
    unlock(student, "guess")  # a wrong key
    assert "not the teacher key" in " ".join(e.value for e in student.error)
    assert state.CLASS_TEACHER not in student.session_state or not student.session_state[state.CLASS_TEACHER]
    student.text_area(key="_w_prompt").input("The student's own prompt")
    student.run()
    assert broadcast.room().current().version == version  # nothing reached the room
    linked = session({"teacher": "also wrong"})  # the teacher-only link with a wrong key
    assert "not the teacher key" in " ".join(e.value for e in linked.error)
    scripts = [el.proto.srcdoc for el in linked.sidebar.get("iframe")]
    # the browser replaces the link's history entry (not a new one); the script never holds the key itself
    assert any("history.replaceState" in script for script in scripts)
    assert not any("also wrong" in script for script in scripts)
    linked.run()  # AppTest runs no script: a run that still carries the key drops it from the address bar
    assert "teacher" not in linked.query_params
    assert linked.session_state[state.CLASS_TRIES] == 1  # the link's key was checked once, not once per run
    assert broadcast.room().current().version == version


@pytest.mark.real_model
def test_an_empty_key_is_not_a_wrong_try(class_server):
    """A press with nothing typed (or an unlock click delivered twice, the box cleared by the first) says so and
    costs none of the tries: the right key still works after more empty presses than ``MAX_KEY_TRIES``."""
    student = session()
    for _ in range(broadcast.MAX_KEY_TRIES + 1):
        unlock(student, "")
    assert "Type the teacher key first." in " ".join(e.value for e in student.info)
    assert state.CLASS_TRIES not in student.session_state or student.session_state[state.CLASS_TRIES] == 0
    unlock(student, KEY)
    assert student.session_state[state.CLASS_TEACHER]


@pytest.mark.real_model
def test_a_forged_broadcast_is_parsed_like_a_link(class_server):
    student = session()
    prompt = student.session_state["prompt"]
    student.session_state["temperature"] = 1.5
    broadcast.room().broadcast(
        "logits", {"temperature": "nan", "model": "../../etc/passwd", "top_k": "-5", "prompt": prompt}
    )
    student.run()
    assert_clean(student)
    assert student.session_state["temperature"] == 1.5  # NaN refused, as in a link: the value is not touched
    assert student.session_state["model"] != "../../etc/passwd"
    assert student.session_state["top_k"] == 0  # clamped into range


def test_without_a_key_nobody_is_the_teacher(monkeypatch):
    monkeypatch.delenv(broadcast.TEACHER_KEY_ENV, raising=False)
    assert broadcast.teacher_key() is None and not broadcast.key_matches("")
    monkeypatch.setenv(broadcast.TEACHER_KEY_ENV, "   ")  # blank is no key
    class_settings.reload()  # a running app reads its settings once, at start
    assert broadcast.teacher_key() is None


# ---- the class experiments ------------------------------------------------------------------------------
def student_session(student: str | None = None) -> AppTest:
    """A student's tab; ``student`` is its browser's id as the cookie gives it back after a reload."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    if student is not None:
        at.session_state[state.CLASS_STUDENT] = student
    at.run()
    assert_clean(at)
    return at


@pytest.mark.real_model
def test_pooled_draws_are_the_sum_of_each_students_own_and_a_reload_does_not_double_count(class_server):
    from ui.class_page.draws import kept_logits, student_draws

    teacher = teacher_on_class_page()
    teacher.button(key="class_new_draws").click()
    teacher.run()
    assert_clean(teacher)
    first, second = student_session(), student_session()  # both follow the teacher onto the Class page
    first_id, second_id = (at.session_state[state.CLASS_STUDENT] for at in (first, second))
    for at, presses in ((first, 2), (second, 1)):
        for _ in range(presses):
            at.button(key="class_draw").click()
            at.run()
            assert_clean(at)
    reloaded = student_session(first_id)  # the first student's browser reloads: same id, a new session
    reloaded.button(key="class_draw").click()
    reloaded.run()
    assert_clean(reloaded)

    rnd = broadcast.room().draw_round()
    assert {s: len(t) for s, t in rnd.draws.items()} == {first_id: 3 * DRAWS_PER_PRESS, second_id: DRAWS_PER_PRESS}
    kept = kept_logits(broadcast.room(), rnd.round_id)  # the logits the round keeps, not a forward run again
    for sid, tokens in rnd.draws.items():  # each student's draws are its own seeded stream, draw 0, 1, 2, … once
        assert tokens == student_draws(kept, rnd.experiment, rnd.round_id, sid, 0, len(tokens))
    assert rnd.draws[first_id] != rnd.draws[second_id]  # two seeds, two streams
    pooled = rnd.counts()
    assert sum(pooled.values()) == 4 * DRAWS_PER_PRESS
    assert pooled == Counter(rnd.draws[first_id]) + Counter(rnd.draws[second_id])
    teacher.run()
    title = next(
        json.loads(c.proto.spec)["layout"]["title"]["text"]
        for c in teacher.get("plotly_chart")
        if c.proto.id.endswith("-class_histogram")
    )
    assert title.startswith(f"The class (2 students): {4 * DRAWS_PER_PRESS} draws")


@pytest.mark.real_model
def test_a_press_the_room_could_not_take_says_not_counted_until_the_next_press(class_server, monkeypatch):
    """A draw pressed while the room could not answer is not counted, and the page says so ("press again") until the
    student's next press: the reruns when the room answers again (the heartbeat's) do not wipe the note unread."""
    teacher = teacher_on_class_page()
    teacher.button(key="class_new_draws").click()
    teacher.run()
    student = student_session()
    room_type = type(broadcast.room())
    answering = room_type.draw_view

    def unreachable(self, *args, **kwargs):
        raise RoomUnavailable("the store is restarting")

    monkeypatch.setattr(room_type, "draw_view", unreachable)
    student.button(key="class_draw").click()
    student.run()
    assert_clean(student)
    monkeypatch.setattr(room_type, "draw_view", answering)  # the room answers again
    for _ in range(2):  # the heartbeat's rerun, and the next: the note stays until read
        student.run()
        assert_clean(student)
        notes = " ".join(e.value for e in student.error)
        assert "Your press was not counted" in notes and "Press again" in notes, notes
    assert broadcast.room().draw_round().draws == {}  # indeed nothing counted
    student.button(key="class_draw").click()  # pressed again: counted, and the note has done its job
    student.run()
    assert_clean(student)
    assert "not counted" not in " ".join(e.value for e in student.error)
    assert [len(t) for t in broadcast.room().draw_round().draws.values()] == [DRAWS_PER_PRESS]


def guess_box(at: AppTest, round_id: str):
    return at.text_input(key=f"_w_class_guess_{round_id}")


@pytest.mark.real_model
def test_guesses_count_once_per_student_and_show_after_the_reveal(class_server):
    teacher = teacher_on_class_page("The cat sat on the")
    teacher.button(key="class_new_guesses").click()
    teacher.run()
    assert not any(key.startswith("_w_class_guess") for key in (w.key for w in teacher.text_input))  # no box
    round_id = broadcast.room().guess_round().round_id
    student = student_session()
    for guess in ("floor", "mat"):  # a second guess replaces the first (the form's button; Enter sends the form)
        guess_box(student, round_id).input(guess)
        student.button(key="class_guess").click()
        student.run()
        assert_clean(student)
    assert list(broadcast.room().guess_round().guesses.values()) == ["mat"]
    assert "class_guesses" not in " ".join(c.proto.id for c in student.get("plotly_chart"))  # not before the reveal
    teacher.button(key="class_reveal").click()
    teacher.run()
    assert_clean(teacher)
    sentence = next(m.value for m in teacher.markdown if m.value.startswith("The model's most probable next token"))
    from ui.class_page.draws import guess_view

    view = guess_view(broadcast.room().guess_round().experiment, ["mat"])
    hits = view.top_guessed
    assert f"{hits} student{'s' * (hits != 1)} of 1 guessed it" in sentence  # the sentence holds for the numbers
    assert "· is a space" in sentence  # the labels' notation, explained where it is shown
    assert view.labels[0] == " mat" and view.class_share[0] == 1.0
    chart = next(json.loads(c.proto.spec) for c in teacher.get("plotly_chart") if c.proto.id.endswith("-class_guesses"))
    model_bars = chart["data"][0]
    assert len(model_bars["text"]) == len(model_bars["y"]) and all(model_bars["text"])  # every bar has its value
    student.run()  # what the tab's heartbeat does on the reveal
    assert "Send my guess" not in [b.label for b in student.button]  # closed after the reveal ...
    closed = [w for w in student.text_input if w.label.startswith("Your guess (closed")]
    assert len(closed) == 1 and closed[0].disabled and closed[0].value == "mat"  # ... visibly, with the guess sent
    assert closed[0].key == guess_box(student, round_id).key  # the same box: a draft typed in it stays on screen
    said = " ".join(c.value for c in student.caption)
    assert "had not sent was **not sent**" in said and "'mat'" in said  # a lost draft is named, and what counted
    late = student_session()  # a tab opened after the reveal never had a draft: it is not told about one
    assert "not sent" not in " ".join(c.value for c in late.caption)


@pytest.mark.real_model
def test_a_new_round_redraws_an_open_page_and_a_late_press_counts_in_it(class_server):
    """A student's open Class page drew round A; the teacher starts round B at another temperature. The tab's
    heartbeat sees rounds other than those its page drew (``broadcast._rounds_changed``) and reruns the page,
    which then describes B; a press sent from the page of round A, just before that, counts in round B."""
    teacher = teacher_on_class_page("The cat sat on the")
    teacher.button(key="class_new_draws").click()
    teacher.run()
    assert "class_draw" not in [b.key for b in teacher.button]  # the teacher does not draw (said on the page)
    assert any("You do not draw or guess yourself" in c.value for c in teacher.caption)
    student = student_session()
    student_id = student.session_state[state.CLASS_STUDENT]
    first_round = broadcast.room().draw_round().round_id
    assert "T = 0.8" in " ".join(m.value for m in student.markdown if m.value.startswith("**Draw round"))

    teacher.switch_page("pages/logits.py")
    teacher.run()
    teacher.slider(key="_w_temperature").set_value(0.3)
    teacher.run()
    teacher.switch_page("pages/class.py")
    teacher.run()
    teacher.button(key="class_new_draws").click()  # round B, at T = 0.3, while the student's page shows round A
    teacher.run()
    second_round = broadcast.room().draw_round().round_id
    assert second_round != first_round
    shown = student.session_state[state.CLASS_ROUNDS_SHOWN]
    assert shown["draw_id"] == first_round  # what the student's page drew; the heartbeat compares it:
    assert broadcast.room().rounds().draw_id != shown["draw_id"]

    student.button(key="class_draw").click()  # pressed on round A's page: counts in round B, and says so
    student.run()
    assert_clean(student)
    rnd = broadcast.room().draw_round()
    assert rnd.round_id == second_round and len(rnd.draws[student_id]) == DRAWS_PER_PRESS
    assert any("counts in it" in i.value for i in student.info)
    text = " ".join(m.value for m in student.markdown if m.value.startswith("**Draw round"))
    assert "T = 0.3" in text and "T = 0.8" not in text  # the text above the chart is round B's
    assert student.session_state[state.CLASS_ROUNDS_SHOWN]["draw_id"] == second_round


@pytest.mark.real_model
def test_a_guess_sent_from_an_old_rounds_page_is_refused_and_a_reset_clears_it(class_server):
    teacher = teacher_on_class_page()
    teacher.button(key="class_new_guesses").click()
    teacher.run()
    first = broadcast.room().guess_round().round_id
    student = student_session()
    guess_box(student, first).input("mat")
    student.button(key="class_guess").click()
    student.run()
    assert any("Your guess: `'mat'`" in c.value for c in student.caption)
    teacher.button(key="class_new_guesses").click()  # a reset: the same prompt, a new round
    teacher.run()
    guess_box(student, first).input("rug")  # typed on the old round's page
    student.button(key="class_guess").click()
    student.run()
    assert_clean(student)
    assert broadcast.room().guess_round().guesses == {}  # not counted in the new round
    assert any("new guess round" in w.value for w in student.warning)
    assert not any("Your guess" in c.value for c in student.caption)  # the old round's guess is gone from the page
    second = broadcast.room().guess_round().round_id
    assert guess_box(student, second).value == ""  # a fresh box for the new round


@pytest.mark.real_model
def test_broadcast_off_tells_followers_and_moves_nobody(class_server):
    teacher, student = session(), session()
    unlock(teacher, KEY)
    teacher.switch_page("pages/logits.py")
    teacher.run()
    student.run()
    assert student.session_state["_page"] == "logits"
    teacher.toggle(key=state.widget_key(state.CLASS_BROADCASTING)).set_value(False)
    teacher.run()
    assert not broadcast.room().current().live
    teacher.switch_page("pages/tokenization.py")
    teacher.run()
    student.run()
    assert_clean(student)
    assert student.session_state["_page"] == "logits"  # not moved
    captions = " ".join(c.value for c in student.sidebar.get("caption"))
    assert "not broadcasting" in captions and "Following the teacher:" not in captions
    teacher.toggle(key=state.widget_key(state.CLASS_BROADCASTING)).set_value(True)
    teacher.run()
    student.run()
    assert student.session_state["_page"] == "tokenization"  # on again: the teacher's view at once


@pytest.mark.real_model
def test_a_wrong_key_keeps_the_teacher_panel_open(class_server):
    student = session()
    unlock(student, "not it")
    panel = next(e for e in student.sidebar.get("expander") if e.label == "I am the teacher")
    assert panel.proto.expanded
    assert "not the teacher key" in " ".join(e.value for e in student.error)


def test_the_bin_plan_is_the_chi_square_tests_own():
    """The sentence's bins (``bin_plan``) are the ones ``chi_square_gof`` tests, for every kind of case."""
    import numpy as np

    from ui.class_page.draws import bin_plan
    from ui.common.stats import chi_square_gof

    rng = np.random.default_rng(0)
    for n_tokens, n_draws in [(2, 10), (11, 120), (50, 40), (5, 3), (49_152, 120), (3, 1000), (8, 12)]:
        probs = rng.dirichlet(np.full(n_tokens, 0.3))
        counts = rng.multinomial(n_draws, probs)
        plan, gof = bin_plan(n_draws, probs), chi_square_gof(counts, probs)
        assert plan.n_bins == gof.n_bins, (n_tokens, n_draws, plan, gof)


def test_class_sentences_say_what_their_numbers_say():
    from ui.class_page import claims
    from ui.class_page.draws import BinPlan
    from ui.class_page.rounds import prompt_end

    assert claims.bins_sentence(11, BinPlan(3, 49_149, True)) == (
        "The χ² test needs every bin expected at least 5 times: it keeps the 3 tokens expected that often as bins "
        "of their own and pools the 49,149 other possible tokens (each expected fewer times) into one, so it counts "
        "4 bins where the chart shows 11 bars."
    )
    assert "join the smallest of those, so it counts 2 bins" in claims.bins_sentence(4, BinPlan(2, 1, False))
    assert "each of the 3 possible tokens is, so it counts 3 bins" in claims.bins_sentence(3, BinPlan(3, 0, True))
    assert claims.space_note([" cat", "other (9 tokens)"]) == " (In the token labels, · is a space.)"
    assert claims.space_note(["cat", "other (9 tokens)"]) == ""  # the "other" bar's spaces are words, not tokens
    assert "(**other (49,142 tokens)**)" in claims.pooled_sentence(120, 4, 0.048, "other (49,142 tokens)")
    assert prompt_end("Use *stars* and <b>tags</b>") == r"Use \*stars\* and \<b\>tags\</b\>"
    assert prompt_end("x " * 40).startswith("…") and len(prompt_end("word " * 30)) <= 41


# ---- the class's sentences on both models and on prompts they were not written for ---------------------------
ODD_PROMPTS = [
    ("The cat sat on the", False),
    ("def add(a, b):\n    return", False),
    ("I love 🍕 and", False),
    ("Write one word: ", False),
    ("Name an animal.", True),
]


@pytest.fixture
def both_models(gemma_engine, monkeypatch):
    """The app's two models through ``ui.common.resources`` (Gemma's engine shared with the session's fixture)."""
    import streamlit as st

    from ui.common import models, resources

    real = resources.load_engine
    monkeypatch.setattr(
        resources,
        "load_engine",
        lambda model=None, **kwargs: gemma_engine if model == "gemma-3-270m" else real(model=model, **kwargs),
    )
    st.cache_resource.clear()
    yield [models.default_name(), "gemma-3-270m"]
    st.cache_resource.clear()


@pytest.mark.real_model
def test_class_sentences_hold_for_both_models_and_odd_prompts(both_models):
    """Each number in the class view's sentences is the chart's: draws, students, the largest gap, the bins, the
    guesses; the question quotes the prompt's real end; a guess is read as the token the model would write next."""
    from inference import SamplingParams
    from ui.class_page import claims
    from ui.class_page.draws import (
        guess_token,
        guess_view,
        kept_logits,
        pooled_bins,
        pooled_histogram,
        start_draw_round,
        student_draws,
    )
    from ui.class_page.rounds import next_token_phrase, prompt_end
    from ui.logits.compute import prompt_logits, token_texts

    for model in both_models:
        for prompt, chat in ODD_PROMPTS:
            if chat and model == "gemma-3-270m":
                continue  # a base model: no chat template (the sidebar's toggle is off for it)
            experiment = Experiment(model, prompt, chat, SamplingParams(temperature=1.0, seed=0).canonical())
            room = Room()
            round_id = start_draw_round(room, experiment)
            kept = kept_logits(room, round_id)
            for student in ("a", "b"):
                room.add_draws(round_id, student, 0, student_draws(kept, experiment, round_id, student, 0, 40))
            rnd = room.draw_round()
            pooled = pooled_histogram(room, round_id, experiment, rnd.counts())
            assert pooled.n_draws == 80 and round(float(pooled.observed.sum()) * 80) == 80
            gaps = abs(pooled.observed - pooled.expected)
            sentence = claims.pooled_sentence(pooled.n_draws, 2, float(gaps.max()), pooled.labels[int(gaps.argmax())])
            assert sentence.startswith("80 draws by 2 students") and f"{gaps.max():.3f}" in sentence
            plan = pooled_bins(room, round_id, experiment, pooled.n_draws)
            assert plan.n_bins == pooled.gof.n_bins, (model, prompt)
            if pooled.gof.dof:
                bins = claims.bins_sentence(len(pooled.labels), plan)
                assert f"{plan.n_bins:,} bin" in bins and f"{len(pooled.labels)} bar" in bins
            note = claims.space_note(pooled.labels)
            assert ("· is a space" in note) == any(
                " " in label for label in pooled.labels if not label.startswith(claims.OTHER_PREFIX)
            )
            phrase = next_token_phrase(experiment)
            assert prompt_end(prompt) in phrase and (("reply" in phrase) == chat)

            guesses = ["mat", "floor", "🍕", "mat"]
            view = guess_view(experiment, guesses)
            assert view.n_guesses == 4 and abs(float(view.class_share.sum()) - 1.0) < 1e-9
            text = claims.guesses_sentence(
                view.n_guesses,
                view.top_token,
                view.top_prob,
                view.top_guessed,
                view.most_guessed,
                view.most_guessed_count,
                view.most_guessed_prob,
                view.several_tokens,
            )
            assert f"(p = {view.top_prob:.3f})" in text and "of 4 guessed it" in text
            several = fmt.count(view.several_tokens, "guess", "guesses") + " of more than one token"
            assert (several in text) == bool(view.several_tokens)
            last = prompt_logits(model, prompt, chat).token_strings[-1]
            token, _ = guess_token(model, prompt, "mat", chat)
            written = "mat" if last[-1:].isspace() else " mat"  # what the model would write after the prompt
            shown = token_texts(model, [token])[0]
            assert shown and written.startswith(shown) and shown.startswith(written[:2]), (model, prompt, shown)


@pytest.mark.real_model
def test_a_draw_press_delivered_twice_counts_once(class_server):
    """The Draw button names the student's count its page showed: the same press again (a double click, or a click
    Streamlit replays under load) adds nothing; the next press, from the page drawn after it, adds ten."""
    import streamlit as st

    from inference import SamplingParams
    from ui.class_page import rounds
    from ui.class_page.draws import start_draw_round
    from ui.common import models

    st.session_state[state.CLASS_STUDENT] = "b" * 32
    room = broadcast.room()
    round_id = start_draw_round(
        room, Experiment(models.default_name(), "The cat sat on the", False, SamplingParams().canonical())
    )
    rounds._draw(round_id, 0)
    rounds._draw(round_id, 0)  # the same press, delivered again
    assert len(room.draw_round().draws["b" * 32]) == DRAWS_PER_PRESS
    rounds._draw(round_id, DRAWS_PER_PRESS)  # the next press
    assert len(room.draw_round().draws["b" * 32]) == 2 * DRAWS_PER_PRESS
    newer = start_draw_round(room, room.draw_round().experiment)  # the teacher starts a round before the next press
    rounds._draw(round_id, 2 * DRAWS_PER_PRESS)  # pressed on the old round's page: counts in the new one
    rounds._draw(round_id, 2 * DRAWS_PER_PRESS)  # the same press, delivered again: the new round has it already
    assert room.draw_round().round_id == newer and len(room.draw_round().draws["b" * 32]) == DRAWS_PER_PRESS
