"""The one token notation (ui.token_text): pieces of a character as <0xNN>, whole characters as text."""

from __future__ import annotations

import pytest

from ui.compute.token_text import bytes_text, sequence_text, token_texts


def test_bytes_that_are_not_a_whole_character_are_hex():
    pizza = "🍕".encode()
    assert bytes_text(pizza) == "🍕"
    assert bytes_text(pizza[:2]) == "<0xF0><0x9F>"
    assert bytes_text(pizza[2:]) == "<0x8D><0x95>"
    assert bytes_text("é".encode() + pizza[:1]) == "é<0xF0>"  # a whole character stays, the piece does not
    assert bytes_text(b" on") == " on"


@pytest.mark.real_model
def test_every_page_s_notation_comes_from_the_tokenizer_bytes(engine):
    ids = engine.tokenizer.encode("I love pizza 🍕🔥")
    texts = token_texts(engine.tokenizer, ids)
    assert "".join(texts) != engine.tokenizer.decode(ids) and "\ufffd" not in "".join(texts)
    assert any(t.startswith("<0xF0>") for t in texts)
    assert sequence_text(engine.tokenizer, ids) == "I love pizza 🍕🔥"  # decoded together: whole again
    assert sequence_text(engine.tokenizer, ids[:-1]).endswith(">")  # cut inside 🔥: its bytes as <0xNN>
    special = sorted(engine.tokenizer.special_ids)[0]
    assert token_texts(engine.tokenizer, [special]) == [engine.tokenizer.raw_tokens([special])[0]]
