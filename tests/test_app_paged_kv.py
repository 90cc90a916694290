"""AppTest for the Paged KV cache page: a deep link (scenario, block size, step) opens the replay where it says,
bad values are clamped or ignored with a note, and the step slider moves the grid and the tables."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.apptest_utils import assert_clean, chart, open_link, plotly_array

pytestmark = pytest.mark.real_model
TIMEOUT = 240  # the first run loads the model and replays the scenario


def open_paged(query: dict[str, str]) -> AppTest:
    return open_link("pages/paged_kv.py", query, TIMEOUT)


def warnings(at: AppTest) -> str:
    return " ".join(w.value for w in at.warning)


def test_a_deep_link_opens_the_samples_replay_at_its_step_and_the_slider_replays_it():
    at = open_paged({"scenario": "samples", "block_size": "4", "paged_step": "1"})
    assert at.session_state["paged_scenario"] == "samples" and at.session_state["paged_block_size"] == 4
    assert at.slider(key="_w_paged_step").value == 1
    grid = chart(at, "paged_grid")
    assert (
        "after step 1" in grid["layout"]["title"]["text"] and "blocks of 4 positions" in grid["layout"]["title"]["text"]
    )
    # step 1 is the first decode: the forked samples share the prompt's partly filled last block, so the
    # first writers copy it (the prompt is 13 tokens for SmolLM2: 13 % 4 == 1)
    page = " ".join(m.value for m in at.markdown)
    assert "copy-on-write gives it block" in page
    tables = chart(at, "paged_tables")["data"][0]
    counts = plotly_array(tables["z"])
    assert counts.shape[0] == 4  # four samples, one table each
    assert dict(at.query_params) == {"scenario": "samples", "block_size": "4", "paged_step": "1"}

    at.slider(key="_w_paged_step").set_value(0).run()
    assert_clean(at)
    assert "after step 0" in chart(at, "paged_grid")["layout"]["title"]["text"]
    page = " ".join(m.value for m in at.markdown)
    assert "is forked from the sequence whose prefill computed the same prompt" in page
    counts = plotly_array(chart(at, "paged_tables")["data"][0]["z"])
    assert (counts[:, 0] == 4).all()  # after the fork every sample's first block is shared by all four
    assert "paged_step" not in at.query_params  # back at the default: left out of the link


def test_bad_link_values_are_clamped_or_ignored_with_a_note():
    at = open_paged({"scenario": "everything", "block_size": "0", "paged_step": "9999"})
    notes = warnings(at)
    assert "`scenario` ignored" in notes
    assert "`block_size` = `'0'` is outside 1…32: clamped to 1." in notes
    assert "`paged_step` = `'9999'` is outside 0…500: clamped to 500." in notes
    last = int(at.slider(key="_w_paged_step").max)
    assert f"Step 500 is past this replay's last step ({last}): showing step {last}." in notes
    assert at.session_state["paged_scenario"] == "class" and at.session_state["paged_block_size"] == 1
    assert at.slider(key="_w_paged_step").value == last
    assert at.query_params["paged_step"] == str(last)
    assert chart(at, "paged_memory")["data"][0]["name"] == "slot cache: reserved"
