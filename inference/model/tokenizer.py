"""Text <-> token ids, and everything else the engine and the explorer ask of a tokenizer.

Owns the one wrapper around the model's Hugging Face fast tokenizer (itself backed by
a ``tokenizers.Tokenizer``): encoding and decoding, end-of-text ids, special and added
tokens, the BPE merge list, the bytes each vocabulary entry stands for, the
pre-tokenizer's split, and the chat template. Two schemes are told apart:

- byte-level BPE (GPT-2, SmolLM2): every byte is mapped to a printable character and
  merged from there; a space is written ``Ġ``;
- SentencePiece-style BPE (Gemma): merges start from characters, a space is written
  ``▁``, and a character outside the vocabulary falls back to byte tokens ``<0xNN>``.

Nothing outside this file touches the wrapped objects; ``StreamDecoder`` turns
generated ids into UTF-8-safe text deltas. What goes in is checked here: text must be a
``str`` of valid Unicode (a lone surrogate cannot be encoded), ids whole numbers inside
the vocabulary; anything else is a ``TokenizerError`` naming it, never the backend's own
``TypeError`` or ``OverflowError``, nor an empty string for an unknown id.
"""

from __future__ import annotations

import json
import operator
import re
import sys
import threading
import weakref
from functools import cached_property
from pathlib import Path


def whole_id(item: object, error: type[Exception]) -> int:
    """One token id as an int (numpy's and torch's integers too); a float (even ``2.0``: no token is 1.7 either),
    a bool, text or ``None`` raises ``error``."""
    try:
        if isinstance(item, bool):
            raise TypeError
        return operator.index(item)
    except TypeError:
        raise error(f"token ids must be whole numbers, got {item!r}") from None


class TokenizerError(ValueError):
    """Text could not be tokenized as asked (for example, an empty prompt)."""


def byte_level_alphabet() -> dict[str, int]:
    """GPT-2's byte-level alphabet, reversed: the printable stand-in character -> the byte it stands for."""
    printable = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    codes = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            codes.append(256 + extra)
            extra += 1
    return {chr(code): byte for byte, code in zip(printable, codes)}


_BYTE_LEVEL = byte_level_alphabet()
_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # a SentencePiece byte-fallback entry
BYTE_LEVEL, SENTENCEPIECE = "byte-level", "sentencepiece"
GENERIC_TOKENIZER_CLASSES = frozenset({"TokenizersBackend", "PreTrainedTokenizerFast"})  # no model-specific code


def parse_merges(merges: list) -> list[tuple[str, str]]:
    """A ``tokenizers`` BPE merge list (``"a b"`` strings or ``[a, b]`` pairs) as pairs, in rank order."""
    return [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in merges]


# The tokenizers engines hold, by folder key: an entry goes when the last engine holding it does.
_SHARED: weakref.WeakValueDictionary[tuple, Tokenizer] = weakref.WeakValueDictionary()
_READING = threading.Lock()  # two engines of one model loading at once read its tokenizer once
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")


def _folder_key(folder: Path) -> tuple:
    """The folder and the size and time of each file in it but the weights: what the tokenizer is read from."""
    resolved = folder.resolve()
    files = sorted(p for p in resolved.iterdir() if p.is_file() and not p.name.endswith(_WEIGHT_SUFFIXES))
    return (str(resolved), *((p.name, stat.st_size, stat.st_mtime_ns) for p in files for stat in (p.stat(),)))


