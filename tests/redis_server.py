"""A real ``redis-server`` (Debian's package) for the tests: loopback only, a password, no persistence
(``--save ''``; an append-only file only where a test stops and starts it: ``persist``), ``maxmemory`` with ``noeviction`` (a full room refuses writes, it never drops a round),
on a free port; stopped and started again on the same port for the outage tests.

Tests that need it skip, with the install command, where the binary is missing (as the browser tests do for
chromium); the test command installs it in CI (``scripts/setup.sh --dev``).
"""

from __future__ import annotations

import secrets
import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis

REDIS_SERVER = shutil.which("redis-server") or (
    "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None
)
INSTALL_HINT = "Debian redis-server is not installed (apt-get install redis-server)"
MAXMEMORY = "64mb"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class RedisServer:
    """One ``redis-server`` process on 127.0.0.1:``port`` with ``password``; ``stop()`` and ``start()`` again."""

    def __init__(self, folder: Path, persist: bool = False) -> None:
        if REDIS_SERVER is None:
            import pytest  # only the tests start one without checking first (scripts/bench_load.py checks)

            pytest.skip(INSTALL_HINT)
        self.folder = folder
        self.port = free_port()
        self.password = secrets.token_hex(16)
        self.persist = persist  # an append-only file, so a stop and start keeps the room (as docs/school.md runs it)
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = [
            REDIS_SERVER,
            "--bind", "127.0.0.1",
            "--port", str(self.port),
            "--requirepass", self.password,
            "--save", "",
            "--appendonly", "yes" if self.persist else "no",
            "--maxmemory", MAXMEMORY,
            "--maxmemory-policy", "noeviction",
            "--dir", str(self.folder),
        ]  # fmt: skip
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if self.client().ping():
                    return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server did not answer on port {self.port} within 10 s")

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, socket_timeout=2)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None
