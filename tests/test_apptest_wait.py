"""The suite's wait for an ``AppTest`` run (``tests/conftest.py``, ``wait_for_app_runs_without_polling``) returns
when the script ends and still times out as Streamlit's own does."""

from __future__ import annotations

import time

import pytest
from streamlit.testing.v1 import AppTest, local_script_runner


def _short_page():
    import streamlit as st

    st.markdown("done")


def _slow_page():
    import time

    import streamlit as st

    st.markdown("started")
    for _ in range(50):  # a Streamlit call each 0.1 s: where a stop asked for takes effect
        time.sleep(0.1)
        st.empty()


def test_the_suite_waits_with_its_own_wait():
    assert "wait_for_app_runs_without_polling" in local_script_runner.require_widgets_deltas.__qualname__


def test_a_run_returns_when_its_script_ends():
    started = time.perf_counter()
    for _ in range(20):  # a quick script, many times: each run is seen to end, none waits out its timeout
        app = AppTest.from_function(_short_page, default_timeout=10).run()
        assert [m.value for m in app.markdown] == ["done"]
    assert time.perf_counter() - started < 10


def test_a_run_past_its_timeout_is_stopped_and_said():
    app = AppTest.from_function(_slow_page, default_timeout=0.5)
    started = time.perf_counter()
    with pytest.raises(RuntimeError, match=r"AppTest script run timed out after 0\.5\(s\)"):
        app.run()
    assert time.perf_counter() - started < 5  # stopped, not waited for to the end
