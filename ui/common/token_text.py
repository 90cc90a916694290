"""The one display rule for a token's text, used by every page, chart label, table and message.

A token adds bytes to the text, and a byte-level BPE often splits one multi-byte
character (an emoji, a CJK character) over several tokens. Decoding such a token
alone gives "�", which hides which bytes it holds and makes two different tokens
print alike. Here every byte that is not part of a whole UTF-8 character inside the
token is written ``<0xNN>`` (the notation of the Tokenization page), whole characters
stay as they are, and special tokens keep their own text (``<|im_start|>``).

``visible`` then turns that text into what a reader can see, on every chip, chart label,
table and sentence: whitespace and control characters as symbols (``·`` ``↵`` ``␀``), and
characters that draw nothing (a no-break space, a zero-width joiner, a bidi mark) as a
symbol or a short name, so a token made only of them is never an empty chip. A joiner or
variation selector inside an emoji sequence stays, so the emoji is drawn whole.

The bytes come from the tokenizer's public API (``Tokenizer.piece_bytes``: byte-level BPE
or SentencePiece with its ``<0xNN>`` byte fallback), never from decoding.
"""

from __future__ import annotations

import codecs
import unicodedata

from inference.api import Tokenizer

_HANDLER = "llm_explorer_hex_bytes"


def _hex_bytes(error: UnicodeDecodeError) -> tuple[str, int]:
    """Codec error handler: the undecodable bytes as ``<0xNN>`` each, then decoding goes on."""
    return "".join(f"<0x{b:02X}>" for b in error.object[error.start : error.end]), error.end


codecs.register_error(_HANDLER, _hex_bytes)


_WHITESPACE = {" ": "·", "\n": "↵", "\t": "→", "\r": "␍", "\u00a0": "⍽"}
_NAMED = {
    "\u00ad": "SHY",
    "\u034f": "CGJ",
    "\u061c": "ALM",
    "\u200b": "ZWSP",
    "\u200c": "ZWNJ",
    "\u200d": "ZWJ",
    "\u200e": "LRM",
    "\u200f": "RLM",
    "\u2028": "LS",
    "\u2029": "PS",
    "\u2060": "WJ",
    "\ufeff": "BOM",
}
_INVISIBLE_CATEGORIES = {"Cf", "Zs", "Zl", "Zp", "Cc", "Co", "Cn", "Cs"}


def _selector(ch: str) -> bool:
    """A variation selector: it changes how the character before it is drawn (❤ -> ❤️), and draws nothing alone."""
    code = ord(ch)
    return 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF


def _draws_nothing(ch: str) -> bool:
    return ch not in _WHITESPACE and (unicodedata.category(ch) in _INVISIBLE_CATEGORIES or _selector(ch))


def _symbol(ch: str) -> str:
    code = ord(ch)
    if ch in _WHITESPACE:
        return _WHITESPACE[ch]
    if code < 0x20:
        return chr(0x2400 + code)  # the Unicode "control pictures" block: NUL -> ␀
    if code == 0x7F:
        return "␡"
    return f"⟨{_NAMED.get(ch) or f'U+{code:04X}'}⟩"


def visible(text: str) -> str:
    """``text`` as a reader can see it: whitespace and controls as symbols (space '·', newline '↵', tab '→',
    NUL '␀', no-break space '⍽'), characters that draw nothing as a short name ('⟨ZWJ⟩', '⟨U+2003⟩').

    Kept as they are: a zero-width joiner between two drawn characters, and a variation selector after
    one (👨‍👩‍👧, ❤️, 👍🏽 stay whole emoji); alone in a token they are shown by name like the rest."""
    out = []
    for i, ch in enumerate(text):
        before = i > 0 and not _draws_nothing(text[i - 1]) and text[i - 1] not in _WHITESPACE
        after = i + 1 < len(text) and not _draws_nothing(text[i + 1]) and text[i + 1] not in _WHITESPACE
        joins = ch in "\u200c\u200d" and before and after
        if joins or (_selector(ch) and before) or (ch not in _WHITESPACE and not _draws_nothing(ch)):
            out.append(ch)
        else:
            out.append(_symbol(ch))
    return "".join(out)


def visible_token(text: str) -> str:
    """A token's text with whitespace made visible as on every page (' on' -> '·on'); '∅' if empty."""
    return visible(text) or "∅"


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
