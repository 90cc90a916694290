"""Opt-in records of a forward pass's internals, for the explorer.

A ``ForwardTrace`` is passed into ``Transformer.forward`` only when the UI wants to
show what happened inside; the fast path never builds one. Everything recorded is
detached, float32 and on the CPU, so it can be cached and plotted directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class LayerTrace:
    """What one transformer block did, for the positions of this forward (batch row 0..B-1)."""

    block_input: torch.Tensor  # (B, T, D) residual stream entering the block
    attn_output: torch.Tensor  # (B, T, D) attention sub-layer output (after any post-norm, before the residual add)
    after_attn: torch.Tensor  # (B, T, D) residual stream after the attention add
    mlp_input: torch.Tensor  # (B, T, D) normed stream fed to the feed-forward network
    mlp_output: torch.Tensor  # (B, T, D) feed-forward output (after any post-norm, before the residual add)
    block_output: torch.Tensor  # (B, T, D) residual stream leaving the block
    queries: torch.Tensor  # (B, H, T, hd) after RoPE
    keys: torch.Tensor  # (B, n_kv, S, hd) after RoPE, all positions attended to
    values: torch.Tensor  # (B, n_kv, S, hd)
    raw_scores: torch.Tensor  # (B, H, T, S) q·k, before scaling and masking
    scaled_scores: torch.Tensor  # (B, H, T, S) q·k / sqrt(hd), masked entries = -inf
    attention_probs: torch.Tensor  # (B, H, T, S) softmax of the scaled, masked scores
    head_outputs: torch.Tensor | None = None  # (B, H, T, hd) each head's weighted values (after any head edit)
    attn_input: torch.Tensor | None = None  # (B, T, D) the normed stream fed to attention
    # Gemma 3's four norms: each sub-layer's output before its post-norm (None where there is none)
    attn_before_norm: torch.Tensor | None = None  # (B, T, D)
    mlp_before_norm: torch.Tensor | None = None  # (B, T, D)


@dataclass
class ForwardTrace:
    """Everything one traced forward recorded; ``layers[i]`` is block i."""

    embeddings: torch.Tensor | None = None  # (B, T, D) token (+ learned position) embeddings
    layers: list[LayerTrace] = field(default_factory=list)
    final_hidden: torch.Tensor | None = None  # (B, T, D) after the final norm
    cache_start: int = 0  # positions [0, cache_start) were reused from the KV cache
    cache_end: int = 0  # positions [cache_start, cache_end) were computed and written now


def keep(tensor: torch.Tensor) -> torch.Tensor:
    """A detached float32 CPU copy, safe to hold after the forward returns."""
    return tensor.detach().to(device="cpu", dtype=torch.float32).clone()
