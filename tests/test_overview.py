"""The Overview picture: its numbers are one traced forward's, each part links to a real page, the SVG is well formed."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree

import numpy as np
import pytest
import streamlit as st

from inference.serving.client import EngineClient
from ui.common.navigation import PAGES
from ui.overview import compute as compute_overview
from ui.overview.figures import PAGE_OF, overview_svg

MODEL = "SmolLM2-135M-Instruct"
PROMPT = "The cat sat on the mat because it was tired."


@pytest.fixture
def picture(engine, monkeypatch):
    """The overview of the default prompt, computed on the session's engine, with its forwards counted."""
    calls = []
    real = engine.traced_forward

    def counted(*args, **kwargs):
        calls.append("traced")
        return real(*args, **kwargs)

    st.cache_data.clear()
    monkeypatch.setattr(engine, "traced_forward", counted)
    client = EngineClient(engine)  # the page's client, on the session's engine
    monkeypatch.setattr(compute_overview, "client_for", lambda model: client)
    data = compute_overview.overview(MODEL, PROMPT, False)
    yield data, calls
    st.cache_data.clear()


def test_the_picture_runs_one_forward_and_shows_its_numbers(picture, engine):
    data, calls = picture
    assert calls == ["traced"]  # light: one forward for the whole picture
    ids = engine.encode_prompt(PROMPT)
    assert data.token_ids == ids[-6:] and data.prompt_tokens == len(ids) == data.traced_tokens
    rows = engine.model.embed.weight[ids[-6:], :16].detach().float().numpy()
    np.testing.assert_array_equal(data.embeddings, rows)  # SmolLM2 reads its rows unscaled
    logits = engine.forward_logits(ids)[-1].double()
    top = logits.topk(5)
    assert data.top_ids == top.indices.tolist()
    np.testing.assert_allclose(data.top_probs, logits.softmax(-1)[top.indices].numpy(), rtol=1e-4)
    assert 0 < data.attention.sum() + data.attention_elsewhere <= 1 + 1e-5 and 0 <= data.layer < data.n_layers


def test_every_part_opens_a_page_and_the_svg_parses(picture):
    data, _ = picture
    svg = overview_svg(data)
    tree = ElementTree.fromstring(svg)
    parts = [el for el in tree.iter() if el.get("class") == "ov-part"]
    pages = {spec.url_path for spec in PAGES}
    assert {el.get("data-part") for el in parts} == set(PAGE_OF)  # text, tokens, ids, … the loop
    assert all(el.get("data-page") in pages and el.get("tabindex") == "0" for el in parts)
    text = "".join(tree.itertext())
    assert "Block" in text and f"{data.top_probs[0] * 100:.1f}%" in text  # the logits' top probability, as shown
    assert all(f"{i:,}" in text for i in data.token_ids)
