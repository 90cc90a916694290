"""The one token notation (ui.token_text): pieces of a character as <0xNN>, whole characters as text."""

from __future__ import annotations

import pytest

from ui.common.token_text import bytes_text, sequence_text, token_texts, visible


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


@pytest.mark.parametrize(
    "text, shown",
    [
        ("\u00a0", "⍽"),  # a no-break space alone: a token of its own in both tokenizers
        ("\u200d", "⟨ZWJ⟩"),
        ("\u200b", "⟨ZWSP⟩"),
        ("\ufeff", "⟨BOM⟩"),
        ("\u202e", "⟨U+202E⟩"),  # a bidi override would turn the rest of the chip around
        ("\u2003", "⟨U+2003⟩"),  # an em space
        ("\ufe0f", "⟨U+FE0F⟩"),  # a variation selector with no character before it
        (" \u200d", "·⟨ZWJ⟩"),
        ("\u00a0cat", "⍽cat"),
        (" a\nb\tc\x00\x07\x7f", "·a↵b→c␀␇␡"),
    ],
)
def test_a_character_that_draws_nothing_is_shown_as_a_symbol(text, shown):
    assert visible(text) == shown


@pytest.mark.parametrize("text", ["👨\u200d👩\u200d👧", "❤\ufe0f", "👍🏽", "e\u0301", "مرحبا", "🇫🇷"])
def test_a_joiner_or_selector_inside_a_drawn_character_stays(text):
    assert visible(text) == text  # the emoji, flag or accented letter is drawn whole


def test_every_chip_and_chart_label_uses_the_one_rule():
    from ui.common import token_text
    from ui.logits import figures as logits
    from ui.tokenization import figures as tokens

    assert tokens.visible is visible and logits.visible_token is token_text.visible_token  # one definition each
    assert "⟨ZWJ⟩" in tokens.token_chips_html(["\u200d"], [8205])
    assert logits.visible_token("\u00a0") == "⍽"  # the logit lens's and the bar charts' labels
    labels = tokens.make_token_id_chart(["\u00a0", "\u200d"], [1, 2]).data[0].x
    assert list(labels) == ["0: ⍽", "1: ⟨ZWJ⟩"]
