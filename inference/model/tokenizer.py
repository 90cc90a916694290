"""Text <-> token ids, and everything else the engine and the explorer ask of a tokenizer.

Owns the one wrapper around the model's Hugging Face fast tokenizer (itself backed by
a ``tokenizers.Tokenizer``): encoding and decoding, end-of-text ids, special and added
tokens, the BPE merge list, the byte each vocabulary entry stands for (byte-level BPE's
printable alphabet), the pre-tokenizer's split, and the chat template. Nothing outside
this file touches the wrapped objects; ``StreamDecoder`` turns generated ids into
UTF-8-safe text deltas.
"""
from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path


class TokenizerError(ValueError):
    """Text could not be tokenized as asked (for example, an empty prompt)."""


def byte_level_alphabet() -> dict[str, int]:
    """GPT-2's byte-level alphabet, reversed: the printable stand-in character -> the byte it stands for."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    codes = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            codes.append(256 + extra)
            extra += 1
    return {chr(code): byte for byte, code in zip(printable, codes)}


_BYTE_LEVEL = byte_level_alphabet()


def parse_merges(merges: list) -> list[tuple[str, str]]:
    """A ``tokenizers`` BPE merge list (``"a b"`` strings or ``[a, b]`` pairs) as pairs, in rank order."""
    return [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in merges]


class Tokenizer:
    def __init__(self, hf_tokenizer) -> None:
        if not getattr(hf_tokenizer, "is_fast", False):
            raise TokenizerError("the model's tokenizer is not a fast (tokenizers-backed) tokenizer")
        self._hf = hf_tokenizer
        self._backend = hf_tokenizer.backend_tokenizer  # tokenizers.Tokenizer

    @classmethod
    def from_folder(cls, folder: str | Path) -> "Tokenizer":
        from transformers import AutoTokenizer

        return cls(AutoTokenizer.from_pretrained(str(folder), use_fast=True, trust_remote_code=False))

    # -- vocabulary facts -------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return len(self._hf)

    @property
    def eos_ids(self) -> frozenset[int]:
        """The tokenizer's own end-of-text id (the model's config may name more)."""
        eos = self._hf.eos_token_id
        return frozenset() if eos is None else frozenset({int(eos)})

    @property
    def special_ids(self) -> set[int]:
        return set(self._hf.all_special_ids)

    @property
    def added_texts(self) -> list[str]:
        """Added tokens' texts (``<|im_start|>``, ``<repo_name>``, …): typed in a prompt, each reads as that token."""
        return [token.content for token in self._hf.added_tokens_decoder.values()]

    @cached_property
    def merge_ranks(self) -> dict[tuple[str, str], int]:
        """This tokenizer's BPE merges, pair -> rank (lower = learned earlier); empty for a non-BPE model."""
        model = json.loads(self._backend.to_str())["model"]
        return {pair: rank for rank, pair in enumerate(parse_merges(model.get("merges") or []))}

    # -- text <-> ids -----------------------------------------------------------------
    def encode(self, text: str, special_tokens: bool = True) -> list[int]:
        """Token ids of ``text``; ``special_tokens=False`` leaves out what the tokenizer adds itself (BOS)."""
        return list(self._hf.encode(text, add_special_tokens=special_tokens))

    def decode(self, ids: list[int]) -> str:
        return self._hf.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def token_strings(self, ids: list[int]) -> list[str]:
        """Each id's own text (what it adds when decoded alone; may hold a partial UTF-8 '\ufffd')."""
        return [self.decode([i]) for i in ids]

    def raw_tokens(self, ids: list[int]) -> list[str]:
        """The vocabulary entries themselves (byte-level BPE shows a space as 'Ġ')."""
        return self._hf.convert_ids_to_tokens(list(ids))

    def pre_tokens(self, text: str) -> list[str]:
        """How the pre-tokenizer splits ``text`` before BPE (merges never cross these borders), in its alphabet."""
        pre = self._backend.pre_tokenizer
        if pre is None:
            return [text] if text else []
        return [piece for piece, _ in pre.pre_tokenize_str(text)]

    # -- bytes ------------------------------------------------------------------------
    @staticmethod
    def entry_bytes(raw_token: str) -> bytes:
        """The bytes a byte-level BPE vocabulary entry stands for ('Ġcat' -> b' cat')."""
        return bytes(_BYTE_LEVEL[ch] for ch in raw_token if ch in _BYTE_LEVEL)

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes one token adds to the text."""
        return self.entry_bytes(self.raw_tokens([token_id])[0])

    # -- chat -------------------------------------------------------------------------
    @property
    def chat_template(self) -> str | None:
        return self._hf.chat_template

    def apply_chat(self, prompt: str, system: str | None = None) -> str:
        """The prompt wrapped as one user turn in the model's chat template, ready for the reply."""
        if not self.chat_template:
            raise TokenizerError("this model's tokenizer has no chat template")
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        return self._hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


class StreamDecoder:
    """Turns generated ids into text deltas, holding back incomplete UTF-8 sequences.

    Decoding each id alone breaks multi-byte characters (an emoji spans several byte
    tokens); decoding the whole tail and emitting only what is new and complete
    gives exactly the text that decoding everything at once would give.
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.emitted = ""

    def push(self, token_id: int) -> str:
        self.ids.append(token_id)
        text = self.tokenizer.decode(self.ids)
        if text.endswith("\ufffd"):
            return ""  # wait for the rest of the character
        delta = text[len(self.emitted):]
        self.emitted = text
        return delta

    def flush(self) -> str:
        text = self.tokenizer.decode(self.ids)
        delta = text[len(self.emitted):]
        self.emitted = text
        return delta
