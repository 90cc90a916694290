"""The Quantization page's link to the engine: bytes per format, and every weights mode live.

Owns the bytes each format needs per weight, for the whole model and per generated token; this
machine's memory speed, measured live; and the same prompt through the model in each weights mode
(a client per mode, loaded once per server), compared with float32. Plain data for
``ui/quantization/figures.py``; the stored block view is ``ui/quantization/blocks.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from inference.api import ModeComparison, memory_read_speed
from inference.api import decode_speed as timed_decode_speed
from ui.common.resources import client_for, client_in_mode
from ui.common.token_text import token_texts

MODE_LABELS = {
    "none": "float32",
    "bf16": "bfloat16",
    "gguf": "as stored (gguf)",
    "int8": "int8 rows",
    "int4": "int4 groups",
}
BYTES_PER_WEIGHT = {"float32": 4.0, "bfloat16": 2.0, "Q8_0": 34 / 32, "Q4_1": 20 / 32, "Q4_0": 18 / 32}


def has_file(model: str) -> bool:
    """Whether ``model`` was loaded from a GGUF file (a float checkpoint has no stored blocks)."""
    return client_for(model).file_summary() is not None


# -- bytes ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelBytes:
    n_params: int
    per_token_params: int  # weights a decode step reads: every matrix but the input embedding, plus one row
    file_bytes: int | None  # the GGUF file's tensors, as stored
    file_types: dict[str, int]  # block type -> weights stored in it (empty without a GGUF file)
    tied: bool  # the output matrix is the embedding matrix
    formats: dict[str, float]  # format -> bytes per weight


@st.cache_data(max_entries=4, show_spinner=False)
def model_bytes(model: str) -> ModelBytes:
    client = client_for(model)
    config, n_params = client.info.config, client.info.parameter_count
    embedding = config.vocab_size * config.d_model
    per_token = n_params - embedding + config.d_model + (embedding if config.tie_embeddings else 0)
    summary = client.file_summary()
    file_bytes, file_types = (None, {}) if summary is None else (summary.file_bytes, summary.weights_by_type)
    return ModelBytes(n_params, per_token, file_bytes, file_types, config.tie_embeddings, dict(BYTES_PER_WEIGHT))


@st.cache_data(ttl=120, show_spinner="Timing this machine's memory…")
def memory_speed(megabytes: int = 256) -> float:
    """Bytes per second this machine reads, measured now: the best of five sums over a large tensor."""
    return memory_read_speed(megabytes)


# -- every weights mode on the current prompt --------------------------------------------------------------
def available_modes(model: str) -> list[str]:
    return ["none", "bf16"] + (["gguf"] if has_file(model) else []) + ["int8", "int4"]


@dataclass(frozen=True)
class LabelledModes(ModeComparison):
    """The engine's comparison of the weights modes (``ModeComparison``) with the compared tokens written."""

    token_strings: list[str]


@st.cache_data(max_entries=16, show_spinner="Running the prompt in every weights mode…")
def compare_modes(model: str, prompt: str, chat: bool, top_n: int = 8) -> LabelledModes:
    """The prompt through every weights mode: next-token probabilities, top-1 agreement and KL against float32
    over its last positions (at most 128 MB of float64 logits per mode: 256 positions of SmolLM2's 49,152-entry
    vocabulary, 64 of Gemma's 262,144)."""
    clients = {mode: client_in_mode(model, mode) for mode in available_modes(model)}
    ids = clients["none"].encode_prompt(prompt, chat=chat)
    compared = clients["none"].compare_modes(clients, ids, top_n)
    return LabelledModes(**vars(compared), token_strings=token_texts(clients["none"].tokenizer, compared.token_ids))


def decode_speed(model: str, mode: str, prompt_ids: list[int], n_tokens: int = 24) -> float:
    """Greedy decode tok/s of ``mode`` after the prompt, measured now (the steps after the first)."""
    return timed_decode_speed(client_in_mode(model, mode), prompt_ids, n_tokens)
