"""One decode step (one new token per row) through a Llama-family model, written so torch.compile can fuse it.

Owns ``DecodeStep``, the fast path for the step that dominates generation: every row feeds one
token after the positions already in its ``KVCache``. It computes exactly what
``Block.forward`` computes for that case (RMSNorm, fused QKV, RoPE, grouped-query attention
over the cache, output projection, SwiGLU, two residual adds; tests compare the two), in a
form with no Python bookkeeping inside the layer: the cache is written in place at the
step's column and read back as one slice, and the key mask is a tensor. Compiled, the
thirty layers share one fused graph (torch.compile with inductor's C++ wrapper). It is used
only when a model is loaded with ``compile=True`` (and a C++ compiler exists; otherwise the
loader says so and keeps the eager path, which is as fast as this function run eagerly).

Only the plain decode step takes this path: prefill, traced forwards, the slot cache of
continuous batching and other model families go through ``Transformer.forward`` as always.
"""
from __future__ import annotations

import math
import shutil

import torch
import torch.nn.functional as F

from .kv_cache import KVCache


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE on (B, h, 1, hd) with the half-split pairs of ``transformer.rotate_half``."""
    first, second = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-second, first], dim=-1) * sin


def decode_block(block, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, keys: torch.Tensor,
                 values: torch.Tensor, column: int, key_ok: torch.Tensor) -> torch.Tensor:
    """One block for one new token per row; writes its K/V into ``keys``/``values`` at ``column``.

    x (B, 1, D); cos, sin (B, 1, 1, hd); keys, values (B, n_kv, capacity, hd), this layer's cache;
    key_ok (B, 1, 1, column + 1): which cached positions each row may attend to.
    """
    attn, config = block.attn, block.attn.config
    batch, n_heads, n_kv, head_dim = x.shape[0], config.n_heads, config.n_kv_heads, config.head_dim
    normed = F.rms_norm(x, (x.shape[-1],), block.attn_norm.weight, block.attn_norm.eps)
    q, k, v = attn.qkv(normed).split([n_heads * head_dim, n_kv * head_dim, n_kv * head_dim], dim=-1)
    q = _rotate(q.view(batch, n_heads, 1, head_dim), cos, sin)  # (B, H, 1, hd)
    k = _rotate(k.view(batch, n_kv, 1, head_dim), cos, sin)  # (B, n_kv, 1, hd)
    keys[:, :, column : column + 1] = k
    values[:, :, column : column + 1] = v.view(batch, n_kv, 1, head_dim)
    seen_k, seen_v = keys[:, :, : column + 1], values[:, :, : column + 1]  # (B, n_kv, S, hd)
    grouped = q.view(batch, n_kv, n_heads // n_kv, head_dim)  # a K/V head's queries side by side
    scores = (grouped @ seen_k.transpose(-1, -2)) * (1.0 / math.sqrt(head_dim))  # (B, n_kv, group, S)
    probs = scores.masked_fill(~key_ok, float("-inf")).softmax(dim=-1)
    attended = (probs @ seen_v).reshape(batch, 1, n_heads * head_dim)  # (B, 1, H*hd)
    x = x + attn.out(attended)
    normed = F.rms_norm(x, (x.shape[-1],), block.mlp_norm.weight, block.mlp_norm.eps)
    gate, up = block.mlp.gate_up(normed).chunk(2, dim=-1)  # each (B, 1, d_ff)
    return x + block.mlp.down(F.silu(gate) * up)


def compiler_problem() -> str | None:
    """Why torch.compile cannot be used here (None when it can)."""
    if shutil.which("g++") is None and shutil.which("c++") is None:
        return "no C++ compiler (g++) on this machine"
    try:
        import torch._inductor  # noqa: F401
    except ImportError as exc:  # a build without inductor
        return f"torch's compiler is unavailable: {exc}"
    return None


class DecodeStep:
    """The compiled decode step of one model: compiled on its first step, then shared by every request."""

    def __init__(self) -> None:
        import torch._dynamo

        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 16)
        self._block = torch.compile(decode_block, dynamic=True, options={"cpp_wrapper": True})

    @staticmethod
    def applies(model, kv_cache, steps: int, trace) -> bool:
        """Whether this forward is a plain decode step of a Llama-family model through a ``KVCache``."""
        return (steps == 1 and trace is None and type(kv_cache) is KVCache and model.config.family == "llama"
                and kv_cache.length < kv_cache.capacity)

    def __call__(self, model, input_ids: torch.Tensor, kv_cache: KVCache, positions: torch.Tensor) -> torch.Tensor:
        """Hidden states (B, 1, D) after the last block; writes this step's K/V and commits it."""
        column = kv_cache.length
        batch = input_ids.shape[0]
        key_ok = torch.ones(batch, 1, 1, column + 1, dtype=torch.bool, device=input_ids.device)
        if kv_cache.key_padding_mask is not None:  # left-padded rows (static batching); new columns are real
            key_ok = kv_cache.key_padding_mask[:batch, None, None, : column + 1]  # (B, 1, 1, S)
        with torch.no_grad():  # not inference mode: compiled graphs write the cache in place
            x = model.embed(input_ids)  # (B, 1, D)
            cos, sin = model.rope(positions, x.dtype)  # (B, 1, 1, hd) each
            for index, block in enumerate(model.layers):
                x = self._block(block, x, cos, sin, kv_cache.keys[index, :batch], kv_cache.values[index, :batch],
                                column, key_ok)
        kv_cache.length += 1
        return x
