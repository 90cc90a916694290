"""The Quantization page's link to the engine: one stored block, bytes per format, and every weights mode live.

Owns reading one block of a projection exactly as the model's GGUF file stores it (codes,
scale, min) with what it decodes to and what the 4-bit kernel holds; the bytes each format
needs per weight, for the whole model and per generated token; this machine's memory speed,
measured live; and the same prompt through the model in each weights mode (an engine per
mode, loaded once per server), compared with float32. Plain data for ``ui/figures/quant.py``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import streamlit as st
import torch

from inference import Engine, load_engine
from inference.model.loader import gguf_source
from inference.model.quant_formats import INT4_FORMATS, INT8_FORMATS

from ui.shell import models
from ui.shell.resources import engine_for, weights_mode
from ui.compute.token_text import token_texts

MODE_LABELS = {"none": "float32", "bf16": "bfloat16", "gguf": "as stored (gguf)", "int8": "int8 rows", "int4": "int4 groups"}
BYTES_PER_WEIGHT = {"float32": 4.0, "bfloat16": 2.0, "Q8_0": 34 / 32, "Q4_1": 20 / 32, "Q4_0": 18 / 32}


def file_of(model: str):
    """The GGUF file ``model`` was loaded from, or None (a float checkpoint)."""
    return gguf_source(models.allowlist()[model])


# -- one stored block ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class StoredBlock:
    tensor: str  # GGUF name, e.g. "blk.0.attn_q.weight"
    type_name: str  # "Q4_1", ...
    shape: tuple[int, int]  # (rows, columns) as stored
    row: int
    block: int
    codes: list[int]  # the 32 integers stored
    scale: float  # d
    offset: float | None  # m (Q4_1), -dmin·m (Q4_K), None where the format has no offset
    decoded: np.ndarray  # (32,) the gguf package's own dequantization of the block
    kernel_held: np.ndarray | None  # (32,) what the 4-bit kernel multiplies by (scale and zero in bfloat16)
    block_bytes: int


@st.cache_resource(max_entries=4, show_spinner="Reading the file's tensor directory…")
def file_tensors(model: str) -> dict:
    """``model``'s GGUF tensors by file name (each a view into the memory-mapped file), read once per server.

    The gguf package parses every metadata field when it opens a file, Gemma's 262,144-entry vocabulary
    included (~12 s here); the block and the byte counts below share this one reading.
    """
    from gguf import GGUFReader

    path = file_of(model)
    return {} if path is None else {tensor.name: tensor for tensor in GGUFReader(path).tensors}


@st.cache_data(max_entries=8, show_spinner=False)
def stored_block(model: str, tensor: str = "blk.0.attn_q.weight", row: int = 0, block: int = 0) -> StoredBlock | None:
    """Block ``block`` of row ``row`` of ``tensor`` as the file stores it (None when the model has no GGUF file)."""
    from gguf.quants import dequantize

    found = file_tensors(model).get(tensor)
    if found is None:
        return None
    type_name = found.tensor_type.name
    raw = np.asarray(found.data)[row : row + 1]  # (1, bytes): one stored row
    decoded_row = dequantize(raw, found.tensor_type).astype(np.float32)[0]
    decoded = decoded_row[32 * block : 32 * (block + 1)]
    codes, scale, offset, held = [], float("nan"), None, None
    if type_name in INT4_FORMATS:
        groups = INT4_FORMATS[type_name](raw)
        codes = groups.codes[0, 32 * block : 32 * (block + 1)].tolist()
        scale, zero = float(groups.scale[0, block]), float(groups.zero[0, block])
        offset = zero - 8 * scale  # w = scale·q + offset
        q = np.array(codes, dtype=np.float32)
        held_scale, held_zero = (float(torch.tensor(v).to(torch.bfloat16)) for v in (scale, zero))
        held = (q - 8) * held_scale + held_zero
    elif type_name in INT8_FORMATS:
        groups = INT8_FORMATS[type_name](raw)
        codes = groups.codes[0, 32 * block : 32 * (block + 1)].tolist()
        scale = float(groups.scale[0, block])
    rows = int(found.shape[1]) if len(found.shape) > 1 else 1
    return StoredBlock(tensor, type_name, (rows, int(found.shape[0])), row, block, codes, scale, offset, decoded,
                       held, int(raw.nbytes) // max(len(decoded_row) // 32, 1))


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
    engine = engine_for(model)
    config = engine.config
    embedding = config.vocab_size * config.d_model
    per_token = engine.parameter_count - embedding + config.d_model + (embedding if config.tie_embeddings else 0)
    file_bytes, file_types = None, {}
    tensors = list(file_tensors(model).values())
    if tensors:
        file_bytes = int(sum(t.n_bytes for t in tensors))
        for tensor in tensors:
            file_types[tensor.tensor_type.name] = file_types.get(tensor.tensor_type.name, 0) + int(tensor.n_elements)
    return ModelBytes(engine.parameter_count, per_token, file_bytes, file_types, config.tie_embeddings,
                      dict(BYTES_PER_WEIGHT))


@st.cache_data(ttl=120, show_spinner="Timing this machine's memory…")
def memory_speed(megabytes: int = 256) -> float:
    """Bytes per second this machine reads, measured now: the best of five sums over a large tensor."""
    data = torch.empty(megabytes * 2**20 // 4).normal_()
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        data.sum()
        best = min(best, time.perf_counter() - started)
    return data.nbytes / best


# -- every weights mode on the current prompt --------------------------------------------------------------
def available_modes(model: str) -> list[str]:
    return ["none", "bf16"] + (["gguf"] if file_of(model) is not None else []) + ["int8", "int4"]


@st.cache_resource(max_entries=10, show_spinner="Loading the model in another weights mode…")
def engine_in_mode(model: str, mode: str) -> Engine:
    """``model`` with its weights in ``mode``; the app's own engine when it already runs that mode."""
    if mode == (weights_mode() or "none"):
        return engine_for(model)
    quant = None if mode in ("none", "bf16") else mode
    return load_engine(model=models.allowlist()[model], device="cpu", dtype="bfloat16" if mode == "bf16" else "float32",
                       quant=quant)


