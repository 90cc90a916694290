"""The engine server in a process of its own: its worker never waits for the callers' interpreter lock.

Owns ``ProcessServer`` (the caller side, in the calling process: the same ``submit`` /
``RequestHandle`` / ``recent_steps`` as ``EngineServer``, and ``run`` for any other work on
the engine, such as a page's forward) and the child's loop (``main``, run as
``python -c CHILD_COMMAND``), which runs an ordinary ``EngineServer`` on its own copy of the
model and talks to the caller over one socket pair.

Why a process: a decode step is hundreds of small torch calls, and each gives up
Python's interpreter lock and takes it back. In a web server with many sessions, the
other threads hold that lock while they run Python (a page, a chart, a JSON message), and
a thread that wants it back waits for the switch interval (5 ms) behind each of them. On
this project's 2-core machine a 50 ms step of 4 requests took 30 s with just two threads
spinning in Python beside it (``docs/classroom.md``). A child process has a lock of its
own and only shares the cores.

The caller side checks prompts with its own engine (the same tokenizer and limits), counts
the bound, and hands out the same ``RequestHandle``; the child holds the batcher, the cache
and the generators. If the child dies, the requests it held fail with a clear error and
the next ``submit`` starts a new one.
"""
from __future__ import annotations

import itertools
import os
import pickle
import queue
import socket
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ..threads import set_threads
from .config import ServeConfig
from .requests import BatchStep
from .server import EngineServer, TokenEvent, _ServerFront, _Submission

if TYPE_CHECKING:
    from ..generation.engine import Engine

T = TypeVar("T")
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder that holds ``inference``
CHILD_COMMAND = "from inference.serving.process import main; main({fd})"


class ProcessServer(_ServerFront):
    """An ``EngineServer`` in a child process; ``load`` (picklable, e.g. a ``functools.partial`` of
    ``load_engine``) builds the child's engine, which must be the model ``engine`` is."""

    def __init__(self, engine: "Engine", load: Callable[[], "Engine"], config: ServeConfig | None = None) -> None:
        super().__init__(engine, config)
        self._load = load
        self._children_lock = threading.Lock()  # who the current child is, and what it holds
        self._call_ids = itertools.count()
        self._child = self._start_child()

    # -- caller side (any thread) ------------------------------------------------
    def _send(self, sub: _Submission) -> None:
        with self._children_lock:
            if self._child.ended or not self._child.alive:
                self._child = self._start_child()
            child = self._child  # the one this request's outcome will come from
            child.outboxes[sub.request_id] = sub.outbox
        child.send(("submit", sub.request_id, sub.prompt_ids, sub.params, sub.interventions, sub.submitted_at))

    def _request_cancel(self, request_id: int) -> None:
        self._child.send(("cancel", request_id))  # a queue put: safe from a handle's finalizer

    def run(self, fn: Callable[..., T], *args, timeout: float | None = None, **kwargs) -> T:
        """``fn(engine, *args, **kwargs)`` on the child's engine, beside its batcher; raises what ``fn`` raised.

        ``fn`` goes to the child by name (a module-level function of a module the child can import),
        the arguments and the result by pickle: keep the result to what the caller needs (arrays, not a
        whole trace). Not bounded like ``submit``: each caller waits for its own result.
        """
        work = pickle.dumps((fn, args, kwargs))  # here, so a function that cannot travel fails in the caller
        future: Future = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the engine server is closed")
            call_id = next(self._call_ids)
        with self._children_lock:
            if self._child.ended or not self._child.alive:
                self._child = self._start_child()
            child = self._child
            child.calls[call_id] = future
        child.send(("run", call_id, work))
        return future.result(timeout)

    def close(self, timeout: float | None = 10.0) -> None:
        """Stop the child; requests still in flight end with an error."""
        with self._lock:
            self._closed = True
        self._child.stop(timeout)

    @property
    def child_pid(self) -> int:
        return self._child.proc.pid

    def _start_child(self) -> "_Child":
        child = _Child(self._load, self.config)
        weakref.finalize(self, _kill, child.proc)  # a server dropped without close() must not leave its child
        threading.Thread(target=_read, args=(weakref.ref(self), child), name="engine-server-reader",
                         daemon=True).start()
        return child

    def _arrived(self, child: "_Child", message: tuple) -> None:
        """One message from ``child``: a token or an outcome for one of its requests, or a step record."""
        if message[0] == "item":
            _, request_id, item = message
            if isinstance(item, TokenEvent):
                outbox = child.outboxes.get(request_id)
                if outbox is not None:
                    outbox.put(item)
                return
            with self._children_lock:
                outbox = child.outboxes.pop(request_id, None)
            if outbox is not None:
                self._end(outbox, item)
        elif message[0] == "step":
            self._step_done(message[1])
        elif message[0] == "reply":
            _, call_id, value, error = message
            with self._children_lock:
                future = child.calls.pop(call_id, None)
            if future is not None:
                future.set_result(value) if error is None else future.set_exception(error)

    def _ended(self, child: "_Child", reason: str) -> None:
        """``child`` is gone: no request joins it from now on, and the ones it held fail with ``reason``."""
        with self._children_lock:
            child.ended = True
            held, child.outboxes = child.outboxes, {}
            calls, child.calls = child.calls, {}
        for outbox in held.values():
            self._end(outbox, RuntimeError(f"{reason} (exit code {child.proc.poll()}); try again"))
        for future in calls.values():
            future.set_exception(RuntimeError(f"{reason} (exit code {child.proc.poll()}); try again"))


