"""Cached tokenization results for the Tokenization page, computed from the model's real tokenizer.

Owns: the prompt's tokens (ids, byte-exact display text, character spans, special
flags), the facts that tell tokenizers apart (byte-level 'Ġ' against SentencePiece '▁',
vocabulary size, byte fallback, BOS), the model's own BPE merges replayed step by step
on one word, a word-level and a raw-byte view of the same text, and a tiny BPE trained
live with ``tokenizers``. Bytes that are only part of a UTF-8 character are written
``<0xNN>`` everywhere (the project's one notation, also SentencePiece's own for its
byte-fallback tokens). Everything returned is plain Python, safe for ``st.cache_data``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import regex
import streamlit as st
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models, pre_tokenizers, trainers

from inference.api import Tokenizer, parse_merges
from ui.common.resources import client_for
from ui.common.token_text import entry_text, token_texts

UNK = "<unk>"


@dataclass(frozen=True)
class TokenView:
    text: str  # what was tokenized (the prompt, or the prompt inside the chat template)
    ids: list[int]
    pieces: list[str]  # each token's own text, byte-exact (partial UTF-8 shown as <0xNN>)
    raw: list[str]  # vocabulary entries as stored (byte-level BPE: 'Ġ' is a space; SentencePiece: '▁')
    special: list[bool]
    n_chars: int  # characters as a reader counts them (grapheme clusters: a family emoji 👨‍👩‍👧 is one)
    n_bytes: int
    n_code_points: int  # Unicode code points (👨‍👩‍👧 is five: three people and two zero-width joiners)
    partial: list[bool]  # the token holds bytes of a character it does not hold whole (shown as <0xNN>)


def characters(text: str) -> int:
    """How many characters a reader sees in ``text``: extended grapheme clusters (``regex``'s ``\\X``), so an
    emoji sequence, a flag or a letter with combining accents counts once, whatever its code points."""
    return len(regex.findall(r"\X", text))


def token_bytes(raw_token: str) -> bytes:
    """The bytes a byte-level BPE vocabulary entry stands for ('Ġcat' -> b' cat')."""
    return Tokenizer.entry_bytes(raw_token)


def piece_text(raw_token: str, is_special: bool, tokenizer: Tokenizer | None = None) -> str:
    """A token's text; bytes that are only part of a UTF-8 character are shown as <0xNN> (``ui.token_text``).

    ``raw_token`` is in ``tokenizer``'s alphabet (default: byte-level BPE, as the tiny BPE trained here).
    """
    return entry_text(raw_token, is_special, tokenizer)


@st.cache_data(max_entries=128, show_spinner=False)
def tokenize(model: str, prompt: str, chat: bool) -> TokenView:
    """The prompt as ``model`` sees it. Raises ``inference.PromptError`` for empty or too-long text."""
    client = client_for(model)
    ids = client.encode_prompt(prompt, chat=chat)
    text = client.tokenizer.apply_chat(prompt) if chat else prompt
    raw = client.tokenizer.raw_tokens(ids)
    specials = client.tokenizer.special_ids
    special = [i in specials for i in ids]
    pieces = [piece_text(r, s, client.tokenizer) for r, s in zip(raw, special)]
    partial = [not s and not _whole_characters(client.tokenizer.piece_bytes(r)) for r, s in zip(raw, special)]
    return TokenView(text, ids, pieces, raw, special, characters(text), len(text.encode("utf-8")), len(text), partial)


def _whole_characters(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@dataclass(frozen=True)
class TokenizerFacts:
    scheme: str  # "byte-level" or "sentencepiece"
    space_symbol: str  # how a leading space is written inside a vocabulary entry
    vocab_size: int
    byte_fallback: bool  # characters outside the vocabulary become <0xNN> byte tokens
    bos: tuple[int, str] | None  # the token put before every text, if any
    rare_text: str  # a character the example below is built from
    rare_pieces: list[str]  # how the tokenizer writes it (entries as stored)
    rare_ids: list[int]


RARE_CHARACTER = "𓀀"  # U+13000, an Egyptian hieroglyph: four UTF-8 bytes, in few vocabularies


@st.cache_data(max_entries=8, show_spinner=False)
def tokenizer_facts(model: str) -> TokenizerFacts:
    """What sets ``model``'s tokenizer apart, read off the tokenizer itself."""
    tokenizer = client_for(model).tokenizer
    rare = tokenizer.encode(RARE_CHARACTER, special_tokens=False)
    return TokenizerFacts(
        tokenizer.scheme,
        tokenizer.space_symbol,
        tokenizer.vocab_size,
        tokenizer.byte_fallback,
        tokenizer.bos_token,
        RARE_CHARACTER,
        tokenizer.raw_tokens(rare),
        rare,
    )


def symbol_unit(model: str) -> str:
    """What BPE starts from for ``model``: bytes (byte-level) or code points (SentencePiece: one symbol per code
    point, so an accent typed as a combining mark is a symbol of its own)."""
    return "bytes" if client_for(model).tokenizer.scheme == "byte-level" else "code points"


def model_piece_text(model: str, raw_token: str) -> str:
    """A piece in ``model``'s alphabet (a vocabulary entry, or a part of one in a merge) as text."""
    return piece_text(raw_token, False, client_for(model).tokenizer)


def model_piece_bytes(model: str, raw_token: str) -> bytes:
    return client_for(model).tokenizer.piece_bytes(raw_token)


@dataclass(frozen=True)
class MergeStep:
    parts: list[str]  # the word's pieces after this step (byte-level alphabet)
    merged: tuple[str, str] | None  # the pair merged to get here (None for the start)
    rank: int | None  # that merge's rank in the model's list (lower = learned earlier)
    texts: list[str]  # ``parts`` as text (``model_piece_text``), made with the step: the page draws every step
    merged_texts: tuple[str, str] | None  # ``merged`` as text


FALLBACK_BYTE = re.compile(r"<0x([0-9A-F]{2})>")  # a SentencePiece byte token (byte fallback)


@dataclass(frozen=True)
class ReplayStart:
    """What a merge replay starts from (its first step's parts): for byte-level BPE one symbol per byte; for
    SentencePiece one per code point, but a code point outside the vocabulary is spelled as its UTF-8 byte tokens."""

    symbols: int  # the parts the replay starts from
    characters: int  # the word's bytes (byte-level) or code points (SentencePiece) those parts spell
    fallback_characters: int  # code points outside the vocabulary, spelled as byte tokens
    fallback_bytes: int  # the byte tokens they take


def replay_start(parts: list[str]) -> ReplayStart:
    """Count ``parts`` (a replay's start): every part is a single symbol of the model's alphabet or a byte token,
    and the bytes of one code point begin with exactly one byte that is not a continuation byte (0x80-0xBF)."""
    fallback = [int(match.group(1), 16) for part in parts if (match := FALLBACK_BYTE.fullmatch(part))]
    leads = sum(not 0x80 <= byte <= 0xBF for byte in fallback)
    return ReplayStart(len(parts), len(parts) - len(fallback) + leads, leads, len(fallback))


def pre_tokens(model: str, text: str) -> list[str]:
    """How ``model``'s pre-tokenizer splits text before BPE (merges never cross these borders)."""
    return client_for(model).tokenizer.pre_tokens(text)


MAX_BPE_BYTES = 64  # a longer word is replayed on its first 64 symbols (the page draws one row per merge)


@st.cache_data(max_entries=32, show_spinner=False)
def bpe_steps(model: str, word: str) -> list[MergeStep]:
    """Replay the model's merges on ``word``'s first pre-token (its first ``MAX_BPE_BYTES`` symbols at most):
    start from bytes (byte-level) or characters (SentencePiece), merge the best-ranked pair. The cap
    keeps a pasted page from costing seconds (the replay is quadratic) and thousands of rows."""
    pieces = pre_tokens(model, word)
    tokenizer = client_for(model).tokenizer
    parts = tokenizer.bpe_symbols(pieces[0][:MAX_BPE_BYTES]) if pieces else []
    ranks = tokenizer.merge_ranks

    def text(part: str) -> str:
        return piece_text(part, False, tokenizer)

    steps = [MergeStep(parts[:], None, None, [text(p) for p in parts], None)]
    while len(parts) > 1:
        candidates = [(ranks[(a, b)], i) for i, (a, b) in enumerate(zip(parts, parts[1:])) if (a, b) in ranks]
        if not candidates:
            break
        rank, i = min(candidates)
        pair = (parts[i], parts[i + 1])
        parts = parts[:i] + [pair[0] + pair[1]] + parts[i + 2 :]
        steps.append(MergeStep(parts[:], pair, rank, [text(p) for p in parts], (text(pair[0]), text(pair[1]))))
    return steps


def words(text: str) -> list[str]:
    """Words and punctuation marks, the units of a word-level vocabulary."""
    return re.findall(r"\w+|[^\w\s]", text)


def word_level(text: str, corpus: str) -> list[tuple[str, int]]:
    """``text`` through a word-level vocabulary built from ``corpus``: unknown words become <unk> (id 0)."""
    vocab = {UNK: 0}
    for word in words(corpus):
        vocab.setdefault(word, len(vocab))
    return [(word if word in vocab else UNK, vocab.get(word, 0)) for word in words(text)]


def raw_bytes(text: str) -> list[int]:
    return list(text.encode("utf-8"))


@dataclass(frozen=True)
class TinyBPE:
    merges: list[tuple[str, str]]  # in the order they were learned
    vocab_size: int
    tokens: list[str]  # the prompt through the tiny tokenizer


@st.cache_data(max_entries=16, show_spinner=False)
def train_tiny_bpe(corpus: str, vocab_size: int, prompt: str) -> TinyBPE:
    """Train a byte-level BPE with ``tokenizers`` on ``corpus`` and tokenize ``prompt`` with it."""
    tokenizer = HFTokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator([corpus], trainer=trainer)
    pairs = parse_merges(json.loads(tokenizer.to_str())["model"]["merges"])
    return TinyBPE(pairs, tokenizer.get_vocab_size(), tokenizer.encode(prompt).tokens)


@st.cache_resource(show_spinner=False, max_entries=4)
def _merge_rank_of_entry(model: str) -> dict[str, int]:
    """Vocabulary entry -> rank of the (first) merge that makes it; bytes and special tokens have none."""
    made: dict[str, int] = {}
    for (left, right), rank in client_for(model).tokenizer.merge_ranks.items():
        made.setdefault(left + right, rank)
    return made


@dataclass(frozen=True)
class IdNeighbours:
    word_pieces: list[str]  # the word's tokens (display text)
    centre_id: int  # its first token's id
    rows: list[tuple[int, str, int | None]]  # (id, display text, rank of the merge that made it), in id order


@st.cache_data(max_entries=32, show_spinner=False)
def id_neighbours(model: str, word: str, spread: int = 3) -> IdNeighbours | None:
    """The vocabulary entries whose ids sit right next to ``word``'s first token id (None: no token)."""
    client = client_for(model)
    ids = client.tokenizer.encode(word, special_tokens=False)  # the word's own first token, not a BOS
    if not ids:
        return None
    centre = ids[0]
    around = [i for i in range(centre - spread, centre + spread + 1) if 0 <= i < client.info.config.vocab_size]
    raw = client.tokenizer.raw_tokens(around)
    made = _merge_rank_of_entry(model)
    specials = client.tokenizer.special_ids
    rows = [
        (i, piece_text(r, i in specials, client.tokenizer), None if i in specials else made.get(r))
        for i, r in zip(around, raw)
    ]
    return IdNeighbours(token_texts(client.tokenizer, ids), centre, rows)


def tokenizer_split(model: str, word: str) -> list[str]:
    """How the tokenizer itself splits ``word``'s first pre-token (in its alphabet, like ``bpe_steps``)."""
    pieces = pre_tokens(model, word)
    if not pieces:
        return []
    tokenizer = client_for(model).tokenizer
    text = tokenizer.piece_bytes(pieces[0]).decode("utf-8", "replace")  # a pre-token holds whole characters
    return tokenizer.raw_tokens(tokenizer.encode(text, special_tokens=False))


@st.cache_data(max_entries=32, show_spinner=False)
def model_bpe(model: str, text: str) -> tuple[list[int], list[str], list[bool]]:
    """``text`` through the model's own tokenizer: ids, byte-exact pieces and special flags (a BOS it adds)."""
    tokenizer = client_for(model).tokenizer
    ids = tokenizer.encode(text)
    special = [i in tokenizer.special_ids for i in ids]
    return ids, [piece_text(r, s, tokenizer) for r, s in zip(tokenizer.raw_tokens(ids), special)], special


def chat_template(model: str) -> str:
    return client_for(model).tokenizer.chat_template or "(this model has no chat template)"


def vocab_size(model: str) -> int:
    return client_for(model).info.config.vocab_size
