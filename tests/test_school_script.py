"""``scripts/run-school.sh`` itself, as a teacher runs it: Redis, two replicas and HAProxy, supervised. Each fault of
docs/school.md's Faults table that the script answers is made here during a class (a draw round with draws, a guess
round with a guess, a broadcast and a teacher token in the room) and must leave the school answering through HAProxy
with the room intact:

- Redis stopped (SIGTERM) and Redis killed (SIGKILL): the script starts it again from its append-only file; the room
  holds the same rounds, broadcast and token, and both replicas' own room clients read the round again (they
  reconnect by themselves);
- HAProxy killed (SIGKILL): started again; a tab's websocket reconnects through it to the replica its cookie names;
- a replica killed (SIGKILL): started again on its port, reading the room;
- Ctrl-C keeps the room's data (the append-only file) for the next school; ``--drop-room`` deletes the class's room.

One school for the module, with a tiny app as its replicas (``tests/fixtures/room_replica_app.py``: its own
``RedisRoom`` client, no model), so the whole file takes seconds. Every wait is bounded (``BACK_S``). Skipped, with
the install command, where Debian's redis-server or haproxy is missing.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from inference import SamplingParams
from tests.redis_server import INSTALL_HINT as REDIS_HINT
from tests.redis_server import REDIS_SERVER, free_port
from tests.school import HAPROXY, healthy, port_free, wait_until
from tests.school import INSTALL_HINT as HAPROXY_HINT
from tests.streamlit_client import StreamlitSession
from ui.classroom.redis_room import RedisRoom
from ui.classroom.room import Experiment, RoomUnavailable

ROOT = Path(__file__).resolve().parents[1]
APP = "tests/fixtures/room_replica_app.py"
CLASS_ID = "script-test"
START_S = 60.0  # the school's start: two replicas importing the room (torch among it) on shared cores
BACK_S = 10.0  # a supervised process back, and the school answering with the room, within this
EXPERIMENT = Experiment("m", "p", False, SamplingParams())


@dataclass
class RunningSchool:
    process: subprocess.Popen
    url: str
    room_url: str
    replica_ports: list[int]
    data: Path
    log: Path

    def room(self) -> RedisRoom:
        return RedisRoom.from_url(self.room_url, CLASS_ID)

    def child(self, command: str) -> int:
        """The pid of the script's child process named ``command`` (``redis-server``, ``haproxy``)."""
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
        found = [int(pid) for pid in children if _command(int(pid)) == command]
        assert len(found) == 1, (command, [_command(int(pid)) for pid in children])
        return found[0]


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def start_school(folder: Path, *extra: str, app: str = APP, replicas: int = 2) -> RunningSchool:
    port, redis_port = free_port(), free_port()
    first = free_port()
    while not all(port_free(first + i) for i in range(1, replicas)):  # consecutive, as the script numbers them
        first = free_port()
    password = secrets.token_hex(16)
    env = {
        **os.environ,
        "SCHOOL_PYTHON": sys.executable,  # this venv as it is: no scripts/setup.sh
        "SCHOOL_REDIS_PASSWORD": password,
        "LLM_EXPLORER_CLASS_ID": CLASS_ID,
        "LLM_EXPLORER_TEACHER_KEY": "a test key",
        "TMPDIR": str(folder),  # the script's run folder (configs, logs)
    }
    log = folder / "school.log"
    args = ["--address", "127.0.0.1", "--port", str(port), "--first-port", str(first), "--redis-port", str(redis_port)]
    args += ["--replicas", str(replicas), "--data", str(folder / "data"), "--app", app]
    process = subprocess.Popen(
        ["bash", "scripts/run-school.sh", *args, *extra],
        cwd=ROOT,
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: the teardown can reach whatever it left
    )
    school = RunningSchool(
        process, f"http://127.0.0.1:{port}", f"redis://:{password}@127.0.0.1:{redis_port}/0",
        [first + i for i in range(replicas)],
        folder / "data", log,
    )  # fmt: skip
    try:
        for replica in school.replica_ports:
            wait_until(lambda r=replica: _up(school) and healthy(f"http://127.0.0.1:{r}"), START_S, "replica healthy")
        wait_until(lambda: healthy(school.url), BACK_S, "HAProxy answering")
    except BaseException:
        stop_school(school)
        raise
    return school


