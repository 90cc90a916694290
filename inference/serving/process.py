"""The engine server in a process of its own: its worker never waits for the callers' interpreter lock.

Owns ``ProcessServer`` (the caller side, in the calling process: the same ``submit`` /
``RequestHandle`` / ``recent_steps`` as ``EngineServer``, and ``call`` for a page's other reads
of the engine, by name: one of ``EngineClient``'s plain methods), ``ChildClient`` (an
``EngineClient`` whose forwards run in the child) and the child's loop (``main``, run as
``python -c CHILD_COMMAND``), which loads its own copy of the model with ``load_engine`` and
the caller's plain arguments, runs an ordinary ``EngineServer`` on it and an ``EngineClient``
for the calls, and talks to the caller over one socket pair.

Nothing but names and plain values crosses: the child reads every message with an unpickler
that builds only numpy arrays, Python's plain types and the library's own classes
(``_PlainUnpickler``), so no function of the caller's ever runs there, and the child imports
``inference`` only.

Why a process: a decode step is hundreds of small torch calls, and each gives up
Python's interpreter lock and takes it back. In a web server with many sessions, the
other threads hold that lock while they run Python (a page, a chart, a JSON message), and
a thread that wants it back waits for the switch interval (5 ms) behind each of them
(``docs/classroom.md`` has what that costs). A child process has a lock of its own and
only shares the cores.

The caller side checks prompts with its own engine (the same tokenizer and limits), counts
the bound, and hands out the same ``RequestHandle``; the child holds the batcher, the cache
and the generators. If the child dies, the requests it held fail with a clear error and
the next ``submit`` starts a new one.
"""

from __future__ import annotations

import io
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
from dataclasses import fields, is_dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..generation.engine import load_engine
from ..inspection.attention import AttentionArrays
from ..threads import set_threads
from .client import PLAIN_CALLS, EngineClient
from .config import ServeConfig
from .requests import BatchStep
from .server import EngineServer, TokenEvent, _ServerFront, _Submission

if TYPE_CHECKING:
    from ..generation.engine import Engine

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder that holds ``inference``
CHILD_COMMAND = "from inference.serving.process import main; main({fd})"


class ProcessServer(_ServerFront):
    """An ``EngineServer`` in a child process; the child's engine is ``load_engine(**load)`` (plain arguments:
    the model's source, device, dtype, weights mode), which must be the model ``engine`` is."""

    def __init__(self, engine: Engine, load: dict[str, Any], config: ServeConfig | None = None) -> None:
        super().__init__(engine, config)
        check_plain(load, "load_engine's arguments")
        self._load = dict(load)
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
        # the spec as given: the child's engine prepares it itself (head means included), so no tensor travels
        spec = None if sub.interventions is None else sub.given_interventions
        child.send(("submit", sub.request_id, sub.prompt_ids, sub.params, spec, sub.submitted_at, sub.speculation))

    def _request_cancel(self, request_id: int) -> None:
        self._child.send(("cancel", request_id))  # a queue put: safe from a handle's finalizer

    def call(self, name: str, *args, timeout: float | None = None, **kwargs):
        """``EngineClient.<name>(*args, **kwargs)`` on the child's engine, beside its batcher; raises what it raised.

        ``name`` must be one of ``PLAIN_CALLS`` and the arguments plain values (``check_plain``): both are
        checked here, so a call that cannot travel fails in the caller. Not bounded like ``submit``: each
        caller waits for its own result.
        """
        if name not in PLAIN_CALLS:
            raise ValueError(
                f"{name!r} is not a call the engine's child runs (one of: {', '.join(sorted(PLAIN_CALLS))})"
            )
        check_plain((args, kwargs), f"the arguments of {name}")
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
        child.send(("call", call_id, name, args, kwargs))
        return future.result(timeout)

    def close(self, timeout: float | None = 10.0) -> None:
        """Stop the child; requests still in flight end with an error."""
        with self._lock:
            self._closed = True
        self._child.stop(timeout)

    @property
    def child_pid(self) -> int:
        return self._child.proc.pid

    def _start_child(self) -> _Child:
        child = _Child(self._load, self.config)
        weakref.finalize(self, _kill, child.proc)  # a server dropped without close() must not leave its child
        threading.Thread(
            target=_read, args=(weakref.ref(self), child), name="engine-server-reader", daemon=True
        ).start()
        return child

    def _arrived(self, child: _Child, message: tuple) -> None:
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

    def _ended(self, child: _Child, reason: str) -> None:
        """``child`` is gone: no request joins it from now on, and the ones it held fail with ``reason``."""
        with self._children_lock:
            child.ended = True
            held, child.outboxes = child.outboxes, {}
            calls, child.calls = child.calls, {}
        for outbox in held.values():
            self._end(outbox, RuntimeError(f"{reason} (exit code {child.proc.poll()}); try again"))
        for future in calls.values():
            future.set_exception(RuntimeError(f"{reason} (exit code {child.proc.poll()}); try again"))


