"""The server's shared resources: one engine and one generation server per offered model, and the app's threads.

The engine holds weights only (no per-request state), so sharing it across every
browser session is safe; caches and generators are created per request. Everything
here, and every cached page result in ``ui/compute_*.py``, takes the model's *name*
(one of ``ui.models.allowlist()``) as an explicit argument, so the name is part of
every cache key and two sessions on two models never see each other's numbers.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import os

import streamlit as st

from inference import Engine, EngineServer, ProcessServer, ServeConfig, load_engine, set_threads
from inference.threads import available_cores

from ui.shell import models


QUANT_CHOICES = ("gguf", "int8", "int4", "none")


@st.cache_resource(show_spinner="Loading the model (the first start converts its GGUF file)…",
                   max_entries=models.MAX_MODELS)
def engine_for(model: str) -> Engine:
    """The engine of the allowlisted model ``model`` (its source comes from the allowlist, never from the browser)."""
    engine = load_engine(**engine_settings(model))
    release_freed_memory()  # reading Gemma's 262k-entry tokenizer leaves ~300 MB of freed heap behind
    return engine


def engine_settings(model: str) -> dict:
    """``load_engine``'s arguments for ``model`` under the operator's settings (the app's engine and a process
    server's copy of it are loaded from the same)."""
    source = models.allowlist()[model]
    quant = weights_mode()
    if quant == "gguf" and source is not None and not str(source).endswith(".gguf"):
        quant = None  # a float checkpoint has no blocks to keep: it runs dense
    return dict(
        model=source,
        device=os.environ.get("LLM_EXPLORER_DEVICE") or None,
        dtype=os.environ.get("LLM_EXPLORER_DTYPE") or None,
        quant=quant,
        compile=os.environ.get("LLM_EXPLORER_COMPILE", "").strip().lower() in ("1", "true", "yes", "on"),
    )


def release_freed_memory() -> None:
    """Hand memory that Python and the libraries have freed back to the system (glibc keeps it otherwise).

    Called after one-off computations with large temporaries (loading an engine, a traced
    forward past the sliding window), where the server's resident size would stay at the peak.
    """
    gc.collect()
    libc_name = ctypes.util.find_library("c")
    if libc_name:
        libc = ctypes.CDLL(libc_name)
        if hasattr(libc, "malloc_trim"):
            libc.malloc_trim(0)


def weights_mode() -> str | None:
    """The operator's weights mode (``LLM_EXPLORER_QUANT``): "none" (dense, the default), "gguf", "int8" or "int4".

    Why dense by default: the pages are mostly one forward over the prompt, as fast dense as
    quantized here, and dense float32 is exact (it matches transformers to rounding, and a batch
    gives bit-for-bit the tokens of a solo run, as the Batching page shows). "gguf" decodes about
    twice as fast and stays closer to the float32 reference than llama.cpp does, but rounds its
    matmul inputs to bfloat16, so a batched and a solo run can part at a near-tie; a class server
    that generates a lot may choose it (docs/quantization.md has the measurements). An unknown
    value raises at start, naming the choices.
    """
    value = _choice("LLM_EXPLORER_QUANT", QUANT_CHOICES, "none")
    return None if value == "none" else value


def _choice(name: str, choices: tuple[str, ...], default: str) -> str:
    """The operator's setting ``name`` (lower case, ``default`` when unset or blank); one not in ``choices``
    raises, naming them."""
    value = os.environ.get(name, default).strip().lower() or default
    if value not in choices:
        raise ValueError(f"{name}={value!r}: use one of {', '.join(choices)}")
    return value


def get_engine() -> Engine:
    """The engine of this session's model (for code that needs the session's own, not a cached result)."""
    return engine_for(models.current())


@st.cache_resource(show_spinner=False, max_entries=models.MAX_MODELS)
def server_for(model: str) -> EngineServer | ProcessServer:
    """The one generation worker of ``model``: requests from every browser session are queued and batched
    together (continuous batching), each caller receiving only its own tokens. Bounded by ``ServeConfig``'s
    defaults; a full queue raises ``BusyError``, which pages show as a "busy, try again" message. In a
    thread of this process, or in a process of its own (``server_mode``)."""
    config = ServeConfig(threads=app_threads(), share_prefixes=prefix_sharing(), n_slots=server_slots())
    if server_mode() == "process":
        return ProcessServer(engine_for(model), functools.partial(load_engine, **engine_settings(model)), config)
    return EngineServer(engine_for(model), config)


SERVER_CHOICES = ("thread", "process")


def server_mode() -> str:
    """Where the generation worker runs (``LLM_EXPLORER_SERVER``): "thread" (the default) or "process".

    A worker thread waits for Python's interpreter lock after each of a decode step's hundreds
    of torch calls, behind every session's script thread that is running Python; with a class
    on the server that multiplies a step's time many times over. A process of its own has its
    own lock and a copy of the model (the memory of one more engine). One user gains nothing
    from it, a class server should set "process" (docs/classroom.md has the measurements). An
    unknown value raises at start, naming the choices.
    """
    return _choice("LLM_EXPLORER_SERVER", SERVER_CHOICES, "thread")


SWITCH_CHOICES = {"on": True, "off": False}


def prefix_sharing() -> bool:
    """Whether the generation server reuses the K/V of prompt starts it has computed (``LLM_EXPLORER_PREFIX_CACHE``,
    "on" by default, "off" to compute every prompt whole, as the lever benchmark compares).

    A class typing the teacher's sentence, or a page asking for four continuations of one prompt, sends
    prompts that begin alike; their starts are computed once. The numbers are those of a prompt computed
    whole, to rounding (``tests/test_prefix_sharing.py``). An unknown value raises at start.
    """
    return SWITCH_CHOICES[_choice("LLM_EXPLORER_PREFIX_CACHE", tuple(SWITCH_CHOICES), "on")]


MAX_SLOTS = 256


def server_slots() -> int:
    """Requests the generation server runs at once, each in a cache slot of its own (``LLM_EXPLORER_SLOTS``,
    default ``ServeConfig``'s 16).

    The slots are allocated when the server starts (1,024 positions each; for SmolLM2-135M in float32,
    45 KiB a position, 45 MiB a slot), so one user keeps the default. A class server should set 32:
    twenty tabs keep 16 slots full, and a Sampling page's continuation then waits for one to free
    (docs/classroom.md has the measurement). A value that is not a whole number from 1 to 256 raises
    at start.
    """
    value = os.environ.get("LLM_EXPLORER_SLOTS", "").strip()
    if not value:
        return ServeConfig.n_slots
    if not value.isdigit() or not 1 <= int(value) <= MAX_SLOTS:
        raise ValueError(f"LLM_EXPLORER_SLOTS={value!r}: use a whole number from 1 to {MAX_SLOTS}")
    return int(value)


def app_threads() -> int:
    """Torch threads for the app (``LLM_EXPLORER_THREADS``; default: every core).

    Every core suits one user on their own machine. A class server, where many sessions
    run forwards at once each in its own script thread, should set 1: two threads per
    session that compete for the same cores wait on each other (docs/classroom.md has
    the measurement).
    """
    value = os.environ.get("LLM_EXPLORER_THREADS", "").strip()
    try:
        return max(1, int(value)) if value else available_cores()
    except ValueError:
        return available_cores()


def configure_server() -> None:
    """The app's entry-point settings, on every run: the operator's modes checked (a bad value stops the page
    with the reason and the choices, not a traceback), the thread count set once per process, and a process
    server's child started for the session's model before a page needs it."""
    try:
        weights_mode()
        mode = server_mode()
        prefix_sharing()
        server_slots()
    except ValueError as error:
        st.error(f"This server's settings are wrong: {error}.", icon=":material/block:")
        st.stop()
    configure_threads()
    if mode == "process":
        server_for(models.current())  # the child loads its model while this run goes on (once per model)


@st.cache_resource(show_spinner=False)
def configure_threads() -> int:
    """The app's entry-point setting, applied once per server process (every later script thread adopts it)."""
    return set_threads(app_threads())
