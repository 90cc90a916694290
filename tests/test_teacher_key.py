"""The teacher key against guessing, in both stores of the room and in the class panel:

- the room's back-off (``RoomStore.claim_key_try``, ``key_proved``): past its free tries an address waits, twice as
  long each time, up to a cap; the class as a whole likewise, so tries from many addresses slow down too; a right key
  forgets its address's tries; nothing is counted while a wait is on. One rule in the memory room and in Redis
  (the same test on both, as ``tests/test_classroom.py`` runs the room's rules), so it holds across replicas;
- two teacher sessions broadcasting at once are counted (``RoomStore.teaching``), and the second is warned;
- the class panel (``ui.class_page.broadcast``, an AppTest of the panel alone: no model): exactly ``MAX_KEY_TRIES``
  wrong keys per session, the same wrong key again (a click Streamlit delivered twice) costing nothing; a key with
  spaces around it refused, not stripped; the messages held until read; the back-off reaching a new session.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from inference import settings
from ui.class_page import broadcast
from ui.classroom import room as room_module
from ui.classroom.room import Room
from ui.common import state

KEY = "correct horse battery staple"
PANEL = str(Path(__file__).resolve().parent / "fixtures" / "class_panel_app.py")
WAIT = 0.3  # the first wait past the free tries, in these tests (1 s in the app)


@pytest.fixture(params=["memory", "redis"])
def store(request, monkeypatch):
    """``make()``: a new empty room in the memory store or in Redis (a fresh class id each); the app's room
    (``broadcast.room()``) is the same store, empty."""
    monkeypatch.setenv(broadcast.TEACHER_KEY_ENV, KEY)
    if request.param == "memory":
        monkeypatch.delenv(settings.PREFIX + "ROOM", raising=False)
        make = Room
    else:
        from ui.classroom.redis_room import RedisRoom

        server = request.getfixturevalue("redis_server")
        monkeypatch.setenv(settings.PREFIX + "ROOM", server.url)
        monkeypatch.setenv(settings.PREFIX + "CLASS_ID", "k" + secrets.token_hex(6))
        make = lambda: RedisRoom.from_url(server.url, "k" + secrets.token_hex(6))  # noqa: E731
    broadcast.room.clear()
    yield make
    broadcast.room.clear()


@pytest.fixture
def quick_rule(monkeypatch):
    """The back-off with few free tries and short waits: 2 per address, 3 for the class, waits from ``WAIT``."""
    for name, value in [
        ("KEY_FREE_TRIES_ADDRESS", 2),
        ("KEY_FREE_TRIES_CLASS", 3),
        ("KEY_FIRST_WAIT_S", WAIT),
        ("KEY_WAIT_CAP_ADDRESS_S", 2 * WAIT),
        ("KEY_WAIT_CAP_CLASS_S", 2 * WAIT),
    ]:
        monkeypatch.setattr(room_module, name, value)


# ---- the room's rule, in both stores ----------------------------------------------------------------------
def test_key_tries_back_off_per_address_and_for_the_class(store, quick_rule):
    room = store()
    assert [room.claim_key_try("10.0.0.1") for _ in range(2)] == [0, 0]  # the address's free tries
    left = room.claim_key_try("10.0.0.1")  # the third waits WAIT after the second
    assert 0 < left <= WAIT
    assert 0 < room.claim_key_try("10.0.0.1") <= left  # asked again while waiting: still waiting, nothing counted
    assert room.claim_key_try("10.0.0.2") == 0  # another address: its first try, the class's third
    assert 0 < room.claim_key_try("10.0.0.3") <= WAIT  # a fourth address waits too: the class's back-off
    room.key_proved("10.0.0.2")  # that try was the right key: not counted for the class, its address forgotten
    assert room.claim_key_try("10.0.0.3") == 0  # the class's third try again
    time.sleep(WAIT + 0.05)
    assert room.claim_key_try("10.0.0.1") == 0  # its wait is over: the address's third try, the class's fourth
    assert WAIT < room.claim_key_try("10.0.0.1") <= 2 * WAIT  # twice as long now (the cap)


def test_the_address_is_kept_as_printable_text(store, quick_rule):
    room = store()
    odd = "fe80::1%eth0 <script>" + "9" * 100
    assert room_module.key_address(odd) == "fe80::1_eth0__script_" + "9" * 43
    assert [room.claim_key_try(odd) for _ in range(3)][:2] == [0, 0]
    assert room.claim_key_try(room_module.key_address(odd)) > 0  # the same address, however it came


def test_two_teacher_sessions_broadcasting_are_counted(store):
    room = store()
    assert room.teaching("tab-a", 1.0) == 0
    assert room.teaching("tab-b", 1.0) == 1  # a second teacher: one other
    assert room.teaching("tab-a", 1.0) == 1
    time.sleep(0.3)
    assert room.teaching("tab-a", 0.2) == 0  # tab-b not seen within 0.2 s: gone


# ---- the class panel ------------------------------------------------------------------------------------------------
def panel(query: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(PANEL, default_timeout=60)
    for name, value in (query or {}).items():
        at.query_params[name] = value
    at.run()
    assert not at.exception
    return at


def unlock(at: AppTest, key: str) -> None:
    at.text_input(key=state.CLASS_KEY_BOX).input(key)
    at.button(key=state.CLASS_UNLOCK).click()
    at.run()
    assert not at.exception


def shown(at: AppTest) -> str:
    return "\n".join(e.value for kind in ("error", "warning", "info", "success", "caption") for e in getattr(at, kind))


def teacher(at: AppTest) -> bool:
    return state.CLASS_TEACHER in at.session_state and at.session_state[state.CLASS_TEACHER]


def has_key_box(at: AppTest) -> bool:
    return any(box.key == state.CLASS_KEY_BOX for box in at.text_input)


def test_exactly_max_key_tries_different_wrong_keys_and_a_repeat_costs_none(store):
    at = panel()
    for n in range(1, broadcast.MAX_KEY_TRIES):
        unlock(at, f"wrong {n}")
        left = broadcast.MAX_KEY_TRIES - n
        assert (
            f"That is not the teacher key: nothing changed. Students can follow but not broadcast. {left} tr"
            in shown(at)
        )
        assert has_key_box(at) and "wrong keys" not in shown(at), n  # no lockout before the last try
        assert at.session_state[state.CLASS_TRIES] == n
    unlock(at, "wrong 4")  # the same key again (a click delivered twice sends it again): answered, not counted
    assert "you tried it already" in shown(at) and at.session_state[state.CLASS_TRIES] == 4 and has_key_box(at)
    unlock(at, "wrong 5")
    assert "That was this tab's last try." in shown(at)
    assert at.session_state[state.CLASS_TRIES] == broadcast.MAX_KEY_TRIES
    assert not has_key_box(at) and f"{broadcast.MAX_KEY_TRIES} wrong keys: this tab does not ask again." in shown(at)


def test_a_key_with_spaces_around_it_is_refused_not_stripped(store):
    at = panel()
    unlock(at, f" {KEY}\n")
    assert "has spaces (or a line break) before or after it" in shown(at)
    assert not teacher(at) and state.CLASS_TRIES not in at.session_state  # no try used
    unlock(at, KEY)
    assert at.session_state[state.CLASS_TEACHER] is True
    assert not broadcast.key_matches(KEY + " ") and broadcast.key_matches(KEY)


def test_a_refusal_stays_until_it_is_read(store):
    """The wrong key's (and the empty box's) message survives any number of reruns (a heartbeat's, a cookie
    script's), until its OK is pressed; a link's wrong key likewise at the top of the panel."""
    at = panel()
    unlock(at, "wrong")
    for _ in range(3):
        at.run()
        assert "That is not the teacher key" in shown(at)
    at.button(key=state.CLASS_KEY_MESSAGE_OK).click()
    at.run()
    assert "That is not the teacher key" not in shown(at)
    unlock(at, "")
    at.run()
    assert "Type the teacher key first." in shown(at)
    linked = panel({"teacher": "also wrong"})
    linked.run()
    linked.run()
    assert "That is not the teacher key" in shown(linked)
    linked.button(key=state.CLASS_MESSAGE_OK).click()
    linked.run()
    assert "That is not the teacher key" not in shown(linked)


def test_the_back_off_holds_across_sessions_and_spares_nothing_it_did_not_check(store, quick_rule, monkeypatch):
    """Two tabs from one address (AppTest: "local") use the address's two free tries; a third tab, even with the right
    key, is told to wait, and the key is not checked; once the wait is over the right key works and clears it."""
    for name in ("KEY_FIRST_WAIT_S", "KEY_WAIT_CAP_ADDRESS_S", "KEY_WAIT_CAP_CLASS_S"):
        monkeypatch.setattr(room_module, name, 5.0)  # longer than the tabs' runs take
    for n in range(2):
        unlock(panel(), f"wrong {n}")
    third = panel()
    unlock(third, KEY)
    assert "Too many wrong teacher keys lately" in shown(third) and "try again in 5 s" in shown(third)
    assert not teacher(third)
    assert state.CLASS_TRIES not in third.session_state  # not this tab's try
    monkeypatch.setattr(room_module, "KEY_FIRST_WAIT_S", 0.0)  # the wait is over
    unlock(third, KEY)
    assert third.session_state[state.CLASS_TEACHER] is True
    assert broadcast.room().claim_key_try("local") == 0  # the right key forgot the address's tries


def test_a_second_teacher_broadcasting_is_warned(store):
    """Two browsers that proved the key (two tokens) are two teachers: the second is warned at once, the first by its
    heartbeat; a reload of the first (its token, a new session) is the same teacher, not a third."""
    first = panel()
    unlock(first, KEY)
    assert "Teacher mode: students who follow" in shown(first) and "Another teacher" not in shown(first)
    second = panel()
    unlock(second, KEY)
    assert "Teacher mode. Another teacher (another browser) is broadcasting now" in shown(second)
    first.run()  # the first teacher's heartbeat says so too
    assert "Another teacher (another browser) is broadcasting now" in shown(first)
    reloaded = AppTest.from_file(PANEL, default_timeout=60)
    reloaded.session_state[state.CLASS_TOKEN] = first.session_state[state.CLASS_TOKEN]  # as its cookie gives it back
    reloaded.session_state[state.CLASS_TEACHER] = True
    reloaded.run()
    assert "Another teacher (another browser) is broadcasting now" in shown(reloaded)  # the second, not two others
