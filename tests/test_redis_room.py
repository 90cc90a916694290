"""What only a shared room does: the Redis room (``ui.classroom.redis_room``) seen by two replicas at once, on a
real ``redis-server`` (``tests/redis_server.py``; skipped, with the install command, where it is missing).

- a draw counts exactly once whichever replica receives it, also when both receive it at the same moment; a
  resend adds nothing; the pooled counts are the sum of the students' own streams on both replicas;
- a guess that arrives after the reveal is refused, whichever replica has it;
- teacher tokens: valid on every replica, stored hashed, expiring, revoked everywhere;
- who follows, by Redis' clock; classes that share one Redis never see each other;
- corrupt data read back is no round (no broadcast), never an exception, and a new round replaces it;
- Redis out of reach raises ``RoomUnavailable`` (nothing counted); stopped and started, the room carries on;
- the app: while Redis is down the class panel says it is paused and every page works; back, the class follows.

The room's ordinary rules run against both stores in ``tests/test_classroom.py``.
"""

from __future__ import annotations

import secrets
import threading

import pytest

from inference import SamplingParams, settings
from tests.redis_server import RedisServer, free_port
from ui.classroom import room as room_module
from ui.classroom import settings as class_settings
from ui.classroom.room import MAX_STUDENTS, Experiment, RoomError, RoomUnavailable

redis_room = pytest.importorskip("ui.classroom.redis_room")
RedisRoom = redis_room.RedisRoom
EXPERIMENT = Experiment("m", "The cat sat on the", False, SamplingParams(temperature=0.8))


@pytest.fixture
def replicas(redis_server):
    """Two replicas' rooms of one fresh class: two clients (two connection pools) on one Redis."""
    class_id = "t" + secrets.token_hex(6)
    return RedisRoom.from_url(redis_server.url, class_id), RedisRoom.from_url(redis_server.url, class_id)


