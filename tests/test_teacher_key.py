"""The teacher key against guessing, in both stores of the room and in the class panel:

- the room's back-off (``RoomStore.claim_key_try``, ``key_proved``): past its free tries an address waits, twice as
  long each time, up to a cap; the class as a whole likewise, so tries from many addresses slow down too; a right key
  forgets its address's tries; nothing is counted while a wait is on. One rule in the memory room and in Redis
  (the same test on both, as ``tests/test_classroom.py`` runs the room's rules), so it holds across replicas;
- two teacher sessions broadcasting at once are counted (``RoomStore.teaching``), and the second is warned;
- the class panel (``ui.classroom.broadcast``, an AppTest of the panel alone: no model): exactly ``MAX_KEY_TRIES``
  wrong keys per session, the same wrong key again (a click Streamlit delivered twice) costing nothing; a key with
  spaces around it refused, not stripped; the messages held until read; the back-off reaching a new session.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path

import pytest

from inference import settings
from ui.classroom import broadcast
from ui.classroom import room as room_module
from ui.classroom.room import Room

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
