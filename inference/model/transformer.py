"""The transformer forward pass, in plain PyTorch, for the Llama and GPT-2 families.

Owns the modules (norm, rotary embedding, attention, MLP, block, model) and nothing
else: weights come from ``weights.py``, the cache is passed in from outside
(``kv_cache.py``), and tracing is opt-in (``trace.py``). Llama: RMSNorm, RoPE,
grouped-query attention, SwiGLU. GPT-2: LayerNorm, learned positions, GELU.
Q/K/V are one fused projection, as are the SwiGLU gate and up projections, so a
decode step launches as few matmuls as possible.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig
from .decode_step import DecodeStep
from .kv_cache import KVCache, causal_padding_mask
from .trace import ForwardTrace, LayerTrace, keep


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Normalise in float32 as the reference does, then scale in the model's dtype.
        normed = F.rms_norm(x.float(), (x.shape[-1],), eps=self.eps)
        return self.weight * normed.to(x.dtype)


def make_norm(config: ModelConfig) -> nn.Module:
    if config.family == "llama":
        return RMSNorm(config.d_model, config.norm_eps)
    return nn.LayerNorm(config.d_model, eps=config.norm_eps)


class RotaryEmbedding(nn.Module):
    """Precomputed RoPE cos/sin tables for every position up to the context length."""

    def __init__(self, head_dim: int, theta: float, max_seq_len: int) -> None:
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)  # (P, hd/2)
        angles = torch.cat([angles, angles], dim=-1)  # (P, hd)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin for ``positions`` (B, T), each (B, 1, T, hd): looked up once per forward."""
        cos = self.cos[positions][:, None].to(dtype)  # (B, 1, T, hd)
        sin = self.sin[positions][:, None].to(dtype)  # (B, 1, T, hd)
        return cos, sin


