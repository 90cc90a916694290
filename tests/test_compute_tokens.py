"""The token helpers (ui.compute_tokens) on the real model: BPE merges, token pieces, word-level, bytes, tiny BPE."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as hst

MODEL = "SmolLM2-135M-Instruct"  # the name every helper below is asked about


@pytest.fixture
def real(ui_engine):
    """The session's engine, with the UI helpers' model lookup pointed at it (``ui_engine`` in conftest.py)."""
    return ui_engine


@pytest.mark.real_model
@pytest.mark.parametrize("word", ["thecatsatonthemat", " inference", " tokenization", "héllo", " 🙂"])
def test_replayed_merges_match_the_tokenizer(real, word):
    from ui.tokenization.compute import bpe_steps, model_piece_text

    steps = bpe_steps(MODEL, word)
    assert steps[0].merged is None and all(s.rank is not None for s in steps[1:])
    assert steps[-1].parts == real.tokenizer.raw_tokens(real.tokenizer.encode(word))
    for step in steps:  # the texts the page draws, made with the steps: each part's own text
        assert step.texts == [model_piece_text(MODEL, part) for part in step.parts]
        assert step.merged_texts == (step.merged and tuple(model_piece_text(MODEL, part) for part in step.merged))


@pytest.mark.real_model
def test_token_pieces_are_byte_exact_and_specials_flagged(real):
    from ui.tokenization.compute import token_bytes, tokenize

    text = "héllo 🙂 שלום\x00\x07\n\tend"
    view = tokenize(MODEL, text, False)
    assert b"".join(token_bytes(r) for r in view.raw) == text.encode("utf-8")
    assert "<0xD7>" in view.pieces and view.n_bytes == len(text.encode("utf-8"))
    chat = tokenize(MODEL, "The cat", True)
    assert any(chat.special) and "<|im_start|>" in chat.pieces


@pytest.mark.real_model
def test_word_level_bytes_and_tiny_bpe(real):
    from ui.tokenization.compute import UNK, id_neighbours, raw_bytes, train_tiny_bpe, word_level

    assert [w for w, _ in word_level("the cat thecatsatonthemat", "the cat sat")] == ["the", "cat", UNK]
    assert raw_bytes("é") == [0xC3, 0xA9]
    tiny = train_tiny_bpe("the cat sat on the mat. " * 5, 280, "the cat")
    assert 0 < len(tiny.merges) <= 280 - 256 and tiny.tokens
    assert ("a", "t") in tiny.merges[:5]
    around = id_neighbours(MODEL, " cat")
    assert [i for i, _, _ in around.rows] == list(range(2641, 2648)) and around.centre_id == 2644
    assert (2644, " cat", 2392) in around.rows  # the merge that made " cat" (ids follow merge ranks)
    assert around.word_pieces == [" cat"]


@pytest.mark.parametrize(
    "text, seen, code_points",
    [("👨\u200d👩\u200d👧", 1, 5), ("🇫🇷", 1, 2), ("e\u0301", 1, 2), ("cat", 3, 3), ("", 0, 0)],
)
def test_characters_are_counted_as_a_reader_sees_them(text, seen, code_points):
    from ui.tokenization.compute import characters

    assert characters(text) == seen and len(text) == code_points


@pytest.mark.real_model
def test_a_token_holding_part_of_a_character_is_flagged_from_its_bytes(real):
    from ui.tokenization.compute import tokenize
    from ui.tokenization.prompt import prompt_notes

    family = "my 👨\u200d👩\u200d👧"
    view = tokenize(MODEL, family, False)
    assert view.n_chars == 4 and view.n_code_points == 8
    assert view.partial == [p.startswith("<0x") or "<0x" in p for p in view.pieces] and any(view.partial)
    assert "hold only part of a character" in prompt_notes(family, (), view.partial)[0]
    whole = [False] * len(view.partial)  # a tokenizer with whole tokens for them (Gemma): no split is claimed
    assert "no character is split" in prompt_notes(family, (), whole)[0]


@given(text=hst.text(min_size=1, max_size=40), outside=hst.integers(0, 0x110000))
def test_a_replays_start_counts_its_characters_whatever_falls_back_to_bytes(text, outside):
    """SentencePiece's start (``Tokenizer.bpe_symbols``): each code point that is in the vocabulary (here: below
    ``outside``) is one symbol, each other one its UTF-8 byte tokens. The counts recover the word's code points."""
    from ui.tokenization.compute import replay_start

    symbols = []
    for ch in text:
        symbols += [ch] if ord(ch) < outside else [f"<0x{byte:02X}>" for byte in ch.encode()]
    start = replay_start(symbols)
    fallen = [ch for ch in text if ord(ch) >= outside]
    assert start.symbols == len(symbols) and start.characters == len(text)
    assert start.fallback_characters == len(fallen)
    assert start.fallback_bytes == sum(len(ch.encode()) for ch in fallen)