def at_once(calls) -> list:
    """Run ``calls`` in threads released together; their results (or exceptions) in order."""
    barrier, results = threading.Barrier(len(calls)), [None] * len(calls)

    def run(i, call):
        barrier.wait()
        try:
            results[i] = call()
        except Exception as error:  # noqa: BLE001  (the test reads what each call raised)
            results[i] = error

    threads = [threading.Thread(target=run, args=(i, call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results


def test_the_same_press_on_two_replicas_at_once_counts_once(replicas):
    a, b = replicas
    round_id = a.new_draw_round(EXPERIMENT)
    tokens = list(range(100, 110))
    added = at_once([lambda room=room: room.add_draws(round_id, "s", 0, tokens) for room in (a, b) * 4])
    assert sorted(added) == [0] * 7 + [10]  # eight deliveries of one press, on two replicas: counted once
    assert a.draw_round().draws == b.draw_round().draws == {"s": tokens}


def test_three_students_on_each_replica_pool_exactly_their_own_streams(replicas):
    a, b = replicas
    round_id = b.new_draw_round(EXPERIMENT)
    students = {f"{side}{i}": room for side, room in (("a", a), ("b", b)) for i in range(3)}

    def press(student, room, k):  # each student's k-th press of ten: its own stream's draws 10k .. 10k + 9
        stream = [hash((student, n)) % 50 for n in range(10 * k, 10 * k + 10)]
        return room.add_draws(round_id, student, 10 * k, stream)

    for k in range(3):  # three presses each, every student's press at the same moment as the others'
        assert at_once([lambda s=s, r=r, k=k: press(s, r, k) for s, r in students.items()]) == [10] * 6
    for student, room in students.items():  # a resend, on the other replica: nothing added
        other = b if room is a else a
        assert other.add_draws(round_id, student, 20, [hash((student, n)) % 50 for n in range(20, 30)]) == 0
    seen_a, seen_b = a.draw_round(), b.draw_round()
    assert seen_a.draws == seen_b.draws and seen_a.counts() == seen_b.counts()
    assert {s: len(t) for s, t in seen_a.draws.items()} == dict.fromkeys(students, 30)
    from collections import Counter

    assert seen_a.counts() == sum((Counter(t) for t in seen_a.draws.values()), Counter())  # the pooled hash
    assert seen_a.pooled is not None and sum(seen_a.pooled.values()) == 180
    assert a.draws_of(round_id, "a0") == b.draws_of(round_id, "a0") == 30


def test_a_round_is_full_at_max_students(replicas, monkeypatch):
    a, b = replicas
    monkeypatch.setattr(redis_room, "MAX_STUDENTS", 2)
    round_id = a.new_draw_round(EXPERIMENT)
    assert a.add_draws(round_id, "x", 0, [1]) == 1 and b.add_draws(round_id, "y", 0, [2]) == 1
    with pytest.raises(RoomError, match="already has 2 students"):
        a.add_draws(round_id, "z", 0, [3])
    assert MAX_STUDENTS == 500  # the room's own limit, unchanged


def test_a_guess_after_the_reveal_is_refused_on_every_replica(replicas):
    a, b = replicas
    round_id = a.new_guess_round(EXPERIMENT)
    calls = [lambda i=i: b.guess(round_id, f"s{i}", "mat") for i in range(12)] + [lambda: a.reveal(round_id)]
    results = at_once(calls)
    accepted = {f"s{i}" for i, result in enumerate(results[:-1]) if result is None}
    refused = [result for result in results[:-1] if result is not None]
    assert all(isinstance(error, RoomError) and "closed" in str(error) for error in refused)
    assert set(a.guess_round().guesses) == accepted  # stored exactly when accepted: nothing after the reveal
    for room in (a, b):
        with pytest.raises(RoomError, match="closed"):
            room.guess(round_id, "late", "rug")
    assert a.rounds().revealed and b.guess_round().revealed


def test_teacher_tokens_are_shared_hashed_expiring_and_revoked_everywhere(replicas, redis_server):
    a, b = replicas
    token = a.issue_teacher_token()
    assert b.is_teacher_token(token) and not b.is_teacher_token(secrets.token_hex(16))
    client = redis_server.client()
    keys = client.keys(a.prefix + "*")
    stored = client.zrange(a.key("teachers"), 0, -1)
    assert keys == [a.key("teachers").encode()] and len(stored) == 1 and token.encode() not in stored[0]  # hashed
    ttl = client.ttl(keys[0])  # the set goes a school day after its last use
    assert 0 < ttl <= redis_room.TEACHER_TOKEN_TTL_S
    b.revoke_teacher_token(token)
    assert not a.is_teacher_token(token)
    other = b.issue_teacher_token()
    now_s, now_us = client.time()
    (member,) = client.zrange(a.key("teachers"), 0, -1)
    client.zadd(a.key("teachers"), {member: now_s + now_us / 1e6 - redis_room.TEACHER_TOKEN_TTL_S - 1})  # time's up
    assert not a.is_teacher_token(other) and client.zcard(a.key("teachers")) == 0  # and dropped
    client.set(a.key("teachers"), "junk")  # corrupt: no token is known, the next one repairs it
    assert not a.is_teacher_token(other)
    assert a.is_teacher_token(b.issue_teacher_token())


def test_followers_are_counted_by_redis_clock_and_classes_stay_apart(replicas, redis_server):
    a, b = replicas
    a.seen("s1")
    b.seen("s2")
    b.seen("s1")  # the same student polling another replica: one follower
    assert a.followers(5) == b.followers(5) == 2
    now_s, now_us = redis_server.client().time()
    redis_server.client().zadd(a.key("seen"), {"s1": now_s + now_us / 1e6 - 10})  # s1 last polled 10 s ago
    assert b.followers(5) == 1
    other = RedisRoom.from_url(redis_server.url, "t" + secrets.token_hex(6))  # another class on the same Redis
    a.broadcast("logits", {"prompt": "a"})
    assert other.current().version == 0 and other.followers(5) == 0 and other.rounds().draw_id is None


@pytest.mark.parametrize(
    "damage",
    [
        lambda c, k: c.set(k("draw"), "not a hash"),
        lambda c, k: c.hset(k("draw"), "experiment", "{not json"),
        lambda c, k: c.hset(k("draw"), "number", "many"),
        lambda c, k: c.hset(k("draw"), "experiment", '{"model": "m", "prompt": "p", "chat": false, '
                                                      '"params": {"temperature": -1}}'),
        lambda c, k: c.hset(k("draw:lens"), "s", "7"),  # a count that is not the stream's length
        lambda c, k: c.hset(k("draw:streams"), "s", "1,x,3"),
        lambda c, k: c.hset(k("draw:counts"), "99", "1"),  # pooled counts that are not the streams' sum
        lambda c, k: c.hset(k("draw"), "id", b"\xff\xfe"),
    ],
)  # fmt: skip
def test_a_corrupt_draw_round_is_no_round(replicas, redis_server, damage):
    a, b = replicas
    round_id = a.new_draw_round(EXPERIMENT)
    a.add_draws(round_id, "s", 0, [1, 2, 3])
    damage(redis_server.client(), a.key)
    rnd = b.draw_round()
    assert rnd is None
    view = b.draw_view("s")  # the class page's poll reads no streams: no round, or the counts as they were
    assert view is None or (view.pooled == {1: 1, 2: 1, 3: 1} and view.mine == 3)
    rounds = b.rounds()  # a page that shows no round records what rounds() says: both never raise
    assert rounds.draw_id in (None, round_id)
    assert b.draws_of(round_id, "s") in (0, 3, 7)
    started = b.new_draw_round(EXPERIMENT, replacing=rounds.draw_id)  # the teacher's press, from a page showing that
    assert started != round_id
    assert a.draw_round().round_id == started and a.draw_round().draws == {}


def test_a_corrupt_broadcast_or_guess_round_is_none(replicas, redis_server):
    a, b = replicas
    client = redis_server.client()
    a.broadcast("logits", {"prompt": "a"})
    client.hset(a.key("broadcast"), "query", "[1, 2]")
    assert b.current().version == 0  # read as "no broadcast yet"
    client.set(a.key("broadcast"), "junk")
    assert b.current().version == 0 and b.broadcast("logits", {"prompt": "b"}) == 1  # the next broadcast repairs it
    round_id = a.new_guess_round(EXPERIMENT)
    client.hset(a.key("guess"), "experiment", '{"model": 3}')
    assert b.guess_round() is None and b.rounds().guess_id is None
    with pytest.raises(RoomError, match="over"):  # the guess script refuses a round it cannot name
        b.guess("0" * 12, "s", "mat")
    client.set(a.key("seen"), "junk")
    assert b.heartbeat(None, 5).followers == 0  # a teacher's tick reads it as nobody, and writes nothing
    b.seen("s")  # repaired
    assert b.followers(5) == 1 and round_id
    client.set(a.key("seen"), "junk")
    assert b.heartbeat("s", 5).followers == 1  # a follower's tick repairs it too
    for key in ("draw", "guess", "broadcast"):
        client.set(a.key(key), "junk")
    assert b.heartbeat("s", 5) == room_module.Beat(room_module.Rounds(None, None, False), b.current(), 1)
    assert b.current().version == 0


def test_an_unreachable_room_says_so_and_keeps_the_password(redis_server):
    dead = RedisRoom.from_url(f"redis://:hunter2@127.0.0.1:{free_port()}/0", "x")
    for call in (
        dead.current,
        dead.rounds,
        dead.draw_round,
        lambda: dead.add_draws("ab", "s", 0, [1]),
        lambda: dead.guess("ab", "s", "mat"),
        dead.issue_teacher_token,
        lambda: dead.seen("s"),
    ):
        with pytest.raises(RoomUnavailable, match="cannot be reached") as raised:
            call()
        assert "hunter2" not in str(raised.value) and "127.0.0.1" in str(raised.value)
    wrong = RedisRoom.from_url(f"redis://:wrong@127.0.0.1:{redis_server.port}/0", "x")
    with pytest.raises(RoomUnavailable, match="password"):
        wrong.current()


def test_redis_stopped_and_started_the_room_carries_on(tmp_path):
    server = RedisServer(tmp_path, persist=True)
    server.start()
    try:
        a, b = RedisRoom.from_url(server.url, "c"), RedisRoom.from_url(server.url, "c")
        round_id = a.new_draw_round(EXPERIMENT)
        assert a.add_draws(round_id, "s", 0, [1, 2]) == 2
        token = a.issue_teacher_token()
        server.stop()
        with pytest.raises(RoomUnavailable):
            b.add_draws(round_id, "s", 2, [3, 4])  # pressed during the outage: refused
        with pytest.raises(RoomUnavailable):
            b.guess(round_id, "s", "mat")
        server.start()  # the same port and password; the append-only file brings the room back
        assert b.draw_round().draws == {"s": [1, 2]}  # nothing half counted, nothing lost
        assert b.add_draws(round_id, "s", 2, [3, 4]) == 2 and a.draws_of(round_id, "s") == 4
        assert b.is_teacher_token(token)  # the teacher's reload after the restart needs no key
    finally:
        server.stop()


# ---- the app on a room that goes away and comes back --------------------------------------------------------------
@pytest.mark.real_model
def test_the_app_pauses_the_class_panel_while_redis_is_down_and_follows_when_back(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from tests.apptest_utils import APP, assert_clean
    from ui.class_page import broadcast
    from ui.common import state

    server = RedisServer(tmp_path, persist=True)
    server.start()
    monkeypatch.setenv(broadcast.TEACHER_KEY_ENV, "correct horse")
    monkeypatch.setenv(settings.PREFIX + "ROOM", server.url)
    broadcast.room.clear()
    try:

        def tab() -> AppTest:
            at = AppTest.from_file(APP, default_timeout=120)
            at.run()
            assert_clean(at)
            return at

        teacher, student = tab(), tab()
        teacher.text_input(key="_w_class_key").input("correct horse")
        teacher.button(key="class_unlock").click()
        teacher.run()
        teacher.switch_page("pages/class.py")
        teacher.run()
        teacher.button(key="class_new_draws").click()
        teacher.run()
        student.run()
        assert student.session_state["_page"] == "class" and "class_draw" in [b.key for b in student.button]

        server.stop()
        student.button(key="class_draw").click()  # pressed during the outage
        student.run()
        assert_clean(student)
        warnings = " ".join(w.value for w in student.warning)
        assert "The class panel is paused" in warnings and "cannot be reached" in warnings
        assert any("Your press was not counted" in e.value for e in student.error)
        for page in ("pages/tokenization.py", "pages/logits.py"):  # every other page keeps working
            student.switch_page(page)
            student.run()
            assert_clean(student)
            assert "The class panel is paused" in " ".join(w.value for w in student.sidebar.warning)
        teacher.switch_page("pages/attention.py")
        teacher.run()  # the teacher's broadcast cannot go out: said, no traceback
        assert_clean(teacher)
        assert state.CLASS_PAUSED in teacher.session_state

        server.start()
        teacher.run()  # what the teacher's heartbeat does when the room answers: rerun, and publish
        student.run()  # the follower's poll sees the new version
        assert_clean(student)
        assert student.session_state["_page"] == "attention"
        assert not any("paused" in w.value for w in student.warning)
        rnd = broadcast.room().draw_round()
        assert rnd is not None and rnd.draws == {}  # the outage's press counted nothing; the round is still there

        server.stop()  # the teacher leaves teacher mode while Redis is down: said, and owed to the room
        teacher.button(key=state.CLASS_LEAVE).click()
        teacher.run()
        assert_clean(teacher)
        assert any("You left teacher mode" in w.value for w in teacher.sidebar.warning)
        server.start()
        assert broadcast.room().current().live  # the room could not be told yet
        teacher.run()  # the heartbeat's rerun when the room answers
        assert not broadcast.room().current().live  # followers are now told the teacher stopped broadcasting
    finally:
        broadcast.room.clear()
        server.stop()


# ---- replicas that differ do not join --------------------------------------------------------------------------------
def test_a_replica_whose_fingerprint_differs_refuses_to_join(redis_server):
    from ui.classroom.fingerprint import differences

    class_id = "t" + secrets.token_hex(6)
    ours = {"code": "c1", "models": {"SmolLM2-135M-Instruct": "aa"}, "weights": "gguf", "teacher key": "k"}
    first = RedisRoom.from_url(redis_server.url, class_id, lambda: ours)
    same = RedisRoom.from_url(redis_server.url, class_id, lambda: dict(ours))
    other = RedisRoom.from_url(
        redis_server.url, class_id, lambda: {**ours, "weights": "none", "models": {"SmolLM2-135M-Instruct": "bb"}}
    )
    assert first.broadcast("logits", {"prompt": "a"}) == 1  # the first replica writes the class's fingerprint
    assert same.current().version == 1  # the same fingerprint joins
    with pytest.raises(redis_room.ReplicaRefused) as refused:
        other.current()
    message = str(refused.value)
    assert "the model SmolLM2-135M-Instruct's checksum" in message and "the weights" in message
    assert "the code" not in message and "the teacher key" not in message
    with pytest.raises(redis_room.ReplicaRefused):  # and it stays out: nothing it sends reaches the room
        other.broadcast("sampling", {"prompt": "forged"})
    assert first.current().page == "logits"
    assert isinstance(refused.value, RoomUnavailable)  # the app shows it as the paused class panel, with this message
    assert differences(ours, ours) == []


@pytest.mark.real_model
def test_the_fingerprint_names_the_real_models_checksum_and_hides_the_key(monkeypatch):
    import hashlib

    from inference import gguf_source
    from ui.classroom.fingerprint import replica_fingerprint

    monkeypatch.setenv("LLM_EXPLORER_TEACHER_KEY", "correct horse")
    monkeypatch.setenv("LLM_EXPLORER_QUANT", "gguf")
    settings.reload()
    class_settings.reload()
    found = replica_fingerprint({"SmolLM2-135M-Instruct": None})
    with open(gguf_source(None), "rb") as handle:
        assert found["models"] == {"SmolLM2-135M-Instruct": hashlib.file_digest(handle, "sha256").hexdigest()}
    assert found["weights"] == "gguf" and found["class"] == "class" and len(found["code"]) == 64
    assert "correct horse" not in str(found) and found["teacher key"] != "none"
    monkeypatch.setenv("LLM_EXPLORER_TEACHER_KEY", "another key")
    settings.reload()
    class_settings.reload()
    assert replica_fingerprint({"SmolLM2-135M-Instruct": None})["teacher key"] != found["teacher key"]


def test_a_full_redis_refuses_writes_and_says_so(tmp_path):
    """``maxmemory`` with ``noeviction``: a full Redis refuses a change (the panel says "full"); reads go on."""
    server = RedisServer(tmp_path)
    server.start()
    try:
        room = RedisRoom.from_url(server.url, "c")
        round_id = room.new_draw_round(EXPERIMENT)
        token = room.issue_teacher_token()
        client = server.client()
        client.set("ballast", b"x" * 4_000_000)
        client.config_set("maxmemory", "2mb")
        with pytest.raises(RoomUnavailable, match="is full"):
            room.add_draws(round_id, "s", 0, [1, 2])
        assert room.is_teacher_token(token)  # a teacher's reload still works: a check grows nothing
        with pytest.raises(RoomUnavailable, match="is full"):
            room.issue_teacher_token()
        assert room.draw_round().draws == {}  # nothing half counted; the round still reads
        client.delete("ballast")
        client.config_set("maxmemory", "64mb")  # room again
        assert room.add_draws(round_id, "s", 0, [1, 2]) == 2
    finally:
        server.stop()


def test_a_press_on_unreadable_data_is_refused_before_any_write(replicas, redis_server):
    """A script's writes before an error would stay: every check comes first, so a refused press wrote nothing."""
    a, _ = replicas
    client = redis_server.client()
    round_id = a.new_draw_round(EXPERIMENT)
    a.add_draws(round_id, "s", 0, [1, 2])
    client.hset(a.key("draw:counts"), "3", "x")  # the third token's pooled count is unreadable
    before = {key: client.dump(key) for key in client.keys(a.prefix + "draw*")}
    with pytest.raises(RoomError, match="cannot be read back"):
        a.add_draws(round_id, "s", 2, [1, 3])  # token 1 would be counted before token 3's count fails
    assert {key: client.dump(key) for key in client.keys(a.prefix + "draw*")} == before
    client.set(a.key("guess:guesses"), "junk")
    guess_round = a.new_guess_round(EXPERIMENT)  # replaces the corrupt guesses
    client.set(a.key("guess:guesses"), "junk")
    with pytest.raises(RoomError, match="cannot be read back"):
        a.guess(guess_round, "s", "mat")


def test_a_fingerprint_that_cannot_be_computed_pauses_the_class(redis_server):
    def unreadable() -> dict:
        raise FileNotFoundError("/models/gone.gguf")

    room = RedisRoom.from_url(redis_server.url, "t" + secrets.token_hex(6), unreadable)
    with pytest.raises(RoomUnavailable, match="fingerprint cannot be computed"):
        room.current()


@pytest.mark.real_model
def test_the_app_shows_a_corrupt_round_as_no_round(redis_server, monkeypatch):
    """Data the room cannot read back, under open pages: no traceback, "no round", and the next round works."""
    from streamlit.testing.v1 import AppTest

    from tests.apptest_utils import APP, assert_clean
    from ui.class_page import broadcast

    monkeypatch.setenv(broadcast.TEACHER_KEY_ENV, "correct horse")
    monkeypatch.setenv(settings.PREFIX + "ROOM", redis_server.url)
    monkeypatch.setenv(settings.PREFIX + "CLASS_ID", "t" + secrets.token_hex(6))
    broadcast.room.clear()
    try:
        teacher, student = (AppTest.from_file(APP, default_timeout=120) for _ in range(2))
        teacher.run()
        teacher.text_input(key="_w_class_key").input("correct horse")
        teacher.button(key="class_unlock").click()
        teacher.run()
        teacher.switch_page("pages/class.py")
        teacher.run()
        for button in ("class_new_draws", "class_new_guesses"):
            teacher.button(key=button).click()
            teacher.run()
        student.run()  # follows the teacher onto the Class page
        student.run()  # the heartbeat's next run there (AppTest shows the fragments' widgets from it)
        assert "class_draw" in [b.key for b in student.button]
        client, room = redis_server.client(), broadcast.room()
        client.hset(room.key("draw"), "experiment", "{broken")
        client.set(room.key("guess:guesses"), "junk")
        for tab in (student, teacher):
            tab.run()
            assert_clean(tab)
            infos = " ".join(i.value for i in tab.info)
            assert "No class draw yet" in infos and "No guess round yet" in infos
        teacher.button(key="class_new_draws").click()  # the teacher's next round replaces the broken one
        teacher.run()
        student.run()  # the heartbeat sees the new round: the page reruns
        student.run()
        assert_clean(student)
        assert "class_draw" in [b.key for b in student.button]
    finally:
        broadcast.room.clear()
