"""A class server's engine work in a process of its own (LLM_EXPLORER_SERVER=process): the pages show the numbers
the in-process path shows, and a setting the app does not know stops with the choices."""

from __future__ import annotations

import numpy as np
import pytest
import streamlit as st
import torch
from streamlit.testing.v1 import AppTest

from inference import SamplingParams, settings
from tests import apptest_utils
from tests.apptest_utils import PREDICTING_PAGES, READING_PAGES, assert_clean, chart, plotly_array, texts
from tests.test_batching import solo
from tests.tolerances import model_tolerance
from ui.common import resources
from ui.sampling import compute as compute_sampling

pytestmark = pytest.mark.real_model

TIMEOUT = 180  # the first run loads the model here, and once more in the child
MODEL = "SmolLM2-135M-Instruct"
PROMPT = "The dog slept by the door because"  # continuations no other test has stored
# page: the script and the charts whose numbers come from the engine's work (a forward, the continuations)
CHECKED = {
    "attention": (READING_PAGES["attention"][0], ["attention_heatmap", "score_steps"]),
    "logits": (PREDICTING_PAGES["logits"][0], ["logits_bar", "stage_figure"]),
    "sampling": (PREDICTING_PAGES["sampling"][0], ["real_ranges", "greedy_vs_sampled", "two_settings"]),
}


def _numbers(at: AppTest, keys: list[str]) -> list:
    return [chart(at, key)["data"] for key in keys]


def _continuation_bound() -> float:
    """How far the Sampling page's probabilities may move between two runs of its four continuations.

    A continuation's forwards share a batch with whatever else the server runs at that moment, and a
    batch of other rows sums in another order (``inference/model/tolerances.py``): its tokens stay, its logits move
    by at most ``model_tolerance``. A softmax moves by at most twice its inputs' largest change, and the
    inputs are the logits over T (the page's smallest T > 0 is setting A's, 0.3).
    """
    engine = resources.engine_for(MODEL)
    ids = engine.encode_prompt(PROMPT)
    settings = [SamplingParams(temperature=t, seed=0, max_new_tokens=10) for t in (0.0, 0.8, 0.3, 1.5)]
    logits = torch.stack([step for params in settings for step in solo(engine, ids, params)[1]])  # (40, V)
    return 2 * model_tolerance(engine.config, logits, context=len(ids) + 10) / 0.3


def _same(here, there, bound: float, where: str = "") -> None:
    """Equal strings, ints and structure; floats (and Plotly's encoded arrays) within ``bound``."""
    if isinstance(here, dict) and "bdata" in here:
        a, b = plotly_array(here), plotly_array(there)
        assert a.shape == b.shape and np.allclose(a, b, rtol=0, atol=bound), where
    elif isinstance(here, dict):
        assert isinstance(there, dict) and here.keys() == there.keys(), where
        for key in here:
            _same(here[key], there[key], bound, f"{where}.{key}")
    elif isinstance(here, list):
        assert isinstance(there, list) and len(here) == len(there), where
        for index, (a, b) in enumerate(zip(here, there)):
            _same(a, b, bound, f"{where}[{index}]")
    elif isinstance(here, float):
        assert abs(here - there) <= bound, f"{where}: {here} vs {there}"
    else:
        assert here == there, f"{where}: {here!r} vs {there!r}"


def _clear() -> None:
    settings.reload()  # a running app reads its settings once, at start: this test starts it again
    resources.server_for.clear()
    resources.client_for.clear()
    compute_sampling.continuation_store.clear()
    st.cache_data.clear()  # the cached forwards, so the second pass computes them again


def test_the_pages_on_a_process_server_show_the_numbers_of_the_in_process_path(monkeypatch):
    """Float32 in both (the default weights): the child's forwards and continuations equal this process's."""
    from inference import EngineServer, ProcessServer

    here = {}
    for page, (script, keys) in CHECKED.items():
        at = apptest_utils.open_page(script, PROMPT, TIMEOUT)
        assert_clean(at)
        here[page] = _numbers(at, keys)
    assert isinstance(resources.server_for(MODEL), EngineServer)
    bound = _continuation_bound()
    monkeypatch.setenv("LLM_EXPLORER_SERVER", "process")
    _clear()
    try:
        for page, (script, keys) in CHECKED.items():
            at = apptest_utils.open_page(script, PROMPT, TIMEOUT)
            assert_clean(at)
            if page == "sampling":  # batched with whatever ran beside it: the same tokens, probabilities within
                _same(here[page], _numbers(at, keys), bound, page)
            else:  # one forward of the same shape on the same model and threads: the very same numbers
                assert _numbers(at, keys) == here[page], page
        server = resources.server_for(MODEL)
        assert isinstance(server, ProcessServer) and server.recent_steps, "the child generated the continuations"
    finally:
        resources.server_for(MODEL).close()
        _clear()


def test_a_server_setting_the_app_does_not_know_stops_with_the_choices(monkeypatch):
    monkeypatch.setenv("LLM_EXPLORER_SERVER", "forked")
    at = apptest_utils.open_page(PREDICTING_PAGES["sampling"][0], None, TIMEOUT)
    assert not at.exception
    assert "LLM_EXPLORER_SERVER='forked': use one of thread, process" in texts(at.error)


def test_a_prefix_cache_setting_the_app_does_not_know_stops_with_the_choices(monkeypatch):
    monkeypatch.setenv("LLM_EXPLORER_PREFIX_CACHE", "maybe")
    at = apptest_utils.open_page(PREDICTING_PAGES["sampling"][0], None, TIMEOUT)
    assert not at.exception
    assert "LLM_EXPLORER_PREFIX_CACHE='maybe': use one of on, off" in texts(at.error)


@pytest.mark.parametrize("value", ["0", "many", "-3", "1000"])
def test_a_slot_count_the_app_cannot_use_stops_with_the_range(monkeypatch, value):
    monkeypatch.setenv("LLM_EXPLORER_SLOTS", value)
    at = apptest_utils.open_page(PREDICTING_PAGES["sampling"][0], None, TIMEOUT)
    assert not at.exception
    assert f"LLM_EXPLORER_SLOTS='{value}': use a whole number from 1 to 256" in texts(at.error)