def _up(school: RunningSchool) -> bool:
    if school.process.poll() is not None:
        raise RuntimeError(f"run-school.sh exited ({school.process.returncode}): {school.log.read_text()[-2000:]}")
    return True


def ignores(pid: int, sig: int) -> bool:
    """Whether process ``pid`` ignores ``sig`` (its SigIgn mask): a shell cannot trap a signal it was started ignoring."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    return False


def stop_school(school: RunningSchool) -> int:
    """Ctrl-C (SIGINT to the script), as a teacher stops it; the script's exit code. Whatever is left is killed.

    A shell started with SIGINT ignored (inherited from a test worker that ignores it) cannot trap it, as a terminal's
    Ctrl-C never is: then the script gets SIGTERM, which its same trap handles (``trap 'stop_all; exit 0' INT TERM``)."""
    if school.process.poll() is None:
        ignored = ignores(school.process.pid, signal.SIGINT)
        school.process.send_signal(signal.SIGTERM if ignored else signal.SIGINT)
    try:
        return school.process.wait(timeout=30)
    finally:
        try:
            os.killpg(school.process.pid, signal.SIGKILL)  # the group this test started, if anything is left
        except ProcessLookupError:
            pass


@pytest.fixture(scope="module")
def school(tmp_path_factory):
    if REDIS_SERVER is None:
        pytest.skip(REDIS_HINT)
    if HAPROXY is None:
        pytest.skip(HAPROXY_HINT)
    built = start_school(tmp_path_factory.mktemp("school"))
    room = built.room()
    built.round_id = room.new_draw_round(EXPERIMENT)
    room.add_draws(built.round_id, "a" * 32, 0, [3, 1, 4, 1, 5])
    guess_id = room.new_guess_round(EXPERIMENT)
    room.guess(guess_id, "b" * 32, "mat")
    room.broadcast("logits", {"prompt": "The cat sat"})
    built.token = room.issue_teacher_token()
    yield built
    stop_school(built)


def room_state(room: RedisRoom) -> tuple:
    """What a class keeps in the room: the rounds (draws and guesses), the broadcast."""
    draws, guesses, shown = room.draw_round(), room.guess_round(), room.current()
    return (draws.round_id, draws.draws, guesses.round_id, guesses.guesses, shown.version, shown.page, shown.query)


def page(school: RunningSchool, replica: int | None = None) -> dict[str, str]:
    """What the tiny app shows: through HAProxy (a new tab), or on one replica's own port."""
    url = school.url if replica is None else f"http://127.0.0.1:{replica}"
    with StreamlitSession(url, timeout=BACK_S, load_page=replica is None) as tab:
        return dict(text.split("=", 1) for text in tab.open("").texts() if "=" in text)


def back(school: RunningSchool, command: str, old_pid: int) -> float:
    """Seconds until the script runs ``command`` again (a new pid)."""
    started = time.monotonic()

    def restarted() -> bool:
        _up(school)
        children = Path(f"/proc/{school.process.pid}/task/{school.process.pid}/children").read_text().split()
        return any(_command(int(pid)) == command and int(pid) != old_pid for pid in children)

    wait_until(restarted, BACK_S, f"{command} started again")
    return time.monotonic() - started


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except (redis.ConnectionError, redis.BusyLoadingError):
        return False


def _room_answers(room) -> bool:
    """The room reads its broadcast again; a new ``redis-server`` pid is not yet a listening one (it binds its port
    and loads the append-only file after the script has started it), so refusal means "not yet"."""
    try:
        return bool(room.current().version)
    except RoomUnavailable:
        return False


