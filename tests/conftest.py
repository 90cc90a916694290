"""Shared fixtures: one engine per real model for the whole session (and Gemma's reference), tiny random models for the rest.

The suite's one thread setting is made here, once, like any entry point's
(``LLM_EXPLORER_TEST_THREADS``, default the process's share of the cores: one each for two workers on two cores),
and handed to the apps the tests start (``LLM_EXPLORER_THREADS``, unless set); no test changes it.
"""

from __future__ import annotations

import os

import pytest
import torch

_APP_THREADS_SET_HERE = "TESTS_SET_APP_THREADS"  # marks LLM_EXPLORER_THREADS as this hook's, not the operator's


def pytest_configure(config):
    from inference import set_threads

    threads = set_threads(suite_threads())
    # The apps the tests run (AppTest in this process, servers in their own) take the same share, unless the operator
    # set LLM_EXPLORER_THREADS. An xdist worker inherits its controller's environment, where this hook set the
    # controller's share (every core): the worker sets its own over it (two threads in each server beside the other
    # worker's would wait on each other).
    if os.environ.get(_APP_THREADS_SET_HERE) or "LLM_EXPLORER_THREADS" not in os.environ:
        os.environ["LLM_EXPLORER_THREADS"] = str(threads)
        os.environ[_APP_THREADS_SET_HERE] = "1"
    scan_installed_components_once()
    wait_for_app_runs_without_polling()


def pytest_collection_finish(session):
    """Freeze what collecting the tests made: the imported libraries (torch, transformers, Streamlit, plotly) and the
    test modules, ~557k objects that live to the end of the process. A full collection walked them all (0.39 s each,
    measured after collecting; every engine load makes one, ``release_freed_memory``): in one main phase the workers'
    collections took 74.9 CPU-s, and 45.8 frozen (docs/testing.md). Frozen, a collection walks only what the tests made
    since. Nothing frozen is garbage: it is collected first."""
    import gc

    gc.collect()
    gc.freeze()


def scan_installed_components_once() -> None:
    """Every ``AppTest`` scans the metadata of every installed package for Streamlit components (0.1-0.15 s of CPU
    each); the installed packages do not change during a run, so the scan's answer is kept after the first. A
    server scans once per process, as before."""
    import functools

    try:
        from streamlit.components.v2 import manifest_scanner
    except ImportError:  # the engine's tests on a lent GPU machine, which has no Streamlit
        return
    manifest_scanner.scan_component_manifests = functools.cache(manifest_scanner.scan_component_manifests)


def wait_for_app_runs_without_polling() -> None:
    """``AppTest.run`` waits for its script in a loop that wakes every millisecond and scans every event the run has
    sent so far (each of the page's deltas) for its end: the longer a page, the more of each millisecond went to
    rescanning, in the process whose other thread runs the page. The same wait, woken by the end itself."""
    import threading

    try:
        from streamlit.runtime.scriptrunner import ScriptRunnerEvent
        from streamlit.testing.v1 import local_script_runner
    except ImportError:  # the engine's tests on a lent GPU machine, which has no Streamlit
        return

    def require_widgets_deltas(runner, timeout: float = 3) -> None:
        ended = threading.Event()

        def on_event(sender, event, **kwargs) -> None:
            if event == ScriptRunnerEvent.SHUTDOWN:
                ended.set()

        runner.on_event.connect(on_event, weak=False)
        try:
            if runner.script_stopped() or ended.wait(timeout):  # it may have ended before the connection
                return
        finally:
            runner.on_event.disconnect(on_event)
        runner.request_stop()  # as Streamlit's own: stop the script so it does not run on, then say so
        runner.join()
        raise RuntimeError(f"AppTest script run timed out after {timeout}(s)")

    local_script_runner.require_widgets_deltas = require_widgets_deltas


