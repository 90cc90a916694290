"""AppTest for the Attention page: its widgets and guided buttons re-render it."""
from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from tests import apptest_utils
from tests.apptest_utils import N_TOKENS, READING_PAGES, assert_clean, chart, plotly_array

pytestmark = pytest.mark.real_model

TIMEOUT = 90  # the first run loads the model; 2 shared cores
PAGES = READING_PAGES


def open_page(page: str, prompt: str | None = None) -> AppTest:
    return apptest_utils.open_page(PAGES[page][0], prompt, TIMEOUT)


def test_attention_widgets_and_guided_buttons():
    at = open_page("attention")
    assert at.selectbox(key="_w_att_query").value == 7  # " it" is the default query
    first = plotly_array(chart(at, "attention_heatmap")["data"][0]["z"])
    at.slider(key="_w_att_layer").set_value(13).run()
    assert_clean(at)
    assert not np.allclose(np.nan_to_num(first), np.nan_to_num(plotly_array(chart(at, "attention_heatmap")["data"][0]["z"])))
    at.button(key="att_show_cat").click().run()
    assert_clean(at)
    steps = chart(at, "score_steps")
    probs = plotly_array(steps["data"][3]["y"])
    assert probs.shape == (N_TOKENS,) and abs(probs.sum() - 1) < 1e-4 and probs[1] == probs.max()  # "it" -> "cat"
