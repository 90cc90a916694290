"""The residual stream, read out: one block walked stage by stage, and the logit lens at every layer.

Owns ``traced_prompt`` (one traced forward of a prompt, as the block walk and the lens),
``last_position`` (one traced forward read at the last position, for the Overview picture) and
``logit_lens`` (the top-3 guesses of the final norm and output matrix applied to each layer's
stream, also under interventions, for the Experiments page). Returns token ids and numbers;
the explorer writes the tokens' text itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..generation.engine import Engine
from ..model.interventions import Interventions
from ..model.trace import ForwardTrace

# One pre-norm block (SmolLM2 / Llama), in order; the RMSNorm before attention sits inside "attention".
BLOCK_STAGES: tuple[str, ...] = (
    "block input",
    "attention output",
    "residual add 1",
    "RMSNorm",
    "feed-forward output",
    "residual add 2",
)
# A block with four norms (Gemma 3): each sub-layer is normalised before and after.
FOUR_NORM_STAGES: tuple[str, ...] = (
    "block input",
    "RMSNorm (pre-attention)",
    "attention output",
    "RMSNorm (post-attention)",
    "residual add 1",
    "RMSNorm (pre-MLP)",
    "feed-forward output",
    "RMSNorm (post-MLP)",
    "residual add 2",
)


LENS_POSITIONS = 16  # positions a lens keeps when the caller names none
LENS_ROWS = 96  # stream rows unembedded at once (Gemma: 96 × 262,144 float32 logits, 100 MB)


@dataclass(frozen=True)
class Lens:
    """For each layer (row 0 = embeddings, row i = after block i) and position from ``keep_from`` on: the top guesses."""

    top_ids: np.ndarray  # (L+1, T', 3) int
    top_probs: np.ndarray  # (L+1, T', 3) float64
    final_token_probability: np.ndarray  # (L+1,) probability of the model's final prediction, last position
    keep_from: int  # the first position shown


@dataclass(frozen=True)
class BlockWalk:
    """The residual stream through every block: norms for all positions, vectors at the last one."""

    stage_names: tuple[str, ...]
    shape: tuple[int, int]  # (T, D): every stage keeps this size
    norms: np.ndarray  # (L, S, T) L2 norm of each stage's vector at each position
    last_vectors: np.ndarray  # (L, S, D) each stage's vector at the last position


@dataclass(frozen=True)
class TracedPrompt:
    lens: Lens
    walk: BlockWalk


@dataclass(frozen=True)
class LastPosition:
    """One traced forward of a prompt, read at its last position (what the Overview picture draws)."""

    embeddings: np.ndarray  # (T, D) float32: every position's input vector (the embedding row, scaled)
    attention_last: np.ndarray  # (L, H, T) float32: every layer's and head's attention from the last token
    mlp_last: np.ndarray  # (L, D) float32: what each block's feed-forward network adds at the last position
    final_last: np.ndarray  # (D,) float32: the last block's output after the final norm, last position
    logits: np.ndarray  # (V,) float64: the last position's logits


def traced_prompt(
    engine: Engine, ids: list[int], keep_from: int | None = None, interventions: Interventions | None = None
) -> TracedPrompt:
    """One traced forward of ``ids`` (under ``interventions``): the block walk, and the lens from position
    ``keep_from`` on (default: the last ``LENS_POSITIONS``)."""
    logits, trace = engine.traced_forward(ids, interventions, last_only=True)  # (1, V): the answer, last position
    if keep_from is None:
        keep_from = max(0, len(ids) - LENS_POSITIONS)
    return TracedPrompt(lens=_lens(engine, trace, keep_from, int(logits[-1].argmax())), walk=_block_walk(trace))


def last_position(engine: Engine, ids: list[int]) -> LastPosition:
    """One traced forward of ``ids``, read at the last position (and every position's input vector)."""
    logits, trace = engine.traced_forward(ids, last_only=True)  # (1, V)
    return LastPosition(
        embeddings=trace.embeddings[0].float().numpy().copy(),  # (1, T, D) -> (T, D)
        attention_last=torch.stack([layer.attention_probs[0, :, -1, :] for layer in trace.layers]).float().numpy(),
        mlp_last=torch.stack([layer.mlp_output[0, -1] for layer in trace.layers]).float().numpy(),  # (L, D)
        final_last=trace.final_hidden[0, -1].float().numpy().copy(),  # (1, T, D) -> (D,)
        logits=logits[-1].double().numpy().copy(),  # (1, V) -> (V,)
    )


def _lens(engine: Engine, trace: ForwardTrace, keep_from: int, final_id: int) -> Lens:
    """The top-3 guesses of each stream (1, T, D) from position ``keep_from`` on.

    Every layer's rows go through the output matrix together, ``LENS_ROWS`` at a time: one pass over
    a dense (V, D) matrix serves many rows, and the (rows, V) logits stay bounded.
    """
    streams = [trace.embeddings] + [layer.block_output for layer in trace.layers]  # each (1, T, D)
    rows = torch.cat([stream[0, keep_from:] for stream in streams])  # ((L+1)·T', D)
    width = rows.shape[0] // len(streams)  # T'
    top_ids, top_probs, final_p = [], [], []
    for start in range(0, rows.shape[0], LENS_ROWS):
        probs = engine.unembed(rows[start : start + LENS_ROWS]).softmax(-1)  # (≤ LENS_ROWS, V)
        values, indices = probs.topk(3, dim=-1)  # (≤ LENS_ROWS, 3)
        top_ids.append(indices.numpy())
        top_probs.append(values.numpy())
        final_p.append(probs[:, final_id].numpy())  # (≤ LENS_ROWS,)
    shape = (len(streams), width, 3)
    return Lens(
        np.concatenate(top_ids).reshape(shape),  # ((L+1)·T', 3) -> (L+1, T', 3)
        np.concatenate(top_probs).astype(np.float64).reshape(shape),  # ((L+1)·T', 3) -> (L+1, T', 3)
        np.concatenate(final_p).astype(np.float64).reshape(len(streams), width)[:, -1],  # ((L+1)·T',) -> (L+1,)
        keep_from,
    )


def _block_walk(trace: ForwardTrace) -> BlockWalk:
    norms, vectors = [], []
    four_norms = trace.layers[0].attn_before_norm is not None
    for layer in trace.layers:
        if four_norms:  # the sub-layers' raw outputs, then what their post-norms make of them
            stages = [
                layer.block_input,
                layer.attn_input,
                layer.attn_before_norm,
                layer.attn_output,
                layer.after_attn,
                layer.mlp_input,
                layer.mlp_before_norm,
                layer.mlp_output,
                layer.block_output,
            ]  # each (1, T, D)
        else:
            stages = [
                layer.block_input,
                layer.attn_output,
                layer.after_attn,
                layer.mlp_input,
                layer.mlp_output,
                layer.block_output,
            ]  # each (1, T, D)
        stacked = torch.stack([s[0] for s in stages])  # (S, T, D)
        norms.append(stacked.norm(dim=-1).numpy())  # (S, T)
        vectors.append(stacked[:, -1].numpy())  # (S, D)
    _, t, d = trace.layers[0].block_input.shape
    names = FOUR_NORM_STAGES if four_norms else BLOCK_STAGES
    return BlockWalk(names, (t, d), np.stack(norms).astype(np.float64), np.stack(vectors).astype(np.float64))
