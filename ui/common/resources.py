"""The server's shared resources: one engine, its client and one generation server per offered model, and the
app's threads.

The engine holds weights only (no per-request state), so sharing it across every browser
session is safe; caches and generators are created per request. This module is the one place
of the UI that holds an engine: the pages and the chapters' ``compute.py`` read it through its
``EngineClient`` (``client_for``), named methods over plain values. Everything here, and every
cached page result in a chapter's ``compute.py``, takes the model's *name* (one of
``ui.common.models.allowlist()``) as an explicit argument, so the name is part of every cache key
and two sessions on two models never see each other's numbers.
"""

from __future__ import annotations

import time

import streamlit as st

from inference.api import (
    ChildClient,
    Engine,
    EngineClient,
    EngineServer,
    ProcessServer,
    ServeConfig,
    SettingsError,
    available_cores,
    gguf_source,
    limit_heap_arenas,
    load_engine,
    set_threads,
    settings,
)
from ui.classroom import settings as class_settings
from ui.common import format as fmt
from ui.common import models


@st.cache_resource(
    show_spinner="Loading the model (the first start converts its GGUF file)…", max_entries=models.MAX_MODELS
)
def engine_for(model: str) -> Engine:
    """The engine of the allowlisted model ``model`` (its source comes from the allowlist, never from the browser)."""
    _loading_since.setdefault(model, time.monotonic())  # read by ``client_with_notice`` in the sessions that wait
    try:
        engine = load_engine(**engine_settings(model))
    finally:
        _loading_since.pop(model, None)
    return engine  # load_model gave the load's freed memory back (Gemma's tokenizer leaves ~300 MB)


_loading_since: dict[str, float] = {}  # model -> monotonic time its load began, while one runs (any session)
# Models whose client is built. ``client_for`` keeps every allowlisted model (``models.MAX_MODELS``), so it stays
# built; the spinner is left out for these: Streamlit starts a timer thread for each one, ~2 % of a class server's
# page runs (docs/benchmarks.md).
_ready: set[str] = set()


def client_with_notice(model: str) -> EngineClient:
    """``client_for(model)``, with a spinner that says what the page waits for while the model loads.

    ``engine_for``'s own spinner shows only in the session that runs the load, and only when it is the outermost
    cached call (pages reach it inside cached helpers, where Streamlit hides it). A second session waits on the
    cache's lock with no sign; this names the model and who is loading it. A loaded model returns at once (a
    spinner shows only after half a second)."""
    if model in _ready:
        return client_for(model)
    since = _loading_since.get(model)
    who = (
        f"another session began loading it {time.monotonic() - since:.0f} s ago; this page waits for that load"
        if since is not None
        else "the first use on this server reads its weights from disk"
    )
    with st.spinner(f"Waiting for the model {model} to load ({who})…", show_time=True):
        client = client_for(model)
    _ready.add(model)
    return client


def engine_settings(model: str) -> dict:
    """``load_engine``'s arguments for ``model`` under the operator's settings (the app's engine and a process
    server's copy of it are loaded from the same plain values)."""
    source = models.allowlist()[model]
    operator = settings.current()
    quant = operator.quant
    if quant == "gguf" and gguf_source(source) is None:
        quant = None  # a float checkpoint has no blocks to keep: it runs dense (a packaged model's name is a GGUF)
    return dict(model=source, device=operator.device, dtype=operator.dtype, quant=quant, compile=operator.compile)


def weights_mode() -> str | None:
    """The operator's weights mode (``LLM_EXPLORER_QUANT``): None (dense, the default), "gguf", "int8" or "int4"."""
    return settings.current().quant


@st.cache_resource(show_spinner=False, max_entries=models.MAX_MODELS)
def client_for(model: str) -> EngineClient:
    """The client every page reads ``model`` through: on a process server its forwards run in the child."""
    source = models.allowlist()[model]
    if settings.current().server == "process":
        return ChildClient(engine_for(model), server_for(model), source)
    return EngineClient(engine_for(model), lambda: server_for(model), source)


@st.cache_resource(max_entries=10, show_spinner="Loading the model in another weights mode…")
def client_in_mode(model: str, mode: str) -> EngineClient:
    """``model`` with its weights in ``mode`` ("none": float32, "bf16", "gguf", "int8", "int4"), on the CPU, for the
    Quantization page's comparison; the app's own client when it already runs that mode."""
    if mode == (weights_mode() or "none"):
        return client_for(model)
    quant = None if mode in ("none", "bf16") else mode
    source = models.allowlist()[model]
    engine = load_engine(model=source, device="cpu", dtype="bfloat16" if mode == "bf16" else "float32", quant=quant)
    return EngineClient(engine, source=source)


def current_client() -> EngineClient:
    """The client of this session's model."""
    return client_for(models.current())


@st.cache_resource(show_spinner=False, max_entries=models.MAX_MODELS)
def server_for(model: str) -> EngineServer | ProcessServer:
    """The one generation worker of ``model``: requests from every browser session are queued and batched
    together (continuous batching), each caller receiving only its own tokens. Bounded by ``ServeConfig``'s
    defaults; a full queue raises ``BusyError``, which pages show as a "busy, try again" message. In a
    thread of this process, or in a process of its own (``LLM_EXPLORER_SERVER``)."""
    operator = settings.current()
    config = ServeConfig(
        threads=app_threads(),
        share_prefixes=operator.prefix_cache,
        n_slots=operator.slots or ServeConfig.n_slots,
        kv_block_size=operator.kv,  # LLM_EXPLORER_KV: paged blocks (16 by default), None: the slot cache
        kv_positions=operator.kv_positions,  # LLM_EXPLORER_KV_POSITIONS: the paged pool's size
    )
    if operator.server == "process":
        return ProcessServer(engine_for(model), engine_settings(model), config)
    return EngineServer(engine_for(model), config)


def app_threads() -> int:
    """Torch threads for the app (``LLM_EXPLORER_THREADS``; default: every core)."""
    return settings.current().threads or available_cores()


def configure_server() -> None:
    """The app's entry-point settings, on every run: the operator's settings read and checked (once per process;
    a bad value stops the page with the reason and the choices, not a traceback), the thread count set and malloc's
    heaps capped once per process, and a process server's child started for the session's model before a page
    needs it."""
    try:
        operator = settings.current()
        models.allowlist()  # the models LLM_EXPLORER_MODELS adds, counted with the packaged ones
        class_settings.current()  # the class's own three (teacher key, room, class id)
    except SettingsError as error:
        st.error(f"This server's settings are wrong: {fmt.clause(error)}.", icon=":material/block:")
        st.stop()
    configure_threads()
    configure_heap()
    if operator.server == "process":
        server_for(models.current())  # the child loads its model while this run goes on (once per model)


@st.cache_resource(show_spinner=False)
def configure_heap() -> bool:
    """Once per server process: malloc's heaps capped at the app's cores (at least 2), so the sessions' script
    threads share their freed memory instead of each keeping a heap of its own (``limit_heap_arenas``)."""
    return limit_heap_arenas(max(2, app_threads()))


@st.cache_resource(show_spinner=False)
def configure_threads() -> int:
    """The app's entry-point setting, applied once per server process (every later script thread adopts it)."""
    return set_threads(app_threads())