def serves_the_round(school: RunningSchool, replica: int | None = None) -> bool:
    shown = page(school, replica)
    return shown.get("draw") == school.round_id and shown.get("draws") == "5"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_redis_stopped_or_killed_comes_back_with_the_room(school, sig):
    room = school.room()
    before = room_state(room)
    assert all(serves_the_round(school, replica) for replica in school.replica_ports)
    pid = school.child("redis-server")
    os.kill(pid, sig)
    seconds = back(school, "redis-server", pid)
    wait_until(lambda: _room_answers(room), BACK_S, "Redis answering again")
    assert room_state(room) == before  # from the append-only file: the rounds, every draw and guess, the broadcast
    assert room.is_teacher_token(school.token)  # the teacher's reload stays the teacher's
    for replica in school.replica_ports:  # each replica's own client reconnected: its pages read the round again
        wait_until(lambda r=replica: serves_the_round(school, r), BACK_S, f"replica {replica} reading the room")
    assert serves_the_round(school)  # and through HAProxy
    print(f"\nRedis {signal.Signals(sig).name}: started again after {seconds:.1f} s, the room intact")


def test_haproxy_killed_comes_back_and_a_tab_reconnects_to_its_replica(school):
    tab = StreamlitSession(school.url, timeout=BACK_S, load_page=True)
    try:
        tab.open("")
        replica = tab.cookies["SERVERID"]
        pid = school.child("haproxy")
        killed = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        back(school, "haproxy", pid)
        shown = dict(text.split("=", 1) for text in tab.reconnect(within_s=BACK_S).texts() if "=" in text)
        seconds = time.monotonic() - killed
    finally:
        tab.close()
    assert tab.cookies["SERVERID"] == replica  # the same replica, through the new HAProxy
    assert shown["replica"] == str(school.replica_ports[int(replica[1:]) - 1])
    assert shown["draw"] == school.round_id and shown["draws"] == "5"
    assert seconds < BACK_S
    print(f"\nHAProxy SIGKILL: the tab back on {replica} after {seconds:.1f} s")


def test_a_killed_replica_is_started_again(school):
    port = school.replica_ports[1]
    children = Path(f"/proc/{school.process.pid}/task/{school.process.pid}/children").read_text().split()
    (pid,) = [int(c) for c in children if f"--server.port\0{port}\0" in _cmdline(int(c))]
    killed = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: _up(school) and _answering(school, port), BACK_S, f"replica {port} back")
    print(f"\nreplica SIGKILL: serving the room again on its port after {time.monotonic() - killed:.1f} s")


def _answering(school: RunningSchool, port: int) -> bool:
    try:
        return serves_the_round(school, port)
    except Exception:  # noqa: BLE001  (starting: its socket refuses or closes while Streamlit comes up)
        return False


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return ""


def test_ctrl_c_keeps_the_room_for_the_next_school_and_drop_room_deletes_it(school, tmp_path):
    """The module's school stopped with Ctrl-C: the next school on the same data finds the class's round (a smaller
    one: one replica of the proxy test's app, no room client); that one stopped with ``--drop-room`` leaves no key
    of the class in the append-only file (read back by a bare ``redis-server``)."""
    assert stop_school(school) == 0
    assert (school.data / "appendonlydir").is_dir()
    folder = school.data.parent
    second = start_school(folder, "--drop-room", app="tests/fixtures/replica_app.py", replicas=1)
    try:
        assert second.room().rounds().draw_id == school.round_id  # the class's results, kept
    finally:
        assert stop_school(second) == 0
    assert "dropped class 'script-test'" in second.log.read_text()
    port = free_port()
    bare = subprocess.Popen(
        [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(school.data), "--appendonly", "yes",
         "--save", ""],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        client = redis.Redis(port=port, socket_timeout=2)
        wait_until(lambda: _answers(client), BACK_S, "the bare redis-server answering")
        assert list(client.scan_iter(match=f"llmx:{{{CLASS_ID}}}:*")) == []
    finally:
        bare.terminate()
        bare.wait(timeout=10)