def suite_threads() -> int:
    """``LLM_EXPLORER_TEST_THREADS``, or the process's share of the cores: every core in one process, one core each
    for two workers on two cores. Two threads each on shared cores wait on each other (the reason a class server
    sets one, README's settings): a tiny model's step took 9x longer with two threads a worker on a busy machine."""
    from inference.threads import available_cores

    if os.environ.get("LLM_EXPLORER_TEST_THREADS"):
        return int(os.environ["LLM_EXPLORER_TEST_THREADS"])
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))  # set by pytest-xdist in each worker
    return max(1, available_cores() // workers)


@pytest.fixture(autouse=True)
def fresh_settings():
    """Every test reads the operator's settings from the environment as the test leaves it: a process reads them
    once (``inference.settings.current``), and one test process starts many apps, each with its own."""
    from inference import settings
    from ui.classroom import settings as class_settings

    settings.current.cache_clear()
    class_settings.current.cache_clear()
    yield
    settings.current.cache_clear()
    class_settings.current.cache_clear()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """One ``redis-server`` for the session (loopback, a password, no persistence, ``noeviction``); each test's room
    takes a class id of its own, so tests never see each other's keys. Skipped where Debian's package is missing."""
    from tests.redis_server import RedisServer

    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def tokenizer_folder():
    """A folder holding the embedded model's tokenizer files (converted once, never loaded as a model)."""
    from inference.model.gguf import converted_folder, default_gguf_path

    return converted_folder(default_gguf_path())


@pytest.fixture(scope="session")
def engine():
    """The embedded SmolLM2-135M-Instruct, fp32 on CPU, loaded once for every test that needs it."""
    from inference import load_engine

    return load_engine(device="cpu", dtype="float32")


@pytest.fixture(scope="session")
def gguf_engine():
    """The same model on the file's own 4-bit blocks (``quant="gguf"``, torch's packed kernels on any CPU), loaded once."""
    from inference import load_engine

    return load_engine(device="cpu", quant="gguf", kernel="int4pack")


# The two transformers references are each read by one file: module-scoped, so a worker gives their memory back
# (0.5 and 1.1 GB of float32 weights) when that file is done, rather than holding them through every later file.
@pytest.fixture(scope="module")
def hf_reference(engine):
    """transformers' own model on the same weights (read from the engine's converted folder)."""
    from transformers import AutoModelForCausalLM

    from inference.model.memory import release_freed_memory

    model = AutoModelForCausalLM.from_pretrained(str(engine.folder), dtype=torch.float32)
    yield model.eval()
    del model
    release_freed_memory()


@pytest.fixture(scope="session")
def gemma_gguf():
    """The assembled Gemma 3 270M GGUF (skips, saying how to install it, where the package is missing)."""
    from inference.model.packages import GEMMA3_270M, gemma3_270m_gguf_path, install_hint, is_installed

    if not is_installed(GEMMA3_270M):
        pytest.skip(f"{GEMMA3_270M} is not installed: {install_hint(GEMMA3_270M)}")
    return gemma3_270m_gguf_path()


@pytest.fixture(scope="session")
def gemma_engine(gemma_gguf):
    """Gemma 3 270M through our engine, fp32 on CPU, loaded once (converted once into the user cache)."""
    from inference import load_engine

    return load_engine(model="gemma-3-270m", device="cpu", dtype="float32")


@pytest.fixture(scope="session")
def gemma_gguf_engine(gemma_gguf):
    """Gemma 3 270M on the file's own blocks (``quant="gguf"``: Q4_K and Q8_0 kept, the rest 8-bit rows), loaded once."""
    from inference import load_engine

    return load_engine(model=gemma_gguf, device="cpu", quant="gguf", kernel="int4pack")


@pytest.fixture(scope="module")
def gemma_reference(gemma_gguf):
    """transformers' Gemma3ForCausalLM as transformers itself reads the GGUF (its conversion cached once)."""
    from inference.bench.references import transformers_gguf_model
    from inference.model.memory import release_freed_memory

    model = transformers_gguf_model(gemma_gguf)
    yield model
    del model
    release_freed_memory()


@pytest.fixture
def ui_engine(engine, monkeypatch):
    """Point the UI helpers' model lookup at the session's engine instead of loading a second one."""
    import streamlit as st

    from ui.common import resources

    monkeypatch.setattr(resources, "engine_for", lambda model: engine)  # every client is built on it
    st.cache_data.clear()
    st.cache_resource.clear()
    yield engine
    st.cache_data.clear()
    st.cache_resource.clear()


@pytest.fixture
def both_models(engine, gemma_engine, monkeypatch):
    """The UI's engine lookup answers each model's name with the session's engine for it (no second load)."""
    import streamlit as st

    GEMMA = "gemma-3-270m"  # the packaged Gemma 3 270M's name in the model picker
    from ui.common import resources

    monkeypatch.setattr(
        resources, "load_engine", lambda model=None, **kwargs: gemma_engine if model == GEMMA else engine
    )
    st.cache_data.clear()
    st.cache_resource.clear()
    yield {"SmolLM2-135M-Instruct": engine, GEMMA: gemma_engine}
    st.cache_data.clear()
    st.cache_resource.clear()


@pytest.fixture
def ui_engine_and_server(engine, monkeypatch):
    """The helpers, pointed at the session's engine (and a server over it), with empty caches."""
    import streamlit as st

    from inference import EngineServer, ServeConfig
    from ui.common import resources

    server = EngineServer(engine, ServeConfig(n_slots=4, max_waiting=4, slot_capacity=512))
    monkeypatch.setattr(resources, "engine_for", lambda model: engine)  # every client is built on them
    monkeypatch.setattr(resources, "server_for", lambda model: server)
    st.cache_data.clear()
    st.cache_resource.clear()
    yield engine
    st.cache_data.clear()
    st.cache_resource.clear()
    server.close()


# The files that take half a minute or more, longest first (seconds on one worker of a full run, 2 cores:
# docs/testing.md). The test command hands whole files to its two workers in this order (``--no-loadscope-reorder``:
# xdist's own order is by number of tests, which started the 3-test page sweep at 822 s of 1,063 and left the workers
# ending 54 s apart), so only short files are left for the end. (A full run puts the three Chromium files in a process
# of their own beside the workers, scripts/run-tests.sh; a selection runs them on the workers, first.)
LONG_FILES = (
    "test_browser.py",  # 303
    "test_sweep.py",  # 111
    "test_engine_gemma.py",  # 90
    "test_speculative.py",  # 57
    "test_app_gemma.py",  # 46
    "test_decode_step.py",  # 42
    "test_process_server.py",  # 39
    "test_decode_step_gemma.py",  # 38
    "test_browser_lesson.py",  # 36
    "test_robustness.py",  # 34
    "test_same_numbers.py",  # 32
    "test_load.py",  # 30
    "test_browser_paged_kv.py",  # 28
    "test_app_speculative.py",  # 28
)


def pytest_collection_modifyitems(items):
    """Every test that uses a real engine is a ``real_model`` test, marked or not; the long files first (each file's
    own order kept)."""
    for item in items:
        if {"engine", "gemma_engine", "gguf_engine", "gemma_gguf_engine"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.real_model)
    rank = {name: index for index, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FILES)))  # stable: everything else as collected
