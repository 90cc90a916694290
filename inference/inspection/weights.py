"""The weights as the model file stores them, what they cost to read, and what each weights mode gives.

Owns reading one block of a projection exactly as a GGUF file stores it (codes, scale, offset,
what it decodes to and what the 4-bit kernel holds), the file's bytes per block type, this
machine's memory speed measured now, a prompt through several engines (one per weights mode)
compared with float32, and greedy decode speed.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..generation.engine import Engine
from ..generation.sampling import SamplingParams
from ..model.gguf_file import read_gguf
from ..model.quant_formats import INT4_FORMATS, INT8_FORMATS


def file_tensors(path: str | Path) -> dict:
    """A GGUF file's tensors by name (each a view into the memory-mapped file), as ``gguf.GGUFReader`` lists them.

    Read by ``inference.model.gguf_file``, which skips over the tokenizer's large arrays (the package's reader
    turns Gemma's 262,144-entry vocabulary into Python objects first: seconds).
    """
    return {tensor.name: tensor for tensor in read_gguf(path)[1]}


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


def stored_block(tensors: Mapping, tensor: str, row: int = 0, block: int = 0) -> StoredBlock | None:
    """Block ``block`` of row ``row`` of ``tensor`` (of ``file_tensors``) as the file stores it; None when absent."""
    from gguf.quants import dequantize

    found = tensors.get(tensor)
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
    return StoredBlock(
        tensor,
        type_name,
        (rows, int(found.shape[0])),
        row,
        block,
        codes,
        scale,
        offset,
        decoded,
        held,
        int(raw.nbytes) // max(len(decoded_row) // 32, 1),
    )


@dataclass(frozen=True)
class FileSummary:
    file_bytes: int  # the tensors, as stored
    weights_by_type: dict[str, int]  # block type -> weights stored in it


def file_summary(tensors: Mapping) -> FileSummary:
    """What a GGUF file's tensors (of ``file_tensors``) hold: bytes, and weights per block type."""
    by_type: dict[str, int] = {}
    for found in tensors.values():
        by_type[found.tensor_type.name] = by_type.get(found.tensor_type.name, 0) + int(found.n_elements)
    return FileSummary(int(sum(t.n_bytes for t in tensors.values())), by_type)


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


def decode_speed(engine: Engine, prompt_ids: list[int], n_tokens: int = 24) -> float:
    """Greedy decode tok/s after the prompt (its last 64 tokens), measured now (the steps after the first;
    a two-token run first, so the measured one finds everything warm)."""
    params = SamplingParams(temperature=0, max_new_tokens=n_tokens, stop_on_eos=False)
    list(engine.generate(prompt_ids[-64:], SamplingParams(temperature=0, max_new_tokens=2, stop_on_eos=False)))
    steps = list(engine.generate(prompt_ids[-64:], params))
    return (len(steps) - 1) / sum(s.seconds for s in steps[1:])
