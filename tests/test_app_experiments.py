"""AppTest for the Experiments page: a link's intervention restored into the widgets and the numbers; the sweeps.

The real model runs the link test (no sweep: those are 30 batched forwards each); the sweeps
run on a tiny random Llama offered through the allowlist (2 layers, 4 heads), where the
clicks, the progress and the heatmaps' shapes and anchors are checked in milliseconds.
"""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from inference import load_engine
from tests.apptest_utils import APP, assert_clean, chart, plotly_array, texts
from tests.tiny_models import save_folder, tiny_llama
from ui.experiments import settings as exp

SCRIPT = "pages/experiments.py"
TIMEOUT = 180  # the first run loads the model; a page run is ~8 forwards on 2 shared cores


def open_with(query: dict[str, str]) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update(query)
    at.run()
    at.switch_page(SCRIPT)
    at.run()
    assert_clean(at)
    return at


@pytest.mark.real_model
def test_a_link_restores_the_intervention_and_its_effect():
    at = open_with({"prompt": exp.EXAMPLE_PROMPT, "off": "13.8,3.8,99.1", "cut": "12-1"})
    assert list(at.multiselect(key="_w_exp_heads").value) == [(3, 8), (13, 8)]
    assert list(at.multiselect(key="_w_exp_edges").value) == [(12, 1)]
    assert "left out `'99.1'`" in texts(at.warning)  # the head no model has is named, the rest restored
    assert "head L3 H8 off, head L13 H8 off, edge 12 → 1 cut" in texts(at.markdown)
    bars = chart(at, "exp_before_after")["data"]
    before, after = plotly_array(bars[0]["y"]), plotly_array(bars[1]["y"])
    assert bars[0]["x"][0] == "·cat" and before[0] > 0.5 and after[0] < before[0] / 2  # cutting "the" → "cat" hurts
    top = at.metric[0]
    assert top.value.startswith("·cat →") and top.delta == ("same" if top.value.endswith("·cat") else "changed")
    lens = chart(at, "exp_lens")
    assert lens["layout"]["shapes"], "the reachable region is shaded"
    attribution = next(m.value for m in at.markdown if m.value.startswith("The logit of"))
    assert "within the rounding bound" in attribution
    # the link keeps what is shown (the bad head dropped)
    assert at.query_params["off"] == "3.8,13.8" and at.query_params["cut"] == "12-1"
    # scale the heads instead of zeroing them: new numbers, same page
    at.radio(key="_w_exp_head_mode").set_value("scale").run()
    at.slider(key="_w_exp_head_factor").set_value(2.0).run()
    assert_clean(at)
    assert "head L3 H8 × 2, head L13 H8 × 2" in texts(at.markdown)
    at.button(key="exp_clear").click().run()
    assert "No intervention is chosen yet" in texts(at.info)
    bars = chart(at, "exp_before_after")["data"]
    assert np.array_equal(plotly_array(bars[0]["y"]), plotly_array(bars[1]["y"]))


@pytest.fixture(scope="module")
def tiny_offered(tmp_path_factory, tokenizer_folder):
    """A tiny random Llama offered as ``tiny-exp``, and a corrupted prompt whose top answer differs from the clean one."""
    folder = save_folder(tiny_llama(), tmp_path_factory.mktemp("tiny-exp"), tokenizer_folder)
    engine = load_engine(model=folder, device="cpu", dtype="float32")
    clean_ids = engine.encode_prompt(exp.DEFAULT_CLEAN)
    clean_top = int(engine.recompute_last(clean_ids).argmax())
    for word in ("dog", "bird", "fox", "man", "cow", "rat", "owl", "pig"):
        corrupt = exp.DEFAULT_CLEAN.replace("cat", word)
        ids = engine.encode_prompt(corrupt)
        if len(ids) == len(clean_ids) and int(engine.recompute_last(ids).argmax()) != clean_top:
            break
    else:
        pytest.fail("no corrupted prompt gives the tiny model another answer")
    patch = pytest.MonkeyPatch()
    patch.setenv("LLM_EXPLORER_MODELS", f"tiny-exp={folder}")
    yield corrupt
    patch.undo()


def test_the_sweeps_show_progress_and_draw_their_heatmaps(tiny_offered):
    at = open_with({"model": "tiny-exp", "prompt": exp.DEFAULT_CLEAN})
    at.button(key="exp_sweep_run").click().run()
    assert_clean(at)
    heads = plotly_array(chart(at, "exp_head_importance")["data"][0]["z"])
    assert heads.shape == (2, 4) and np.isfinite(heads).all()
    assert "The heads whose change lowers it most" in texts(at.markdown)
    at.text_input(key="_w_exp_corrupt").input(tiny_offered).run()
    at.button(key="exp_patch_run").click().run()
    assert_clean(at)
    restored = plotly_array(chart(at, "exp_patching_map")["data"][0]["z"])
    assert restored.shape == (2, 13)
    assert restored[:, 0].tolist() == [0.0, 0.0]  # before "cat"/"dog" both runs are the same: not run, 0
    assert abs(restored[-1, -1] - 1.0) < 1e-3  # the last block's stream at the last position is the clean one
    assert at.query_params["sweep"] == "1" and at.query_params["patching"] == "1"
    # the same prompt twice is refused with a message, and the rest of the page stays as it was
    at.text_input(key="_w_exp_corrupt").input(exp.DEFAULT_CLEAN).run()
    assert_clean(at)
    assert "there is nothing to restore" in texts(at.error)
    assert np.array_equal(plotly_array(chart(at, "exp_head_importance")["data"][0]["z"]), heads)
