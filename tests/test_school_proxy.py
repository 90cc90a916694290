"""HAProxy in front of two replicas, with the config ``scripts/run-school.sh`` generates (``--haproxy-config``), on
loopback: what the proxy itself promises a school, checked with the websocket client (``tests/streamlit_client.py``)
and its cookies and reconnect. The replicas are a tiny Streamlit app (``tests/fixtures/replica_app.py``: which
replica, which cookies, how many runs), so no model loads; the two-replica tests of the real app are not here yet.

- a tab's first ``GET /`` gets HAProxy's ``SERVERID`` cookie, and its websocket reaches that replica, with the
  app's own cookies (the student's id); the next tab goes to the other replica (``balance leastconn``);
- a replica killed (SIGKILL): its tab reconnects through HAProxy to the other one within 10 s, the same student;
- a full school (every replica at its ``maxconn``): HAProxy's own 503 after its 5 s queue, not a hang.

Skipped, with the install command, where Debian's ``haproxy`` is missing.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.redis_server import free_port
from tests.streamlit_client import StreamlitSession

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "tests" / "fixtures" / "replica_app.py"
HAPROXY = shutil.which("haproxy") or next((p for p in ("/usr/sbin/haproxy",) if Path(p).exists()), None)
STUDENT = "c0ffee" * 5 + "00"


def wait_until(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{what} within {timeout:.0f} s")


def healthy(url: str) -> bool:
    with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as response:
        return response.status == 200


class School:
    """Two tiny replicas on consecutive free ports and HAProxy from run-school.sh's config, per-replica ``maxconn``."""

    def __init__(self, folder: Path, per_replica: int) -> None:
        if HAPROXY is None:
            pytest.skip("Debian haproxy is not installed (apt-get install haproxy)")
        self.folder, self.port, self.first = folder, free_port(), free_port()
        while not _port_free(self.first + 1):  # the replicas' ports are consecutive, as run-school.sh numbers them
            self.first = free_port()
        self.replicas: dict[str, subprocess.Popen] = {}
        config = subprocess.run(
            ["bash", "scripts/run-school.sh", "--replicas", "2", "--port", str(self.port), "--first-port",
             str(self.first), "--per-replica", str(per_replica), "--haproxy-config"],
            cwd=ROOT, check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        (folder / "haproxy.cfg").write_text(config)
        for name, port in (("r1", self.first), ("r2", self.first + 1)):
            self.replicas[name] = subprocess.Popen(
                [sys.executable, "-m", "streamlit", "run", str(APP), "--server.port", str(port),
                 "--server.address", "127.0.0.1", "--server.headless", "true", "--server.fileWatcherType", "none",
                 "--browser.gatherUsageStats", "false"],
                cwd=ROOT, env={**os.environ, "REPLICA": name}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        self.haproxy = subprocess.Popen(
            [HAPROXY, "-db", "-f", str(folder / "haproxy.cfg")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.url = f"http://127.0.0.1:{self.port}"
        for port in (self.first, self.first + 1):
            wait_until(lambda port=port: healthy(f"http://127.0.0.1:{port}"), 60, f"replica on {port} not healthy")
        time.sleep(2.5)  # HAProxy's first health checks (every 2 s) take both in

    def kill(self, name: str) -> None:
        self.replicas[name].send_signal(signal.SIGKILL)
        self.replicas[name].wait(timeout=10)

    def stop(self) -> None:
        for process in [*self.replicas.values(), self.haproxy]:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


@pytest.fixture
def school(tmp_path, request):
    built = School(tmp_path, per_replica=getattr(request, "param", 20))
    yield built
    built.stop()


def shown(session: StreamlitSession) -> dict[str, str]:
    """What the tiny app drew: replica, student, runs."""
    return dict(text.split("=", 1) for text in session.last.texts() if "=" in text)


def test_a_tab_sticks_to_its_replica_and_a_killed_replicas_tab_reconnects_to_the_other(school):
    first = StreamlitSession(school.url, timeout=30, cookies={"llmx_student": STUDENT}, load_page=True)
    first.open("")
    where = shown(first)
    assert first.cookies["SERVERID"] == where["replica"] and where["student"] == STUDENT
    second = StreamlitSession(school.url, timeout=30, load_page=True)
    second.open("")
    assert shown(second)["replica"] != where["replica"]  # leastconn: the next tab goes to the other replica
    for _ in range(3):  # the same tab's reruns stay on its replica and its session
        first.open("")
    assert shown(first)["replica"] == where["replica"] and shown(first)["runs"] == "4"

    started = time.monotonic()
    school.kill(where["replica"])
    first.reconnect(within_s=10)
    back = shown(first)
    assert time.monotonic() - started < 10
    assert back["replica"] != where["replica"] and back["student"] == STUDENT  # same student, the other replica
    assert first.cookies["SERVERID"] == back["replica"] and back["runs"] == "1"  # a new session there
    first.close()
    second.close()


@pytest.mark.parametrize("school", [1], indirect=True)
def test_a_full_school_gets_haproxys_503_not_a_hang(school):
    tabs = [StreamlitSession(school.url, timeout=30, load_page=True) for _ in range(2)]  # one websocket each
    for tab in tabs:
        tab.open("")
    assert {shown(tab)["replica"] for tab in tabs} == {"r1", "r2"}
    started = time.monotonic()
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(school.url + "/", timeout=30)
    waited = time.monotonic() - started
    assert refused.value.code == 503 and 4 <= waited < 10, waited  # the 5 s queue, then HAProxy's own page
    for tab in tabs:
        tab.close()
