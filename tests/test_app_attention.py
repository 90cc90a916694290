"""AppTest for the Attention page: its widgets and guided buttons re-render it."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from tests import apptest_utils
from tests.apptest_utils import N_TOKENS, READING_PAGES, assert_clean, chart, plotly_array
from ui.common import state

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
    assert not np.allclose(
        np.nan_to_num(first), np.nan_to_num(plotly_array(chart(at, "attention_heatmap")["data"][0]["z"]))
    )
    next(b for b in at.button if b.key.startswith("att_show_") and b.label.endswith("→ “cat”")).click().run()
    assert_clean(at)
    steps = chart(at, "score_steps")
    probs = plotly_array(steps["data"][3]["y"])
    assert probs.shape == (N_TOKENS,) and abs(probs.sum() - 1) < 1e-4 and probs[1] == probs.max()  # "it" -> "cat"


def _listed_heads(at: AppTest) -> list[str]:
    """The heads the page's caption lists as sending the pronoun to the word: "L13 H8 (80%)", ..."""
    caption = next(c.value for c in at.caption if c.value.startswith("Heads putting at least"))
    return caption.split("weight): ", 1)[1].rstrip(".").split(", ")


def _head(item: str) -> tuple[int, int]:
    """(layer, head) of one listed item, "L13 H8 (80%)" -> (13, 8)."""
    layer, head = item.split(" (")[0].split(" ")
    return int(layer[1:]), int(head[1:])


def test_switching_heads_off_shows_the_effect_on_the_next_token(engine):
    """The heads that send "it" to "cat" come from the maps, one click switches them off, the link carries them."""
    at = open_page("attention")
    listed = _listed_heads(at)
    _, trace = engine.traced_forward(engine.encode_prompt("The cat sat on the mat because it was tired."))
    expected = {
        f"L{l} H{h}"
        for l, layer in enumerate(trace.layers)
        for h in range(engine.config.n_heads)
        if layer.attention_probs[0, h, 7, 1] >= 0.3
    }  # query " it" (7) -> key " cat" (1)
    assert {item.split(" (")[0] for item in listed} == expected and expected
    at.button(key="att_heads_it_cat").click().run()
    assert_clean(at)
    effect = next(m.value for m in at.markdown if "head(s) off" in m.value)
    assert effect.startswith(f"With {len(listed)} head(s) off")
    bars = chart(at, "att_switch_effect")["data"]
    assert len(bars) == 2 and not np.array_equal(plotly_array(bars[0]["y"]), plotly_array(bars[1]["y"]))
    heads = sorted(_head(item) for item in listed)
    assert at.query_params["off"] == ",".join(f"{l}.{h}" for l, h in heads)  # the link's own notation
    at.button(key="att_heads_reset").click().run()
    assert "No head is switched off." in " ".join(c.value for c in at.caption)


def test_a_press_on_the_sending_heads_button_keeps_a_head_switched_off_since_it_was_drawn(engine):
    """The button switches its heads off beside those off at the press: a copy of it still on screen from an earlier
    run (the browser shows it while the next run draws) must not drop a head switched off in between."""
    at = open_page("attention")
    sending = {_head(item) for item in _listed_heads(at)}
    config = engine.config
    between = next((l, h) for l in range(config.n_layers) for h in range(config.n_heads) if (l, h) not in sending)
    button = at.button(key="att_heads_it_cat")
    at.session_state[state.EXP_HEADS] = (between,)  # switched off after the button was drawn
    button.click().run()
    assert_clean(at)
    assert set(at.session_state[state.EXP_HEADS]) == sending | {between}