def apply_rotary(x: torch.Tensor, angles: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Rotate ``x`` (B, h, T, hd) by the RoPE angles of its positions."""
    cos, sin = angles
    return x * cos + rotate_half(x) * sin


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat([-second, first], dim=-1)


class Attention(nn.Module):
    def __init__(self, config: ModelConfig, layer_index: int) -> None:
        super().__init__()
        self.config = config
        self.layer_index = layer_index
        qkv_dim = (config.n_heads + 2 * config.n_kv_heads) * config.head_dim
        self.qkv = nn.Linear(config.d_model, qkv_dim, bias=config.attention_bias)
        self.out = nn.Linear(config.n_heads * config.head_dim, config.d_model, bias=config.attention_bias)

    def forward(
        self,
        x: torch.Tensor,
        rope_angles: tuple[torch.Tensor, torch.Tensor] | None,
        kv_cache: KVCache | None,
        mask: torch.Tensor | None,
        record: dict | None,
    ) -> torch.Tensor:
        cfg = self.config
        batch, steps, _ = x.shape
        q, k, v = self.qkv(x).split(
            [cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim], dim=-1
        )
        q = q.view(batch, steps, cfg.n_heads, cfg.head_dim).transpose(1, 2)  # (B, H, T, hd)
        k = k.view(batch, steps, cfg.n_kv_heads, cfg.head_dim).transpose(1, 2)  # (B, n_kv, T, hd)
        v = v.view(batch, steps, cfg.n_kv_heads, cfg.head_dim).transpose(1, 2)  # (B, n_kv, T, hd)
        if rope_angles is not None:
            q, k = apply_rotary(q, rope_angles), apply_rotary(k, rope_angles)
        if kv_cache is not None:
            k, v = kv_cache.append(self.layer_index, k, v)  # (B, n_kv, S, hd)

        if record is None:
            attended = self._fast_attention(q, k, v, mask)  # (B, H, T, hd)
        else:
            attended = self._traced_attention(q, k, v, mask, record)
        attended = attended.transpose(1, 2).reshape(batch, steps, cfg.n_heads * cfg.head_dim)  # (B, T, H*hd)
        return self.out(attended)

    def _fast_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                        mask: torch.Tensor | None) -> torch.Tensor:
        """SDPA, with grouped-query attention arranged for the device (all paths give the same numbers)."""
        batch, n_heads, steps, head_dim = q.shape
        group, n_kv = self.config.queries_per_kv, self.config.n_kv_heads
        if steps == 1 and group > 1:
            # Decode: the group's queries all see every cached key, so they can stand in the
            # query-length slot of their K/V head; no copy of K or V is made.
            grouped = q.view(batch, n_kv, group, head_dim)  # (B, n_kv, group, hd)
            out = F.scaled_dot_product_attention(grouped, k, v, attn_mask=mask)  # (B, n_kv, group, hd)
            return out.view(batch, n_heads, 1, head_dim)  # (B, H, 1, hd)
        if group > 1 and not q.is_cuda:
            # SDPA's enable_gqa path is ~40x slower than plain SDPA on CPU (torch 2.13):
            # give every query head its own copy of its K/V head instead.
            k = k.repeat_interleave(group, dim=1)  # (B, H, S, hd)
            v = v.repeat_interleave(group, dim=1)  # (B, H, S, hd)
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=mask is None and steps > 1, enable_gqa=q.is_cuda and group > 1
        )  # (B, H, T, hd)

    def _traced_attention(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, record: dict
    ) -> torch.Tensor:
        """The same attention as SDPA, step by step, keeping every intermediate."""
        steps, total = q.shape[2], k.shape[2]
        group = self.config.queries_per_kv
        k_rep = k.repeat_interleave(group, dim=1)  # (B, H, S, hd)
        v_rep = v.repeat_interleave(group, dim=1)  # (B, H, S, hd)
        raw = q @ k_rep.transpose(-2, -1)  # (B, H, T, S)
        if mask is None:
            key_ok = torch.ones(q.shape[0], total, dtype=torch.bool, device=q.device)
            mask = causal_padding_mask(key_ok, total - steps)  # (B, 1, T, S)
        scaled = (raw / math.sqrt(self.config.head_dim)).masked_fill(~mask, float("-inf"))
        probs = scaled.float().softmax(dim=-1).to(q.dtype)  # (B, H, T, S)
        record.update(
            queries=keep(q), keys=keep(k), values=keep(v),
            raw_scores=keep(raw), scaled_scores=keep(scaled), attention_probs=keep(probs),
        )
        return probs @ v_rep  # (B, H, T, hd)


class MLP(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.family = config.family
        if config.family == "llama":
            self.gate_up = nn.Linear(config.d_model, 2 * config.d_ff, bias=config.mlp_bias)
        else:
            self.up = nn.Linear(config.d_model, config.d_ff, bias=config.mlp_bias)
        self.down = nn.Linear(config.d_ff, config.d_model, bias=config.mlp_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.family == "llama":
            gate, up = self.gate_up(x).chunk(2, dim=-1)  # each (B, T, d_ff)
            return self.down(F.silu(gate) * up)
        return self.down(F.gelu(self.up(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, config: ModelConfig, layer_index: int) -> None:
        super().__init__()
        self.attn_norm = make_norm(config)
        self.attn = Attention(config, layer_index)
        self.mlp_norm = make_norm(config)
        self.mlp = MLP(config)

    def forward(self, x, rope_angles, kv_cache, mask, trace: ForwardTrace | None) -> torch.Tensor:
        record = {} if trace is not None else None
        attn_output = self.attn(self.attn_norm(x), rope_angles, kv_cache, mask, record)
        after_attn = x + attn_output
        mlp_input = self.mlp_norm(after_attn)
        mlp_output = self.mlp(mlp_input)
        out = after_attn + mlp_output
        if trace is not None:
            trace.layers.append(LayerTrace(
                block_input=keep(x), attn_output=keep(attn_output), after_attn=keep(after_attn),
                mlp_input=keep(mlp_input), mlp_output=keep(mlp_output), block_output=keep(out), **record,
            ))
        return out


class Transformer(nn.Module):
    """Weights and the forward pass; holds no per-request state."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.pos_embed = nn.Embedding(config.max_seq_len, config.d_model) if config.family == "gpt2" else None
        self.rope = (
            RotaryEmbedding(config.head_dim, config.rope_theta, config.max_seq_len)
            if config.family == "llama" else None
        )
        self.layers = nn.ModuleList(Block(config, i) for i in range(config.n_layers))
        self.final_norm = make_norm(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.embed.weight
        self.quantization = None  # a QuantSummary once quant.quantize_model has swapped the projections
        self.decode_step: DecodeStep | None = None  # the compiled one-token step, with load_model(compile=True)
        self.compile_note: str | None = None  # why compile=True fell back to the eager path, when it did

    def forward(
        self,
        input_ids: torch.Tensor,
        kv_cache: KVCache | None = None,
        positions: torch.Tensor | None = None,
        padding_mask: torch.Tensor | None = None,
        last_only: bool = False,
        trace: ForwardTrace | None = None,
    ) -> torch.Tensor:
        """Logits (B, T, V), or (B, 1, V) with ``last_only``.

        ``input_ids`` (B, T) continue the sequences held in ``kv_cache`` (from its length
        on) or, without a cache, are the whole sequences. ``padding_mask`` (B, T) marks
        real tokens (False = left padding); ``positions`` (B, T) default to consecutive
        positions after the cache.
        """
        if self.decode_step is not None and padding_mask is None and DecodeStep.applies(
                self, kv_cache, input_ids.shape[1], trace):
            return self._compiled_decode(input_ids, kv_cache, positions, last_only)
        with torch.inference_mode():
            return self._forward(input_ids, kv_cache, positions, padding_mask, last_only, trace)

    def _compiled_decode(self, input_ids, kv_cache, positions, last_only) -> torch.Tensor:
        if positions is None:
            positions = torch.full_like(input_ids, kv_cache.length)  # (B, 1)
        x = self.decode_step(self, input_ids, kv_cache, positions)  # (B, 1, D)
        with torch.inference_mode():
            return self.lm_head(self.final_norm(x))

    def _forward(self, input_ids, kv_cache, positions, padding_mask, last_only, trace) -> torch.Tensor:
        batch, steps = input_ids.shape
        start = kv_cache.length if kv_cache is not None else 0
        if positions is None:
            positions = torch.arange(start, start + steps, device=input_ids.device).expand(batch, steps)
        mask = self._mask(batch, steps, start, kv_cache, padding_mask, input_ids.device)

        x = self.embed(input_ids)  # (B, T, D)
        if self.pos_embed is not None:
            x = x + self.pos_embed(positions)
        if trace is not None:
            trace.embeddings, trace.cache_start, trace.cache_end = keep(x), start, start + steps
        rope_angles = self.rope(positions, x.dtype) if self.rope is not None else None
        for block in self.layers:
            x = block(x, rope_angles, kv_cache, mask, trace)
        if kv_cache is not None:
            kv_cache.commit()
        if last_only:
            x = x[:, -1:]  # (B, 1, D)
        x = self.final_norm(x)
        if trace is not None:
            trace.final_hidden = keep(x)
        return self.lm_head(x)

    def _mask(self, batch, steps, start, kv_cache, padding_mask, device) -> torch.Tensor | None:
        """The attention mask for this forward, or ``None`` when SDPA's own causal mask is exact."""
        if kv_cache is not None:
            if padding_mask is not None:
                kv_cache.set_padding(padding_mask)
            mask = kv_cache.attention_mask(steps)
            if mask is not None or steps == 1 or start == 0:
                return mask
            key_ok = torch.ones(batch, start + steps, dtype=torch.bool, device=device)
            return causal_padding_mask(key_ok, start)  # chunk after a cached prefix
        if padding_mask is not None:
            return causal_padding_mask(padding_mask.bool(), 0)
        return None
