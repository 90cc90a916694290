"""Interpretability experiments built from batched forwards with interventions: head importance and activation patching.

Owns the two sweeps the explorer's Experiments page runs, one batched forward at a
time so a caller can show progress (and cache each):

- **head importance**: ablate each head of a layer in turn, one forward over a batch of
  ``n_heads`` rows (row h ablates head h), and read the change in the target token's
  log-probability at the last position;
- **activation patching**: run the corrupted prompt with the residual stream after one
  block, at one position, replaced by the clean run's; one forward per position over a
  batch of layers, reusing the corrupted run's K/V before that position. The score is the share of the clean answer restored:
  (d_patched - d_corrupt) / (d_clean - d_corrupt), with d = logit(clean answer) -
  logit(corrupted answer) at the last position: 0 = no better than the corrupted run,
  1 = as good as the clean one.

Every forward here is the engine's batched prefill (``Engine.prefill_batch``) with a spec per
row (``interventions.py``); nothing is stored on the engine.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..model.interventions import HeadEdit, InterventionError, Interventions, ResidualPatch, head_means
from .engine import Engine


def target_logprob(engine: Engine, ids: list[int], target_id: int) -> float:
    """log p(target) at the last position of an unedited forward."""
    return float(engine.recompute_last(ids).log_softmax(-1)[target_id])


def prompt_head_means(engine: Engine, ids: list[int]) -> torch.Tensor:
    """Each head's mean output over the prompt's positions (L, H, hd), for mean ablation."""
    _, trace = engine.traced_forward(ids)
    return head_means(trace)


def ablate_layer_heads(
    engine: Engine,
    ids: list[int],
    layer: int,
    target_id: int,
    mode: str = "zero",
    factor: float = 0.0,
    means: torch.Tensor | None = None,
) -> torch.Tensor:
    """log p(target) at the last position with each head of ``layer`` ablated alone: (H,), one batched forward."""
    config = engine.config
    if not 0 <= layer < config.n_layers:
        raise InterventionError(f"layer {layer} is out of range: the model has 0..{config.n_layers - 1}")
    if not 0 <= target_id < config.vocab_size:
        raise InterventionError(f"token id {target_id} is outside the vocabulary (0..{config.vocab_size - 1})")
    if mode == "mean" and means is None:
        means = prompt_head_means(engine, ids)
    specs = [
        Interventions(heads=(HeadEdit(layer, head, mode, factor, mean=means[layer, head] if mode == "mean" else None),))
        for head in range(config.n_heads)
    ]
    batch = torch.tensor([ids], dtype=torch.long).expand(config.n_heads, -1)  # (H, T)
    logits = engine.prefill_batch(batch, interventions=specs)  # (H, V)
    return logits.log_softmax(-1)[:, target_id]  # (H,)


@dataclass(frozen=True)
class CleanRun:
    """What activation patching needs from the clean prompt: every block's output stream and its logits."""

    streams: torch.Tensor  # (L, T, D) the residual stream after each block
    last_logits: torch.Tensor  # (V,)


def clean_run(engine: Engine, clean_ids: list[int]) -> CleanRun:
    logits, trace = engine.traced_forward(clean_ids)
    streams = torch.stack([layer.block_output[0] for layer in trace.layers])  # (L, T, D)
    return CleanRun(streams, logits[-1])


def check_patch_prompts(clean_ids: list[int], corrupt_ids: list[int]) -> int:
    """The first position where the prompts differ; ``InterventionError`` unless they have equal length and differ."""
    if len(clean_ids) != len(corrupt_ids):
        raise InterventionError(
            f"the clean prompt has {len(clean_ids)} tokens and the corrupted one "
            f"{len(corrupt_ids)}: patching replaces position by position, so they need the "
            "same number of tokens"
        )
    first = next((i for i, (a, b) in enumerate(zip(clean_ids, corrupt_ids)) if a != b), None)
    if first is None:
        raise InterventionError("the two prompts are the same tokens: there is nothing to restore")
    return first


def answer_gap(logits: torch.Tensor, clean_answer: int, corrupt_answer: int) -> torch.Tensor:
    """d = logit(clean answer) - logit(corrupted answer), for (…, V) logits."""
    return logits[..., clean_answer] - logits[..., corrupt_answer]


def patch_position(
    engine: Engine,
    corrupt_ids: list[int],
    clean_streams: torch.Tensor,
    position: int,
    clean_answer: int,
    corrupt_answer: int,
) -> torch.Tensor:
    """d for the corrupted prompt with the stream at ``position`` patched after each block in turn: (L,).

    ``clean_streams`` is the clean run's (L, T, D). One forward over a batch of L rows (row l
    patches after block l). A patch cannot change earlier positions (attention looks back
    only), so the rows share the corrupted run's K/V for positions 0..position-1: they are
    computed once, copied into the batch's cache, and the forward runs only the positions
    from ``position`` on.
    """
    n_layers, steps = engine.config.n_layers, len(corrupt_ids)
    if not 0 <= position < steps:
        raise InterventionError(f"position {position} is out of range: the prompt has 0..{steps - 1}")
    cache = engine.new_cache(steps, batch_size=n_layers)
    if position:
        prefix = engine.new_cache(position)
        engine.prefill(corrupt_ids[:position], prefix)
        cache.keys[:, :, :, :position] = prefix.keys[:, :1]  # (L, rows, n_kv, P, hd): one prefix for every row
        cache.values[:, :, :, :position] = prefix.values[:, :1]
        cache.length = position  # those positions are committed, exactly as a prefill of the prefix leaves them
    specs = [
        Interventions(patches=(ResidualPatch(layer, position, clean_streams[layer, position]),))
        for layer in range(n_layers)
    ]
    rest = torch.tensor([corrupt_ids[position:]], dtype=torch.long).expand(n_layers, -1)  # (L, T - position)
    logits = engine.prefill_batch(rest, cache, interventions=specs)  # (L, V)
    return answer_gap(logits, clean_answer, corrupt_answer)


def restored_share(gap: torch.Tensor | float, clean_gap: float, corrupt_gap: float) -> torch.Tensor | float:
    """How much of the clean answer a patch restores: 0 = the corrupted run's gap, 1 = the clean run's."""
    if clean_gap == corrupt_gap:
        raise InterventionError(
            "the clean and corrupted prompts give the same logit difference: there is "
            "nothing to restore (choose answers that differ between them)"
        )
    return (gap - corrupt_gap) / (clean_gap - corrupt_gap)
