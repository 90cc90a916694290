"""Fresh ``streamlit run app.py`` servers forked from one process that has imported the third-party libraries once.

A new server's Python start and its imports of torch, transformers' tokenizer (with the config classes it imports to
read a model's folder), plotly and Streamlit's CLI cost ~3.5 s of CPU each; the browser tests start about twenty
servers. ``Forker`` imports them once, in a process of its own, and forks a server from it on request: each child
sets up its own session, log, folder and environment and then runs Streamlit's ``main`` as ``streamlit run`` does.
What makes a server fresh is Streamlit's state, and that is the child's own: it has served nothing, and the app's
modules are first imported by its first request.

Forking is safe here because the forker never runs torch (no thread pool exists yet; torch's import leaves one
native helper thread, as in any ``DataLoader`` parent) and starts no Python thread. A child is a child of the
forker, not of the test: ``ForkedProcess`` answers ``poll``, ``kill`` and ``wait`` for it by its pid.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

FORKER = r"""
import json, os, signal, sys, traceback
import torch, plotly.graph_objects, transformers
transformers.AutoTokenizer
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
CONFIG_MAPPING["llama"], CONFIG_MAPPING["gemma3_text"]  # what AutoTokenizer imports to read a model's config
from streamlit.web.cli import main
import gc
gc.collect()
gc.freeze()  # what the imports made lives on in every child: their collections (an engine load's) skip it
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the forker never waits: its children are reaped as they exit
print("ready", flush=True)
for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid:
        print(pid, flush=True)
        continue
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the server waits for its own children again
        os.setsid()
        log = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.chdir(job["cwd"])
        os.environ.clear()
        os.environ.update(job["env"])
        sys.argv = ["streamlit", *job["args"]]
        main()
        code = 0
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
"""


class ForkedProcess:
    """A forked server, by pid: the parts of ``subprocess.Popen`` the tests use. Its exit code is not known (the
    forker reaps it); ``returncode`` is -1 once it has exited, and its log says why."""

    def __init__(self, pid: int, log: Path) -> None:
        self.pid = pid
        self.log = log
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                self.returncode = -1
        return self.returncode

    def kill(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)  # the server and anything it started (its own session)
        except ProcessLookupError:
            pass

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"forked server {self.pid}", timeout)
            time.sleep(0.05)
        return self.returncode


class Forker:
    """One forking process for a test process; ``start`` returns a new server's ``ForkedProcess``. It ends when the test
    process does (its input closes)."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", FORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        if self._proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the server forker did not start")

    def start(self, args: list[str], log: Path, cwd: Path, env: dict[str, str]) -> ForkedProcess:
        self._proc.stdin.write(json.dumps({"args": args, "log": str(log), "cwd": str(cwd), "env": env}) + "\n")
        self._proc.stdin.flush()
        return ForkedProcess(int(self._proc.stdout.readline()), log)
