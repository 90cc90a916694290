"""A class on one server, in one process: the room's counting rules, and two AppTest sessions, a teacher
and a student, sharing ``ui.classroom.room()`` (a ``st.cache_resource``, so every session of the process
gets the same one, as on a real server).

- the follower tracks the teacher's page and settings, steps off and back on;
- a student cannot broadcast: a wrong key (typed or in a link) gets a message and changes nothing, and a
  server without a key has no teacher at all;
- a forged broadcast goes through the link parser on the follower's side and is refused like a link;
- pooled draws are the sum of each student's own draws, and sending the same draws again (a reload, a
  double click) adds nothing.
"""
from __future__ import annotations

import json
from collections import Counter

import pytest
from streamlit.testing.v1 import AppTest

from tests.apptest_utils import APP, assert_clean
from ui import classroom, room as room_module
from ui.room import Experiment, Room, RoomError

KEY = "correct horse battery staple"
TIMEOUT = 120


@pytest.fixture
def class_server(monkeypatch):
    """A teacher key set by the operator, and an empty room."""
    monkeypatch.setenv(classroom.TEACHER_KEY_ENV, KEY)
    classroom.room.clear()
    yield
    classroom.room.clear()


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


# ---- the room on its own ----------------------------------------------------------------------------------
def test_each_draw_counts_once_and_the_pool_is_the_sum_of_the_students_draws():
    room = Room()
    round_id = room.new_draw_round(Experiment("m", "p", False, ()))
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
    new_round = room.new_draw_round(Experiment("m", "p", False, ()))
    with pytest.raises(RoomError, match="round is over"):
        room.add_draws(round_id, "a", 4, [1])  # a draw for the old round
    assert room.draw_round().round_id == new_round and room.draw_round().counts() == {}


def test_a_guess_is_one_per_student_and_closes_at_the_reveal():
    room = Room()
    round_id = room.new_guess_round(Experiment("m", "p", False, ()))
    room.guess(round_id, "a", " mat ")
    room.guess(round_id, "a", "floor")  # a second guess replaces the first
    room.guess(round_id, "b", "mat")
    assert room.guess_round().guesses == {"a": "floor", "b": "mat"}
    room.reveal(round_id)
    with pytest.raises(RoomError, match="closed"):
        room.guess(round_id, "c", "rug")
    with pytest.raises(RoomError, match="one word"):
        Room().guess(round_id, "a", "x" * (room_module.MAX_GUESS_CHARS + 1))


def test_the_broadcast_version_grows_only_on_a_change():
    room = Room()
    assert room.broadcast("logits", {"prompt": "a"}) == 1
    assert room.broadcast("logits", {"prompt": "a"}) == 1
    assert room.broadcast("sampling", {"prompt": "a"}) == 2
    with pytest.raises(RoomError):
        room.broadcast("logits", {"prompt": "x" * (room_module.MAX_QUERY_VALUE + 1)})


# ---- two sessions --------------------------------------------------------------------------------------
@pytest.mark.real_model
def test_the_follower_tracks_the_teachers_page_and_settings(class_server):
    teacher, student = session(), session()
    unlock(teacher, KEY)
    assert teacher.session_state[classroom.TEACHER] is True
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
        classroom.st.stop()

    monkeypatch.setattr(classroom.st, "switch_page", switch_then_lose)
    student.run()
    assert lost == ["pages/logits.py"] and student.session_state["_page"] != "logits"
    monkeypatch.undo()
    monkeypatch.setenv(classroom.TEACHER_KEY_ENV, KEY)
    student.run()  # the next run (the follower's poll saw the version still not applied)
    assert_clean(student)
    assert student.session_state["_page"] == "logits"
    assert student.session_state["prompt"] == "The dog slept by the door"


@pytest.mark.real_model
def test_a_student_cannot_broadcast(class_server):
    teacher, student = session(), session()
    unlock(teacher, KEY)
    version = classroom.room().current().version
    unlock(student, "guess")  # a wrong key
    assert "not the teacher key" in " ".join(e.value for e in student.error)
    assert classroom.TEACHER not in student.session_state or not student.session_state[classroom.TEACHER]
    student.text_area(key="_w_prompt").input("The student's own prompt")
    student.run()
    assert classroom.room().current().version == version  # nothing reached the room
    linked = session({"teacher": "also wrong"})  # the teacher-only link with a wrong key
    assert "not the teacher key" in " ".join(e.value for e in linked.error)
    assert "teacher" not in linked.query_params  # the key does not stay in the address bar
    assert classroom.room().current().version == version


