"""The weights as the model file stores them, what they cost to read, and what each weights mode gives.

Owns the file's tensors (read by the engine's own GGUF reader, ``inference.model.gguf_file``; one
block of them is read by ``blocks``), the file's bytes per block type, this machine's memory speed
measured now, and a prompt through several engines (one per weights mode) compared with float32.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..generation.engine import Engine
from ..model.gguf_file import read_gguf
from .blocks import BLOCK_SIZES


def file_tensors(path: str | Path) -> dict:
    """A GGUF file's tensors by name (each a view into the memory-mapped file), as ``gguf.GGUFReader`` lists them.

    Read by ``inference.model.gguf_file``, which skips over the tokenizer's large arrays (the package's reader
    turns Gemma's 262,144-entry vocabulary into Python objects first: seconds).
    """
    return {tensor.name: tensor for tensor in read_gguf(path)[1]}


@dataclass(frozen=True)
class FileSummary:
    file_bytes: int  # the tensors, as stored
    weights_by_type: dict[str, int]  # block type (float types included) -> weights stored in it
    block_tensors: dict[str, list[str]]  # block type read by ``blocks`` -> its 2-D tensors' names, in file order


def file_summary(tensors: Mapping) -> FileSummary:
    """What a GGUF file's tensors (of ``file_tensors``) hold: bytes, and weights per block type."""
    by_type: dict[str, int] = {}
    block_tensors: dict[str, list[str]] = {}
    for name, found in tensors.items():
        type_name = found.tensor_type.name
        by_type[type_name] = by_type.get(type_name, 0) + int(found.n_elements)
        if type_name in BLOCK_SIZES and len(found.shape) > 1:
            block_tensors.setdefault(type_name, []).append(name)
    return FileSummary(int(sum(t.n_bytes for t in tensors.values())), by_type, block_tensors)


def memory_read_speed(megabytes: int = 256) -> float:
    """Bytes per second this machine reads, measured now: the best of five sums over a large tensor."""
    data = torch.empty(megabytes * 2**20 // 4).normal_()
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        data.sum()
        best = min(best, time.perf_counter() - started)
    return data.nbytes / best


@dataclass(frozen=True)
class ModeComparison:
    modes: list[str]
    descriptions: list[str]
    token_ids: list[int]  # the tokens compared (float32's top ones for the next token)
    next_probs: np.ndarray  # (modes, tokens) probability of each token after the prompt
    top1_agreement: list[float]  # over every position compared, against float32
    mean_kl: list[float]  # nats, over every position compared, KL(float32 || mode)
    positions: int


def compare_modes(
    engines: Mapping[str, Engine], ids: list[int], top_n: int = 8, compare_values: int = 16 * 2**20
) -> ModeComparison:
    """``ids`` through each engine (weights mode -> engine; "none", float32, is the reference): next-token
    probabilities of float32's top tokens, top-1 agreement and KL against float32, over the last positions,
    at most ``compare_values`` logits per mode in float64 (one mode's logits at a time)."""
    reference_engine = engines["none"]
    keep = max(1, min(256, compare_values // reference_engine.config.vocab_size))
    start = max(0, len(ids) - keep)
    reference = reference_engine.forward_logits(ids)[start:].double().log_softmax(-1)  # (T, V)
    top = reference[-1].topk(top_n).indices.tolist()
    probs, agreement, kls = [], [], []
    for mode, engine in engines.items():
        logp = reference if mode == "none" else engine.forward_logits(ids)[start:].double().log_softmax(-1)
        probs.append(logp[-1].exp()[top].numpy())
        agreement.append(float((logp.argmax(-1) == reference.argmax(-1)).double().mean()))
        kls.append(float((reference.exp() * (reference - logp)).sum(-1).mean()))
        del logp
    return ModeComparison(
        list(engines),
        [engine.weights_description for engine in engines.values()],
        top,
        np.stack(probs),
        agreement,
        kls,
        len(ids) - start,
    )