def _read(server_ref: "weakref.ref[ProcessServer]", child: "_Child") -> None:
    """The reader of one child (its own thread); it holds the server weakly, so dropping the server ends it."""
    reason = "the engine server process stopped"
    while True:
        try:
            message = child.conn.recv()
        except (EOFError, OSError):
            break
        except Exception as error:  # noqa: BLE001  (a message this side cannot unpickle: end the child cleanly)
            reason = f"a message from the engine server process could not be read ({type(error).__name__}: {error})"
            break
        if message[0] == "failed":
            reason = f"the engine server process could not start: {message[1]}"
            continue
        server = server_ref()
        if server is None:
            break
        server._arrived(child, message)
        del server
    child.stop(timeout=5)
    child.conn.close()
    server = server_ref()
    if server is not None:
        server._ended(child, reason)


class _Child:
    """One child process, the caller's end of its socket pair, and the requests it holds.

    Every message goes out through one writer thread, so a caller never blocks on the socket
    and a handle's finalizer (a cancellation) only puts into a queue.
    """

    def __init__(self, load: Callable[[], "Engine"], config: ServeConfig) -> None:
        mine, theirs = socket.socketpair()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(PACKAGE_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD_COMMAND.format(fd=theirs.fileno())],
                                     pass_fds=(theirs.fileno(),), env=env, cwd=PACKAGE_ROOT)
        theirs.close()
        self.conn = Connection(mine.detach())
        self.outboxes: dict[int, object] = {}  # request -> its outbox, until its outcome arrives
        self.calls: dict[int, Future] = {}  # ``run`` call -> its future, until its reply arrives
        self.ended = False  # set by the reader once the child is gone
        self._outgoing: queue.SimpleQueue = queue.SimpleQueue()
        self._outgoing.put((load, config))
        threading.Thread(target=self._write, name="engine-server-writer", daemon=True).start()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, message: tuple) -> None:
        self._outgoing.put(message)

    def _write(self) -> None:
        while True:
            message = self._outgoing.get()
            try:
                self.conn.send(message)
            except (OSError, ValueError):  # the child is gone: the reader fails what it held
                return
            if message == ("close",):
                return

    def stop(self, timeout: float | None) -> None:
        self.send(("close",))
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()


# -- the child ------------------------------------------------------------------------
class _PipeOutbox:
    """A request's outbox in the child: what the worker puts in goes to the caller."""

    def __init__(self, request_id: int, send: Callable[[tuple], None]) -> None:
        self.request_id = request_id
        self._send = send

    def put(self, item) -> None:
        self._send(("item", self.request_id, _portable(item) if isinstance(item, Exception) else item))


def _portable(error: Exception) -> Exception:
    """``error`` if the caller can unpickle it (a ``PromptError`` stays one), else a RuntimeError with its message."""
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:  # noqa: BLE001  (an exception whose constructor pickle cannot call again)
        return RuntimeError(f"{type(error).__name__}: {error}")


class _ChildServer(EngineServer):
    def __init__(self, engine: "Engine", config: ServeConfig, send: Callable[[tuple], None]) -> None:
        self._send_up = send
        super().__init__(engine, config)

    def _step_done(self, step: BatchStep) -> None:
        self._send_up(("step", step))


def main(fd: int) -> None:
    """The child: load the engine, then serve the caller's messages until it closes or goes away."""
    conn = Connection(fd)
    lock = threading.Lock()

    def send(message: tuple) -> None:
        with lock:
            try:
                conn.send(message)
            except OSError:  # the caller is gone; the loop below ends at its next read
                pass

    try:
        load, config = conn.recv()  # unpickling it imports what the engine needs
        set_threads(config.threads)
        engine = load()
    except Exception as error:  # noqa: BLE001  (the caller shows why, and every request fails with it)
        send(("failed", f"{type(error).__name__}: {error}"))
        return
    server = _ChildServer(engine, config, send)
    runner = ThreadPoolExecutor(max_workers=2, thread_name_prefix="engine-run")  # ``run`` calls, beside the batcher

    def run(call_id: int, work: bytes) -> None:
        try:
            fn, args, kwargs = pickle.loads(work)  # imports fn's module here (the caller's error if it cannot)
            reply = ("reply", call_id, fn(engine, *args, **kwargs), None)
        except Exception as error:  # noqa: BLE001  (the caller's future raises it)
            reply = ("reply", call_id, None, _portable(error))
        try:
            send(reply)
        except Exception as error:  # noqa: BLE001  (a result or an exception that does not pickle)
            send(("reply", call_id, None, RuntimeError(f"{type(error).__name__}: {error}")))

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            break
        if message[0] == "submit":
            _, request_id, ids, params, interventions, submitted_at = message
            server._accept(_Submission(request_id, ids, params, _PipeOutbox(request_id, send),
                                       submitted_at=submitted_at, interventions=interventions))
        elif message[0] == "run":
            runner.submit(run, *message[1:])
        elif message[0] == "cancel":
            server._request_cancel(message[1])
        elif message[0] == "close":
            break
    runner.shutdown(wait=False, cancel_futures=True)
    server.close()
    conn.close()