COMPARE_VALUES = 16 * 2**20  # logits compared per mode (float64)


@dataclass(frozen=True)
class ModeComparison:
    modes: list[str]
    descriptions: list[str]
    token_ids: list[int]  # the tokens compared (float32's top ones for the next token)
    token_strings: list[str]
    next_probs: np.ndarray  # (modes, tokens) probability of each token after the prompt
    top1_agreement: list[float]  # over every position of the prompt, against float32
    mean_kl: list[float]  # nats, over every position, KL(float32 || mode)
    positions: int


@st.cache_data(max_entries=16, show_spinner="Running the prompt in every weights mode…")
def compare_modes(model: str, prompt: str, chat: bool, top_n: int = 8) -> ModeComparison:
    """The prompt through every weights mode: next-token probabilities, top-1 agreement and KL against float32."""
    modes = available_modes(model)
    reference_engine = engine_in_mode(model, "none")
    # The last positions of the prompt, at most COMPARE_VALUES logits per mode in float64 (128 MB):
    # 256 positions of SmolLM2's 49,152-entry vocabulary, 64 of Gemma's 262,144.
    keep = max(1, min(256, COMPARE_VALUES // reference_engine.config.vocab_size))
    ids = reference_engine.encode_prompt(prompt, chat=chat)
    start = max(0, len(ids) - keep)
    reference = reference_engine.forward_logits(ids)[start:].double().log_softmax(-1)  # (T, V)
    top = reference[-1].topk(top_n).indices.tolist()
    probs, agreement, kls = [], [], []
    for mode in modes:  # one mode's logits at a time
        logp = reference if mode == "none" else engine_in_mode(model, mode).forward_logits(ids)[start:].double().log_softmax(-1)
        probs.append(logp[-1].exp()[top].numpy())
        agreement.append(float((logp.argmax(-1) == reference.argmax(-1)).double().mean()))
        kls.append(float((reference.exp() * (reference - logp)).sum(-1).mean()))
        del logp
    return ModeComparison(modes, [engine_in_mode(model, m).weights_description for m in modes], top,
                          token_texts(reference_engine.tokenizer, top), np.stack(probs), agreement, kls, len(ids) - start)


def decode_speed(model: str, mode: str, prompt_ids: list[int], n_tokens: int = 24) -> float:
    """Greedy decode tok/s of ``mode`` after the prompt, measured now (the steps after the first)."""
    from inference import SamplingParams

    engine = engine_in_mode(model, mode)
    params = SamplingParams(temperature=0, max_new_tokens=n_tokens, stop_on_eos=False)
    list(engine.generate(prompt_ids[-64:], SamplingParams(temperature=0, max_new_tokens=2, stop_on_eos=False)))
    steps = list(engine.generate(prompt_ids[-64:], params))
    return (len(steps) - 1) / sum(s.seconds for s in steps[1:])
