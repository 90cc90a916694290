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
import gc
import os

import streamlit as st

from inference import Engine, EngineServer, ServeConfig, load_engine, set_threads
from inference.threads import available_cores

from . import models


@st.cache_resource(show_spinner="Loading the model (the first start converts its GGUF file)…",
                   max_entries=models.MAX_MODELS)
def engine_for(model: str) -> Engine:
    """The engine of the allowlisted model ``model`` (its source comes from the allowlist, never from the browser)."""
    engine = load_engine(
        model=models.allowlist()[model],
        device=os.environ.get("LLM_EXPLORER_DEVICE") or None,
        dtype=os.environ.get("LLM_EXPLORER_DTYPE") or None,
    )
    release_freed_memory()  # reading Gemma's 262k-entry tokenizer leaves ~300 MB of freed heap behind
    return engine


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


def get_engine() -> Engine:
    """The engine of this session's model (for code that needs the session's own, not a cached result)."""
    return engine_for(models.current())


@st.cache_resource(show_spinner=False, max_entries=models.MAX_MODELS)
def server_for(model: str) -> EngineServer:
    """The one generation worker of ``model``: requests from every browser session are queued and batched
    together (continuous batching), each caller receiving only its own tokens. Bounded by ``ServeConfig``'s
    defaults; a full queue raises ``BusyError``, which pages show as a "busy, try again" message."""
    return EngineServer(engine_for(model), ServeConfig(threads=app_threads()))


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


@st.cache_resource(show_spinner=False)
def configure_threads() -> int:
    """The app's entry-point setting, applied once per server process (every later script thread adopts it)."""
    return set_threads(app_threads())
