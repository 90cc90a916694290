"""One engine per offered model per server process, loaded through ``st.cache_resource``.

The engine holds weights only (no per-request state), so sharing it across every
browser session is safe; caches and generators are created per request. ``get_engine``
returns the engine of the session's chosen model (``ui.models``); results cached for
pages go through ``cache_data`` / ``cache_resource`` below, which key every entry by
that model too, so two sessions on two models never see each other's numbers.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import streamlit as st
import torch

from inference import Engine, EngineServer, load_engine

from . import models


@st.cache_resource(show_spinner="Loading the model (first start converts the GGUF, ~10 s)…",
                   max_entries=models.MAX_MODELS)
def _load(name: str) -> Engine:
    """Load the allowlisted model ``name`` (its source comes from the allowlist, never from the browser)."""
    return load_engine(
        model=models.allowlist()[name],
        device=os.environ.get("LLM_EXPLORER_DEVICE") or None,
        dtype=os.environ.get("LLM_EXPLORER_DTYPE") or None,
    )


def get_engine() -> Engine:
    """The engine of this session's model (default: the embedded SmolLM2-135M-Instruct)."""
    return _load(models.current())


def _per_model(streamlit_cache: Callable, cache_kwargs: dict[str, Any]) -> Callable:
    """Decorator factory: ``streamlit_cache(**cache_kwargs)`` with the session's model added to every key."""
    def decorate(func: Callable) -> Callable:
        def with_model(model: str, *args: Any, **kwargs: Any) -> Any:  # ``model`` is hashed into the key
            return func(*args, **kwargs)

        # Streamlit keys a cached function by module + qualified name (+ source): keep func's.
        with_model.__module__, with_model.__qualname__ = func.__module__, func.__qualname__
        with_model.__name__, with_model.__doc__ = func.__name__, func.__doc__
        cached = streamlit_cache(**cache_kwargs)(with_model)

        def call(*args: Any, **kwargs: Any) -> Any:
            return cached(models.current(), *args, **kwargs)

        call.__name__, call.__doc__, call.__wrapped__ = func.__name__, func.__doc__, func
        call.clear = cached.clear  # type: ignore[attr-defined]
        return call
    return decorate


def cache_data(**cache_kwargs: Any) -> Callable:
    """``st.cache_data`` keyed by the session's model as well as the arguments."""
    return _per_model(st.cache_data, cache_kwargs)


def cache_resource(**cache_kwargs: Any) -> Callable:
    """``st.cache_resource`` keyed by the session's model as well as the arguments."""
    return _per_model(st.cache_resource, cache_kwargs)


def app_threads() -> int:
    """Torch intra-op threads for one page run (``LLM_EXPLORER_THREADS``, default 1).

    A classroom server runs many sessions at once, each in its own script thread, on a
    model this small. With torch's OpenMP backend the thread count belongs to the
    calling thread, and two threads per session that compete with other sessions spend
    their time waiting on each other: measured here under load, a 10-token generation
    took 10-24 s with 2 threads and 0.8-0.9 s with 1. One thread per session is the
    default; a single user on an idle machine may set more.
    """
    try:
        return max(1, int(os.environ.get("LLM_EXPLORER_THREADS", "1")))
    except ValueError:
        return 1


def use_app_threads() -> None:
    """Set this script thread's torch thread count (called by ``app.py`` on every run)."""
    threads = app_threads()
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def get_server() -> EngineServer:
    """The generation worker of this session's model (see ``_server``)."""
    return _server(models.current())


@st.cache_resource(show_spinner=False, max_entries=models.MAX_MODELS)
def _server(name: str) -> EngineServer:
    """The server's one generation worker: requests from every browser session are queued and
    batched together (continuous batching), each caller receiving only its own tokens.

    Bounded: 16 requests run at once (their slots hold 1,024 positions, prompt + answer:
    ~750 MB of KV cache for the default model in fp32; a batch of 16 costs about twice a
    batch of 1, so 16 slots nearly double a class's throughput over 8: the Sampling page's
    p95 slider move under 20 sessions fell from 46 s to 32 s) and 160 more may wait, enough for a
    class of 40 whose Sampling pages each send four at once (a waiting request holds only
    its token ids); beyond that ``submit`` raises ``BusyError``, which pages show as a
    "busy, try again" message.
    """
    return EngineServer(_load(name), n_slots=16, max_waiting=160, slot_capacity=1024, threads=app_threads())
