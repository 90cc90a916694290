"""A long prompt's tail for a traced forward: its last tokens after its BOS, and the words that say which part."""

from __future__ import annotations

import pytest
import streamlit as st
from hypothesis import given
from hypothesis import strategies as st_h

from ui.common.prompt_tail import prompt_tail

BOS = 2
START = (BOS, "<bos>")  # the tokenizer's ``bos_token``
prompts = st_h.lists(st_h.integers(0, 50), min_size=1, max_size=300)


@given(prompts, st_h.integers(2, 200), st_h.sampled_from([None, START]))
def test_the_tail_fits_keeps_the_end_and_says_which_part(ids, limit, start):
    tail, words = prompt_tail(ids, limit, start)
    assert len(tail) == min(len(ids), limit)
    if len(ids) <= limit:
        assert tail == ids and words == f"all {len(ids):,} of its tokens"
    elif start is not None and ids[0] == BOS:  # the BOS, then the last limit - 1 tokens
        assert tail == [ids[0]] + ids[-(limit - 1) :] and words == f"its first token and its last {limit - 1:,}"
    else:
        assert tail == ids[-limit:] and words == f"its last {limit:,}"
    assert tail[-1] == ids[-1]  # the prediction is still made at the prompt's end


def test_a_first_token_that_is_not_the_bos_is_not_kept():
    assert prompt_tail([7, 1, 2, 3, 4], 3, START) == ([2, 3, 4], "its last 3")
    assert prompt_tail([BOS, 1, 2, 3, 4], 3, START) == ([BOS, 3, 4], "its first token and its last 2")


def test_a_tail_of_one_token_is_refused():
    with pytest.raises(ValueError, match="at least 2"):
        prompt_tail([BOS, 1, 2], 1, START)


class _Stop(Exception):
    pass


class _Client:
    """A client whose tokenizer puts a BOS first, and whose traced forwards record the ids they were given."""

    def __init__(self, n: int) -> None:
        self.ids = [BOS] + [10 + i % 40 for i in range(n - 1)]
        self.traced: list[list[int]] = []

        class Tokenizer:
            bos_token = START

        self.tokenizer = Tokenizer()

    def encode_prompt(self, prompt, chat=False):
        return list(self.ids)

    def last_position(self, ids):
        self.traced.append(list(ids))
        raise _Stop

    def trace(self, ids, keep_from):
        self.traced.append(list(ids))
        raise _Stop


@pytest.mark.parametrize("page", ["overview", "logit_lens"])
def test_the_traced_pages_keep_a_long_prompts_bos(page, monkeypatch):
    """The Overview picture and the logit lens trace a long prompt by its end, and keep its BOS in front (Gemma reads
    a text without it as none it was trained on)."""
    from ui.logits import compute as logits_compute
    from ui.overview import compute as overview_compute

    module, run, limit = {
        "overview": (overview_compute, overview_compute.overview, overview_compute.MAX_TOKENS),
        "logit_lens": (logits_compute, logits_compute.traced_prompt, logits_compute.MAX_TRACED_TOKENS),
    }[page]
    client = _Client(3 * limit)
    monkeypatch.setattr(module, "client_for", lambda model: client)
    st.cache_data.clear()
    with pytest.raises(_Stop):
        run("a model", "a long prompt", False)
    st.cache_data.clear()
    assert client.traced == [[BOS] + client.ids[-(limit - 1) :]]
