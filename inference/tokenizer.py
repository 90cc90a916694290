"""Text <-> token ids, the chat template, and streaming decoding.

Owns a thin wrapper over a ``transformers`` fast tokenizer (itself a real
``tokenizers.Tokenizer``, reachable as ``.backend``). The engine knows nothing
about text beyond what this file offers.
"""
from __future__ import annotations

from pathlib import Path


class TokenizerError(ValueError):
    """Text could not be tokenized as asked (for example, an empty prompt)."""


class Tokenizer:
    def __init__(self, hf_tokenizer) -> None:
        if not getattr(hf_tokenizer, "is_fast", False):
            raise TokenizerError("the model's tokenizer is not a fast (tokenizers-backed) tokenizer")
        self.hf = hf_tokenizer
        self.backend = hf_tokenizer.backend_tokenizer  # tokenizers.Tokenizer

    @classmethod
    def from_folder(cls, folder: str | Path) -> "Tokenizer":
        from transformers import AutoTokenizer

        return cls(AutoTokenizer.from_pretrained(str(folder), use_fast=True, trust_remote_code=False))

    @property
    def vocab_size(self) -> int:
        return len(self.hf)

    @property
    def chat_template(self) -> str | None:
        return self.hf.chat_template

    @property
    def special_ids(self) -> set[int]:
        return set(self.hf.all_special_ids)

    @property
    def added_texts(self) -> list[str]:
        """Added tokens' texts (``<|im_start|>``, ``<repo_name>``, …): typed in a prompt, each reads as that token."""
        return [token.content for token in self.hf.added_tokens_decoder.values()]

    def encode(self, text: str) -> list[int]:
        return list(self.hf.encode(text, add_special_tokens=True))

    def decode(self, ids: list[int]) -> str:
        return self.hf.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def token_strings(self, ids: list[int]) -> list[str]:
        """Each id's own text (what it adds when decoded alone; may hold a partial UTF-8 '\ufffd')."""
        return [self.decode([i]) for i in ids]

    def raw_tokens(self, ids: list[int]) -> list[str]:
        """The vocabulary entries themselves (byte-level BPE shows a space as 'Ġ')."""
        return self.hf.convert_ids_to_tokens(list(ids))

    def apply_chat(self, prompt: str, system: str | None = None) -> str:
        """The prompt wrapped as one user turn in the model's chat template, ready for the reply."""
        if not self.chat_template:
            raise TokenizerError("this model's tokenizer has no chat template")
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        return self.hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


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
