"""Which tokens of a prompt are the user's own text, and the words they make.

A prompt as the model reads it can hold tokens the user never typed: a start-of-text token the
tokenizer adds (Gemma's ``<bos>``) and, with the chat template on, the template's markers and
words (``<|im_start|>``, ``system``, ``You are a helpful …``, ``ass`` + ``istant``). A count of
"the text's tokens" and a suggestion to "change the word at position 42" must only ever see the
user's own tokens. ``own_positions`` finds them by walking the token bytes along the text the
tokenizer read and keeping those inside the prompt's span; ``words`` groups own tokens into words
(``ĠKat`` + ``ze`` is one word, *Katze*).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import streamlit as st

from ui.common.resources import client_for
from ui.tokenization.compute import tokenize


def own_positions(text: bytes, prompt: bytes, token_bytes: Sequence[bytes], special: Sequence[bool]) -> list[bool]:
    """For each token, whether it is the user's own text: its bytes lie (mostly) inside the prompt's span of
    ``text`` (the text the tokenizer read; with a chat template, the prompt sits in its user turn, the last
    place it occurs). A special token the tokenizer added (not in ``text``) is never own text. When the
    bytes cannot be walked along the text (a normalizer changed it), every non-special token counts."""
    start = text.rfind(prompt)
    fallback = [not s for s in special]
    if start < 0 or not prompt:
        return fallback
    end = start + len(prompt)
    cursor, own = 0, []
    for piece, is_special in zip(token_bytes, special):
        if not text.startswith(piece, cursor):
            if is_special:  # added by the tokenizer, not written in the text
                own.append(False)
                continue
            if piece.startswith(b" ") and text.startswith(piece[1:], cursor):
                piece = piece[1:]  # a SentencePiece prefix space the text does not hold
            else:
                return fallback
        low, high = cursor, cursor + len(piece)
        cursor = high
        inside = max(0, min(high, end) - max(low, start))
        own.append(not is_special and high > low and 2 * inside > high - low)
    return own


def has_chat_template(model: str) -> bool:
    """Whether ``model``'s tokenizer has a chat template (a base model such as Gemma 3 270M has none)."""
    return client_for(model).tokenizer.chat_template is not None


@st.cache_data(max_entries=128, show_spinner=False)
def own_mask(model: str, prompt: str, chat: bool) -> list[bool]:
    """``own_positions`` for the prompt as ``model`` reads it (the chat template on or off)."""
    view = tokenize(model, prompt, chat)
    if not chat:
        return [not s for s in view.special]
    tokenizer = client_for(model).tokenizer
    token_bytes = [raw.encode("utf-8") if s else tokenizer.piece_bytes(raw) for raw, s in zip(view.raw, view.special)]
    return own_positions(view.text.encode("utf-8"), prompt.encode("utf-8"), token_bytes, view.special)


@dataclass(frozen=True)
class Word:
    start: int  # first token position
    end: int  # one past the last
    text: str  # the word's text, stripped of its leading whitespace

    @property
    def positions(self) -> range:
        return range(self.start, self.end)


def _is_mark(piece: str) -> bool:
    stripped = piece.strip()
    return bool(stripped) and not any(ch.isalnum() for ch in stripped)


def words(pieces: Sequence[str], own: Sequence[bool]) -> list[Word]:
    """The user's own tokens grouped into words: a word starts at a token that begins with whitespace, after a
    punctuation mark or a token that is not own text, and a punctuation mark is a word of its own. Tokens in
    the display notation (``ui.common.token_text``)."""
    out: list[Word] = []
    current: list[int] = []

    def close() -> None:
        if current:
            out.append(Word(current[0], current[-1] + 1, "".join(pieces[i] for i in current).strip()))
            current.clear()

    for i, (piece, mine) in enumerate(zip(pieces, own)):
        if not mine:
            close()
            continue
        if not current or piece[:1].isspace() or _is_mark(piece) or _is_mark(pieces[current[-1]]):
            close()
        current.append(i)
        if piece.rstrip() != piece:  # ends with whitespace: the next token starts a word
            close()
    close()
    return out