@pytest.mark.real_model
def test_a_forged_broadcast_is_parsed_like_a_link(class_server):
    student = session()
    prompt = student.session_state["prompt"]
    student.session_state["temperature"] = 1.5
    classroom.room().broadcast("logits", {"temperature": "nan", "model": "../../etc/passwd", "top_k": "-5",
                                          "prompt": prompt})
    student.run()
    assert_clean(student)
    assert student.session_state["temperature"] == 1.5  # NaN refused, as in a link: the value is not touched
    assert student.session_state["model"] != "../../etc/passwd"
    assert student.session_state["top_k"] == 0  # clamped into range


def test_without_a_key_nobody_is_the_teacher(monkeypatch):
    monkeypatch.delenv(classroom.TEACHER_KEY_ENV, raising=False)
    assert classroom.teacher_key() is None and not classroom.key_matches("")
    monkeypatch.setenv(classroom.TEACHER_KEY_ENV, "   ")  # blank is no key
    assert classroom.teacher_key() is None


# ---- the class experiments ------------------------------------------------------------------------------
def student_session(student: str | None = None) -> AppTest:
    """A student's tab; ``student`` is its browser's id as the cookie gives it back after a reload."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    if student is not None:
        at.session_state[classroom.STUDENT] = student
    at.run()
    assert_clean(at)
    return at


@pytest.mark.real_model
def test_pooled_draws_are_the_sum_of_each_students_own_and_a_reload_does_not_double_count(class_server):
    from ui.compute_class import DRAWS_PER_PRESS, student_draws

    teacher = session()
    unlock(teacher, KEY)
    teacher.switch_page("pages/95_class.py")
    teacher.run()
    teacher.button(key="class_new_draws").click()
    teacher.run()
    assert_clean(teacher)
    first, second = student_session(), student_session()  # both follow the teacher onto the Class page
    first_id, second_id = (at.session_state[classroom.STUDENT] for at in (first, second))
    for at, presses in ((first, 2), (second, 1)):
        for _ in range(presses):
            at.button(key="class_draw").click()
            at.run()
            assert_clean(at)
    reloaded = student_session(first_id)  # the first student's browser reloads: same id, a new session
    reloaded.button(key="class_draw").click()
    reloaded.run()
    assert_clean(reloaded)

    rnd = classroom.room().draw_round()
    assert {s: len(t) for s, t in rnd.draws.items()} == {first_id: 3 * DRAWS_PER_PRESS, second_id: DRAWS_PER_PRESS}
    for sid, tokens in rnd.draws.items():  # each student's draws are its own seeded stream, draw 0, 1, 2, … once
        assert tokens == student_draws(rnd.experiment, rnd.round_id, sid, 0, len(tokens))
    assert rnd.draws[first_id] != rnd.draws[second_id]  # two seeds, two streams
    pooled = rnd.counts()
    assert sum(pooled.values()) == 4 * DRAWS_PER_PRESS
    assert pooled == Counter(rnd.draws[first_id]) + Counter(rnd.draws[second_id])
    teacher.run()
    title = next(json.loads(c.proto.spec)["layout"]["title"]["text"] for c in teacher.get("plotly_chart")
                 if c.proto.id.endswith("-class_histogram"))
    assert title.startswith(f"The class (2 students): {4 * DRAWS_PER_PRESS} draws")


@pytest.mark.real_model
def test_guesses_count_once_per_student_and_show_after_the_reveal(class_server):
    teacher = session()
    unlock(teacher, KEY)
    teacher.text_area(key="_w_prompt").input("The cat sat on the")
    teacher.run()
    teacher.switch_page("pages/95_class.py")
    teacher.run()
    teacher.button(key="class_new_guesses").click()
    teacher.run()
    student = student_session()
    for guess in ("floor", "mat"):  # a second guess replaces the first
        student.text_input(key="_w_class_guess").input(guess)
        student.button(key="class_guess").click()
        student.run()
        assert_clean(student)
    assert list(classroom.room().guess_round().guesses.values()) == ["mat"]
    assert "class_guesses" not in " ".join(c.proto.id for c in student.get("plotly_chart"))  # not before the reveal
    teacher.button(key="class_reveal").click()
    teacher.run()
    assert_clean(teacher)
    sentence = next(m.value for m in teacher.markdown if m.value.startswith("The model's most probable next token"))
    from ui.compute_class import guess_view

    view = guess_view(classroom.room().guess_round().experiment, ["mat"])
    hits = view.top_guessed
    assert f"{hits} student{'s' * (hits != 1)} of 1 guessed it" in sentence  # the sentence holds for the numbers
    assert view.labels[0] == " mat" and view.class_share[0] == 1.0
    student.run()
    assert "Send my guess" not in [b.label for b in student.button]  # closed after the reveal