class ChildClient(EngineClient):
    """The ``Backend`` (``inference.api``) of a process server: an ``EngineClient`` whose forwards run on the process server's child: the prompt's last logits and the
    attention maps, which a class's pages ask for most (in the child a forward's hundreds of torch calls do not
    wait for this process's interpreter lock behind every session's script thread). Every other method runs
    here on ``engine``, the same model; any other name of ``PLAIN_CALLS`` could move to the child the same way."""

    def __init__(self, engine: Engine, server: ProcessServer, source=None) -> None:
        super().__init__(engine, lambda: server, source)
        self._process_server = server

    def last_logits(self, ids: list[int]) -> np.ndarray:
        return self._process_server.call("last_logits", ids)

    def attention(self, ids: list[int]) -> AttentionArrays:
        return self._process_server.call("attention", ids)


def _read(server_ref: weakref.ref[ProcessServer], child: _Child) -> None:
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

    def __init__(self, load: dict[str, Any], config: ServeConfig) -> None:
        mine, theirs = socket.socketpair()
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                [str(PACKAGE_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
            ),
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD_COMMAND.format(fd=theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            env=env,
            cwd=PACKAGE_ROOT,
        )
        theirs.close()
        self.conn = Connection(mine.detach())
        self.outboxes: dict[int, object] = {}  # request -> its outbox, until its outcome arrives
        self.calls: dict[int, Future] = {}  # ``call`` -> its future, until its reply arrives
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
    def __init__(self, engine: Engine, config: ServeConfig, send: Callable[[tuple], None]) -> None:
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
        load, config = _receive(conn)
        set_threads(config.threads)
        engine = load_engine(**load)
    except Exception as error:  # noqa: BLE001  (the caller shows why, and every request fails with it)
        send(("failed", f"{type(error).__name__}: {error}"))
        return
    server = _ChildServer(engine, config, send)
    client = EngineClient(engine)
    runner = ThreadPoolExecutor(max_workers=2, thread_name_prefix="engine-call")  # ``call``s, beside the batcher

    def call(call_id: int, name: str, args: tuple, kwargs: dict) -> None:
        try:
            if name not in PLAIN_CALLS:  # the caller checks it too; this side never trusts that
                raise ValueError(f"{name!r} is not a call the engine's child runs")
            reply = ("reply", call_id, getattr(client, name)(*args, **kwargs), None)
        except Exception as error:  # noqa: BLE001  (the caller's future raises it)
            reply = ("reply", call_id, None, _portable(error))
        try:
            send(reply)
        except Exception as error:  # noqa: BLE001  (a result or an exception that does not pickle)
            send(("reply", call_id, None, RuntimeError(f"{type(error).__name__}: {error}")))

    while True:
        try:
            message = _receive(conn)
        except (EOFError, OSError):
            break
        except pickle.UnpicklingError as error:  # not plain values (the caller checks first): end, saying why
            send(("failed", f"a message that is not plain values was refused ({error})"))
            break
        if message[0] == "submit":
            _, request_id, ids, params, interventions, submitted_at, speculation = message
            server._accept(
                _Submission(
                    request_id,
                    ids,
                    params,
                    _PipeOutbox(request_id, send),
                    submitted_at=submitted_at,
                    interventions=interventions,
                    speculation=speculation,
                )
            )
        elif message[0] == "call":
            runner.submit(call, *message[1:])
        elif message[0] == "cancel":
            server._request_cancel(message[1])
        elif message[0] == "close":
            break
    runner.shutdown(wait=False, cancel_futures=True)
    server.close()
    conn.close()


# -- what may cross: plain values only ---------------------------------------------------
_PLAIN_TYPES = (type(None), bool, int, float, complex, str, bytes)
_NUMPY_GLOBALS = {
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
}
_BUILTIN_GLOBALS = {"frozenset", "set", "complex"}


def check_plain(value: Any, what: str = "a value") -> None:
    """Raise ``TypeError`` unless ``value`` is made of plain values only: None, numbers, text, bytes, tuples,
    lists, dicts and sets of them, numpy arrays of numbers, and dataclasses of the library (``inference.*``)."""
    if isinstance(value, _PLAIN_TYPES) or isinstance(value, np.generic):
        return
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise TypeError(f"{what}: a numpy array of Python objects does not travel")
        return
    if isinstance(value, (tuple, list, set, frozenset)):
        for item in value:
            check_plain(item, what)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            check_plain(key, what)
            check_plain(item, what)
        return
    if is_dataclass(value) and not isinstance(value, type) and type(value).__module__.startswith("inference."):
        for field in fields(value):
            check_plain(getattr(value, field.name), what)
        return
    raise TypeError(f"{what}: {type(value).__name__} is not a plain value (names and plain arguments only)")


class _PlainUnpickler(pickle.Unpickler):
    """Builds numpy arrays, Python's plain types and the library's own classes; refuses any other global."""

    def find_class(self, module: str, name: str):
        if (module, name) in _NUMPY_GLOBALS or (module == "builtins" and name in _BUILTIN_GLOBALS):
            return super().find_class(module, name)
        if module.split(".")[0] == "inference":
            found = super().find_class(module, name)
            if isinstance(found, type):  # a class of the library (a dataclass, a config), never a function
                return found
        raise pickle.UnpicklingError(f"{module}.{name} is not a plain value: the engine's child does not build it")


def _receive(conn: Connection):
    """The next message from the caller, read by ``_PlainUnpickler``."""
    return _PlainUnpickler(io.BytesIO(conn.recv_bytes())).load()
