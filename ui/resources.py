"""The one engine per server process, loaded through ``st.cache_resource``.

The engine holds weights only (no per-request state), so sharing it across every
browser session is safe; caches and generators are created per request.
"""
from __future__ import annotations

import os

import streamlit as st
import torch

from inference import Engine, EngineServer, load_engine


@st.cache_resource(show_spinner="Loading the model (first start converts the GGUF, ~10 s)…")
def get_engine() -> Engine:
    """Load the model named by ``LLM_EXPLORER_MODEL`` (default: the embedded SmolLM2-135M-Instruct)."""
    return load_engine(
        model=os.environ.get("LLM_EXPLORER_MODEL") or None,
        device=os.environ.get("LLM_EXPLORER_DEVICE") or None,
        dtype=os.environ.get("LLM_EXPLORER_DTYPE") or None,
    )


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


@st.cache_resource(show_spinner=False)
def get_server() -> EngineServer:
    """The server's one generation worker: requests from every browser session are queued and
    batched together (continuous batching), each caller receiving only its own tokens.

    Bounded: 8 requests run at once and 32 more may wait; beyond that ``submit`` raises
    ``BusyError``, which pages show as a "busy, try again" message. Slots hold 1,024
    positions (prompt + answer).
    """
    return EngineServer(get_engine(), n_slots=8, max_waiting=32, slot_capacity=1024, threads=app_threads())
