"""A school on loopback for the tests: HAProxy, from the config ``scripts/run-school.sh --haproxy-config`` prints, in
front of replicas of a Streamlit app (two unless told) on consecutive free ports, each with its own log.

Used by ``tests/test_school_proxy.py`` (a tiny app, no model) and ``tests/test_school_app.py`` (two replicas of the
real ``app.py`` sharing one Redis room). A replica can be killed (SIGKILL) and started again on its port; HAProxy
takes it back after one good health check. Without Debian's ``haproxy`` it raises ``MissingBinary``, which a
test turns into a skip with the install command (``tests.redis_server`` skips likewise for ``redis-server``).
Also used by ``scripts/bench_load.py --replicas N``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.redis_server import free_port

ROOT = Path(__file__).resolve().parents[1]
HAPROXY = shutil.which("haproxy") or next((p for p in ("/usr/sbin/haproxy",) if Path(p).exists()), None)
INSTALL_HINT = "Debian haproxy is not installed (apt-get install haproxy)"
HEALTH_CHECK_S = 2.5  # HAProxy checks every 2 s ("inter 2s"): one check after a replica is healthy takes it in


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


def port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


class MissingBinary(RuntimeError):
    """A Debian package the school needs is not installed (the message says which, and how to install it)."""


class School:
    """``replicas`` replicas (``r1``, ``r2``, …) of ``app`` with ``env``, HAProxy in front, ``per_replica`` connections
    each."""

    def __init__(
        self,
        folder: Path,
        app: Path,
        per_replica: int = 20,
        env: dict[str, str] | None = None,
        startup_s: float = 60,
        replicas: int = 2,
    ) -> None:
        if HAPROXY is None:
            raise MissingBinary(INSTALL_HINT)
        self.folder, self.app, self.env, self.startup_s = folder, app, dict(env or {}), startup_s
        self.port, first = free_port(), free_port()
        while not all(port_free(first + i) for i in range(1, replicas)):  # consecutive, as run-school.sh numbers them
            first = free_port()
        self.ports = {f"r{i + 1}": first + i for i in range(replicas)}
        self.replicas: dict[str, subprocess.Popen] = {}
        self._logs: dict[str, object] = {}
        config = subprocess.run(
            ["bash", "scripts/run-school.sh", "--address", "127.0.0.1", "--replicas", str(replicas), "--port",
             str(self.port), "--first-port", str(first), "--per-replica", str(per_replica), "--haproxy-config"],
            cwd=ROOT, check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        (folder / "haproxy.cfg").write_text(config)
        self.url = f"http://127.0.0.1:{self.port}"
        try:
            for name in self.ports:
                self.start(name)
            self.haproxy = subprocess.Popen(
                [HAPROXY, "-db", "-f", str(folder / "haproxy.cfg")],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for name in self.ports:
                self.wait_healthy(name)
            time.sleep(HEALTH_CHECK_S)  # HAProxy's first health checks take them in
        except BaseException:
            self.stop()
            raise

    def replica_url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}"

    def start(self, name: str) -> None:
        """Start replica ``name`` on its port (again, after a kill); ``wait_healthy`` waits for it."""
        log = open(self.folder / f"{name}.log", "a")
        self._logs[name] = log
        self.replicas[name] = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(self.app), "--server.port", str(self.ports[name]),
             "--server.address", "127.0.0.1", "--server.headless", "true", "--server.fileWatcherType", "none",
             "--browser.gatherUsageStats", "false"],
            cwd=ROOT, env={**os.environ, "REPLICA": name, **self.env}, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def wait_healthy(self, name: str) -> None:
        process = self.replicas[name]

        def up() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"replica {name} exited with code {process.returncode} (log: {self.log(name)})")
            return healthy(self.replica_url(name))

        wait_until(up, self.startup_s, f"replica {name} not healthy")

    def log(self, name: str) -> Path:
        return self.folder / f"{name}.log"

    def rss_mib(self, name: str) -> float:
        """Replica ``name``'s resident memory with its child processes (a process engine server), in MiB."""
        from tests.load_scenario import _process_tree, _rss_kib

        return sum(_rss_kib(pid) for pid in _process_tree(self.replicas[name].pid)) / 1024

    def kill(self, name: str) -> None:
        self.replicas[name].send_signal(signal.SIGKILL)
        self.replicas[name].wait(timeout=10)

    def stop(self) -> None:
        for process in [*self.replicas.values(), getattr(self, "haproxy", None)]:
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(timeout=10)
        for log in self._logs.values():
            log.close()