class Tokenizer:
    def __init__(self, hf_tokenizer) -> None:
        if not getattr(hf_tokenizer, "is_fast", False):
            raise TokenizerError("the model's tokenizer is not a fast (tokenizers-backed) tokenizer")
        self._hf = hf_tokenizer
        self._backend = hf_tokenizer.backend_tokenizer  # tokenizers.Tokenizer

    @classmethod
    def from_folder(cls, folder: str | Path) -> Tokenizer:
        """The folder's tokenizer, read once while any engine holds it: a second engine of the same model (its
        float32 and 4-bit forms, say) shares the first one's, as long as the folder's tokenizer files are unchanged
        (their sizes and times are the key). Gemma's 262k-entry tokenizer takes ~2 s of CPU to read."""
        folder = Path(folder)
        if not folder.is_dir():
            return cls._read(folder)  # transformers says what is missing
        key = (cls, *_folder_key(folder))
        with _READING:
            tokenizer = _SHARED.get(key)
            if tokenizer is None:
                tokenizer = cls._read(folder)
                _SHARED[key] = tokenizer
        return tokenizer

    @classmethod
    def _read(cls, folder: Path) -> Tokenizer:
        """``AutoTokenizer`` finds the class through the model's config and transformers' model registry, which
        imports sympy and ``torch._dynamo`` (~70 MiB of modules in every engine process); a folder that names the
        generic fast class (what a GGUF's conversion saves) is read by that class directly."""
        config_path = folder / "tokenizer_config.json"
        named = json.loads(config_path.read_text()).get("tokenizer_class") if config_path.is_file() else None
        if named in GENERIC_TOKENIZER_CLASSES:
            from transformers import PreTrainedTokenizerFast

            return cls(PreTrainedTokenizerFast.from_pretrained(str(folder)))
        from transformers import AutoTokenizer

        return cls(AutoTokenizer.from_pretrained(str(folder), use_fast=True, trust_remote_code=False))

    # -- vocabulary facts -------------------------------------------------------------
    @cached_property
    def vocab_size(self) -> int:
        """Every id the tokenizer knows, added tokens included (the model's vocabulary may be padded past it)."""
        return len(self._hf)

    def checked_ids(self, ids) -> list[int]:
        """``ids`` as a list of ints inside the vocabulary, else ``TokenizerError`` naming the first that is not
        (a float, a bool or text is not an id, even ``2.0``; numpy and torch integers are)."""
        if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
            raise TokenizerError(f"token ids must be a list of whole numbers, got {type(ids).__name__}")
        checked = []
        for item in ids:
            number = whole_id(item, TokenizerError)
            if not 0 <= number < self.vocab_size:
                raise TokenizerError(f"token id {number} is outside the vocabulary (0..{self.vocab_size - 1})")
            checked.append(number)
        return checked

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
    def scheme(self) -> str:
        """``"byte-level"`` (bytes as printable characters, 'Ġ' = space) or ``"sentencepiece"`` ('▁' = space)."""
        parts = f"{self._backend.pre_tokenizer} {self._backend.decoder}"
        return BYTE_LEVEL if "ByteLevel" in parts else SENTENCEPIECE

    @property
    def byte_fallback(self) -> bool:
        """Whether characters outside the vocabulary are written as byte tokens (``<0xNN>``)."""
        return bool(getattr(self._backend.model, "byte_fallback", False))

    @cached_property
    def space_symbol(self) -> str:
        """The character a vocabulary entry uses for a leading space (read off the entry for " the")."""
        raw = self.raw_tokens(self.encode(" the", special_tokens=False))
        return raw[0][0] if raw and raw[0] else " "

    @cached_property
    def bos_token(self) -> tuple[int, str] | None:
        """The token the tokenizer puts before every text (id, text), or ``None`` when it adds none."""
        with_special = self.encode("a")
        if len(with_special) > len(self.encode("a", special_tokens=False)) and with_special[0] in self.special_ids:
            return with_special[0], self.raw_tokens(with_special[:1])[0]
        return None

    @cached_property
    def merge_ranks(self) -> dict[tuple[str, str], int]:
        """This tokenizer's BPE merges, pair -> rank (lower = learned earlier); empty for a non-BPE model.

        Gemma has 514,906 merges: the pieces are interned (each vocabulary string held once), which
        keeps the table at ~77 MB instead of ~120 MB.
        """
        model = json.loads(self._backend.to_str())["model"]
        pairs = parse_merges(model.pop("merges", None) or [])
        return {(sys.intern(a), sys.intern(b)): rank for rank, (a, b) in enumerate(pairs)}

    # -- text <-> ids -----------------------------------------------------------------
    def encode(self, text: str, special_tokens: bool = True) -> list[int]:
        """Token ids of ``text``; ``special_tokens=False`` leaves out what the tokenizer adds itself (BOS)."""
        if not isinstance(text, str):
            _check_text(text)
        try:
            return list(self._hf.encode(text, add_special_tokens=special_tokens))
        except TypeError:  # a lone surrogate: the backend's message says neither what nor where
            _check_text(text)
            raise

    def decode(self, ids: list[int]) -> str:
        return self._hf.decode(self.checked_ids(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def token_strings(self, ids: list[int]) -> list[str]:
        """Each id's own text (what it adds when decoded alone; may hold a partial UTF-8 '\ufffd')."""
        return [self.decode([i]) for i in self.checked_ids(ids)]

    def raw_tokens(self, ids: list[int]) -> list[str]:
        """The vocabulary entries themselves (byte-level BPE shows a space as 'Ġ')."""
        return self._hf.convert_ids_to_tokens(self.checked_ids(ids))

    def pre_tokens(self, text: str) -> list[str]:
        """How the pre-tokenizer splits ``text`` before BPE (merges never cross these borders), in its alphabet.

        The normalizer runs first, as in the real pipeline (SentencePiece's spaces become '▁').
        """
        _check_text(text)
        normalizer = self._backend.normalizer
        if normalizer is not None:
            text = normalizer.normalize_str(text)
        pre = self._backend.pre_tokenizer
        if pre is None:
            return [text] if text else []
        return [piece for piece, _ in pre.pre_tokenize_str(text)]

    def bpe_symbols(self, pre_token: str) -> list[str]:
        """The symbols BPE starts a pre-token from: its bytes (byte-level), or its characters with any
        character outside the vocabulary written as its byte tokens (SentencePiece byte fallback)."""
        if self.scheme == BYTE_LEVEL or not self.byte_fallback:
            return list(pre_token)
        symbols = []
        for ch in pre_token:
            if self._backend.token_to_id(ch) is not None:
                symbols.append(ch)
            else:
                symbols.extend(f"<0x{byte:02X}>" for byte in ch.encode("utf-8"))
        return symbols

    # -- bytes ------------------------------------------------------------------------
    @staticmethod
    def entry_bytes(raw_token: str) -> bytes:
        """The bytes a byte-level BPE vocabulary entry stands for ('Ġcat' -> b' cat')."""
        return bytes(_BYTE_LEVEL[ch] for ch in raw_token if ch in _BYTE_LEVEL)

    @staticmethod
    def sentencepiece_bytes(raw_token: str) -> bytes:
        """The bytes a SentencePiece entry stands for ('▁cat' -> b' cat', the fallback '<0xE6>' -> b'\xe6')."""
        fallback = _BYTE_TOKEN.fullmatch(raw_token)
        if fallback:
            return bytes([int(fallback.group(1), 16)])
        return raw_token.replace("▁", " ").encode("utf-8")

    def piece_bytes(self, raw_token: str) -> bytes:
        """The bytes a vocabulary entry (or a piece of one, as in a merge) of this tokenizer stands for."""
        if self.scheme == BYTE_LEVEL:
            return self.entry_bytes(raw_token)
        return self.sentencepiece_bytes(raw_token)

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes one token adds to the text."""
        return self.piece_bytes(self.raw_tokens([token_id])[0])

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
        delta = text[len(self.emitted) :]
        self.emitted = text
        return delta

    def flush(self) -> str:
        text = self.tokenizer.decode(self.ids)
        delta = text[len(self.emitted) :]
        self.emitted = text
        return delta


def _check_text(text: object) -> None:
    """``TokenizerError`` unless ``text`` is a str of valid Unicode: a lone surrogate (half of a UTF-16 pair, as
    '\\ud800') has no UTF-8 form, so no tokenizer can read it."""
    if not isinstance(text, str):
        raise TokenizerError(f"text to tokenize must be a str, got {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise TokenizerError(
            f"the text holds a lone surrogate {text[error.start]!r} at character {error.start}: "
            "it is not valid Unicode text (half of a UTF-16 pair)"
        ) from None
