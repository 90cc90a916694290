"""The model under interventions, as the Experiments page reads it: plain numbers in, plain numbers out.

Owns the forwards behind every experiment the explorer runs: each head's mean output (for
mean ablation), the next-token distribution under a spec, one layer of the head-importance
sweep, the activation-patching setup and one position of its sweep, and the direct logit
attribution as labelled terms (the greedy continuation under a spec is ``Engine.complete``'s). A spec comes in as
an ``Interventions`` without tensors; where it replaces heads by their means, the means come in
as an array (``EngineClient`` computes them once per prompt with ``head_means`` and keeps them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..generation import experiments
from ..generation.engine import Engine
from ..model.interventions import Interventions
from ..model.interventions import head_means as trace_head_means


def head_means(engine: Engine, ids: list[int]) -> np.ndarray:
    """Each head's output averaged over the prompt's positions (L, H, hd), for mean ablation."""
    _, trace = engine.traced_forward(list(ids))
    return trace_head_means(trace).numpy()


def with_means(spec: Interventions | None, means: np.ndarray | None) -> Interventions | None:
    """``spec`` with its mean-ablated heads' means filled in from ``means`` (L, H, hd) when it needs them."""
    if spec is None or not spec.needs_means:
        return spec
    if means is None:
        raise ValueError("this spec replaces heads by their means: pass head_means() of the prompt")
    return spec.with_means(torch.from_numpy(means))


def next_token_probs(
    engine: Engine, ids: list[int], spec: Interventions | None = None, means: np.ndarray | None = None
) -> np.ndarray:
    """softmax of the last position's logits, float64 (V,), under ``spec``."""
    logits = engine.forward_logits(list(ids), with_means(spec, means))[-1]
    return logits.double().softmax(-1).numpy()


def head_importance_layer(
    engine: Engine, ids: list[int], target: int, mode: str, factor: float, layer: int, means: np.ndarray | None = None
) -> np.ndarray:
    """log p(target) with each head of ``layer`` changed alone: (H,), one forward over a batch of H rows."""
    held = torch.from_numpy(means) if mode == "mean" and means is not None else None
    return experiments.ablate_layer_heads(engine, list(ids), layer, target, mode, factor, held).numpy()


@dataclass(frozen=True)
class PatchLogits:
    """What activation patching needs to know of its two prompts before any patch."""

    first_difference: int  # patches before it change nothing (the two streams are the same there)
    clean_answer: int
    corrupt_answer: int
    clean_gap: float  # logit(clean answer) - logit(corrupted answer), clean run
    corrupt_gap: float  # the same difference on the corrupted run


def patch_logits(engine: Engine, clean_ids: list[int], corrupt_ids: list[int]) -> PatchLogits:
    """Both prompts' answers and gaps; ``InterventionError`` when they cannot be compared position by position.

    The two answers may be the same token: the caller says why patching then measures nothing."""
    first = experiments.check_patch_prompts(clean_ids, corrupt_ids)
    clean_logits, corrupt_logits = engine.recompute_last(clean_ids), engine.recompute_last(corrupt_ids)
    clean_answer, corrupt_answer = int(clean_logits.argmax()), int(corrupt_logits.argmax())
    return PatchLogits(
        first,
        clean_answer,
        corrupt_answer,
        float(experiments.answer_gap(clean_logits, clean_answer, corrupt_answer)),
        float(experiments.answer_gap(corrupt_logits, clean_answer, corrupt_answer)),
    )


def clean_streams(engine: Engine, clean_ids: list[int]) -> np.ndarray:
    """The clean prompt's residual stream after each block (L, T, D)."""
    return experiments.clean_run(engine, list(clean_ids)).streams.numpy()


def patch_column(
    engine: Engine, corrupt_ids: list[int], streams: np.ndarray, position: int, setup: PatchLogits
) -> np.ndarray:
    """Share of the clean answer restored by patching ``position`` after each block: (L,), one batched forward."""
    gaps = experiments.patch_position(
        engine, list(corrupt_ids), torch.from_numpy(streams), position, setup.clean_answer, setup.corrupt_answer
    )
    return experiments.restored_share(gaps, setup.clean_gap, setup.corrupt_gap).numpy()


@dataclass(frozen=True)
class Patching:
    """Activation patching of two prompts: their answers and gaps, and what patching each position restores."""

    setup: PatchLogits
    positions: tuple[int, ...]  # the positions patched
    restored: np.ndarray  # (P, L) share of the clean answer restored by patching each position after each block


@dataclass(frozen=True)
class AttributionTerms:
    """Direct logit attribution of one token at the last position, as labelled terms that sum to its logit."""

    logit: float
    total: float
    residual: float
    bound: float
    magnitude: float
    labels: list[str]  # every term: "embeddings", "L3 H8", "MLP 3", "L3 attn bias", "patches", "final norm bias"
    values: np.ndarray  # (K,) matching ``labels``
    heads: np.ndarray  # (L, H)
    mlps: np.ndarray  # (L,)


def attribution(
    engine: Engine, ids: list[int], target: int, spec: Interventions | None = None, means: np.ndarray | None = None
) -> AttributionTerms:
    """``target``'s logit split into the embeddings, every head, every MLP and the biases (under ``spec``)."""
    split = engine.logit_attribution(list(ids), target, with_means(spec, means))
    heads, mlps = split.heads.numpy(), split.mlps.numpy()
    n_layers, n_heads = heads.shape
    labels = ["embeddings"] + [f"L{l} H{h}" for l in range(n_layers) for h in range(n_heads)]
    values = [split.embedding, *heads.flatten().tolist()]
    labels += [f"MLP {l}" for l in range(n_layers)]
    values += mlps.tolist()
    if bool(split.attention_bias.abs().sum() > 0):
        labels += [f"L{l} attn bias" for l in range(n_layers)]
        values += split.attention_bias.tolist()
    for label, value in (("patches", split.patches), ("final norm bias", split.final_bias)):
        if value != 0:
            labels.append(label)
            values.append(value)
    return AttributionTerms(
        split.logit, split.total, split.residual, split.bound, split.magnitude, labels, np.array(values), heads, mlps
    )
