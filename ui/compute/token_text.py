"""The one display rule for a token's text, used by every page, chart label, table and message.

A token adds bytes to the text, and a byte-level BPE often splits one multi-byte
character (an emoji, a CJK character) over several tokens. Decoding such a token
alone gives "�", which hides which bytes it holds and makes two different tokens
print alike. Here every byte that is not part of a whole UTF-8 character inside the
token is written ``<0xNN>`` (the notation of the Tokenization page), whole characters
stay as they are, and special tokens keep their own text (``<|im_start|>``).
``ui.figures.tokens.visible`` then makes whitespace visible for display.

The bytes come from the tokenizer's public API (``Tokenizer.piece_bytes``: byte-level BPE
or SentencePiece with its ``<0xNN>`` byte fallback), never from decoding.
"""

from __future__ import annotations

import codecs

from inference.api import Tokenizer

_HANDLER = "llm_explorer_hex_bytes"


def _hex_bytes(error: UnicodeDecodeError) -> tuple[str, int]:
    """Codec error handler: the undecodable bytes as ``<0xNN>`` each, then decoding goes on."""
    return "".join(f"<0x{b:02X}>" for b in error.object[error.start : error.end]), error.end


codecs.register_error(_HANDLER, _hex_bytes)


def bytes_text(data: bytes) -> str:
    """UTF-8 text of ``data``, with every byte that is not part of a whole character as ``<0xNN>``."""
    return data.decode("utf-8", errors=_HANDLER)


def entry_text(raw_token: str, is_special: bool = False, tokenizer: Tokenizer | None = None) -> str:
    """The display text of a vocabulary entry as stored, in ``tokenizer``'s alphabet (byte-level 'Ġcat' or
    SentencePiece '▁cat' -> ' cat'; without a tokenizer, byte-level, as the tiny BPE trained on a page)."""
    if is_special:
        return raw_token
    return bytes_text(tokenizer.piece_bytes(raw_token) if tokenizer is not None else Tokenizer.entry_bytes(raw_token))


def token_texts(tokenizer: Tokenizer, token_ids: list[int]) -> list[str]:
    """Each token's own display text, in order (``<0xNN>`` for pieces of a character)."""
    ids = [int(i) for i in token_ids]
    specials = tokenizer.special_ids
    return [entry_text(raw, i in specials, tokenizer) for i, raw in zip(ids, tokenizer.raw_tokens(ids))]


def sequence_text(tokenizer: Tokenizer, token_ids: list[int]) -> str:
    """The text a run of tokens makes, decoded together: whole characters across token borders,
    ``<0xNN>`` only for bytes still incomplete (a generation cut in the middle of an emoji)."""
    specials = tokenizer.special_ids
    parts: list[str] = []
    pending = b""
    for i, raw in zip(token_ids, tokenizer.raw_tokens([int(i) for i in token_ids])):
        if int(i) in specials:
            parts.append(bytes_text(pending) + raw)
            pending = b""
        else:
            pending += tokenizer.piece_bytes(raw)
    parts.append(bytes_text(pending))
    return "".join(parts)
