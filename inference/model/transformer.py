"""The transformer forward pass, in plain PyTorch, for the Llama, GPT-2 and Gemma 3 families.

Owns the modules (norm, rotary embedding, attention, MLP, block, model) and nothing
else: weights come from ``weights.py``, the cache is passed in from outside
(``kv_cache.py``), and tracing is opt-in (``trace.py``), as are interventions
(``interventions.py``: a few hooks, each skipped when none is given). Llama: RMSNorm, RoPE,
grouped-query attention, SwiGLU. GPT-2: LayerNorm, learned positions, GELU.
Gemma 3 adds to Llama's: (1 + weight) RMSNorm, also on q and k; four norms per block
(before and after attention and the MLP); GeGLU; embeddings scaled by sqrt(d_model);
local layers that see a sliding window of keys, with their own RoPE base.
Q/K/V are one fused projection, as are the gated MLP's gate and up projections, so a
decode step launches as few matmuls as possible.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig
from .interventions import ForwardEdits, Spec
from .kv_cache import KVCache, causal_padding_mask
from .trace import ForwardTrace, LayerTrace, keep


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def normed(self, x: torch.Tensor) -> torch.Tensor:
        """x normalised in float32, as the reference does, before any scaling."""
        return F.rms_norm(x.float(), (x.shape[-1],), eps=self.eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * self.normed(x).to(x.dtype)  # scaled in the model's dtype


class GemmaRMSNorm(RMSNorm):
    """Gemma's RMSNorm: the weight is stored as an offset from 1, and the scaling is done in float32."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__(dim, eps)
        nn.init.zeros_(self.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.normed(x) * (1.0 + self.weight.float())).to(x.dtype)


def make_norm(config: ModelConfig, dim: int | None = None) -> nn.Module:
    if config.family == "gemma3":
        return GemmaRMSNorm(dim or config.d_model, config.norm_eps)
    if config.family == "llama":
        return RMSNorm(config.d_model, config.norm_eps)
    return nn.LayerNorm(config.d_model, eps=config.norm_eps)


class RotaryEmbedding(nn.Module):
    """RoPE: the rotation angles of any positions, computed in float32 from the inverse frequencies.

    Computed per forward rather than kept as tables: a 32k-token context at head_dim 256
    would hold 64 MiB of cos/sin per RoPE base. The products and cosines are the same
    float32 operations a table would have stored.
    """

    def __init__(self, head_dim: int, theta: float, max_seq_len: int, scaling: float = 1.0) -> None:
        super().__init__()
        # on the CPU even under a meta-device context (a loader's skeleton): a few floats, and a meta arange
        # imports torch._dynamo, a second of every cold start
        steps = torch.arange(0, head_dim, 2, dtype=torch.float32, device="cpu")  # (hd/2,)
        inv_freq = 1.0 / (theta ** (steps / head_dim))
        self.register_buffer("inv_freq", inv_freq / scaling, persistent=False)  # (hd/2,)
        self.max_seq_len = max_seq_len

    def tables(self, positions: torch.Tensor | int) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin (..., hd) of ``positions`` (any shape), or of positions 0..n-1 for an int n."""
        if isinstance(positions, int):
            positions = torch.arange(positions, device=self.inv_freq.device)
        angles = positions[..., None].float() * self.inv_freq  # (..., hd/2)
        angles = torch.cat([angles, angles], dim=-1)  # (..., hd)
        return angles.cos(), angles.sin()

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin for ``positions`` (B, T), each (B, 1, T, hd): computed once per forward."""
        cos, sin = self.tables(positions)  # (B, T, hd) each
        return cos[:, None].to(dtype), sin[:, None].to(dtype)  # (B, 1, T, hd)


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
        self.window = config.window_for(layer_index)  # None: a global layer, every earlier key
        qkv_dim = (config.n_heads + 2 * config.n_kv_heads) * config.head_dim
        self.qkv = nn.Linear(config.d_model, qkv_dim, bias=config.attention_bias)
        self.out = nn.Linear(config.n_heads * config.head_dim, config.d_model, bias=config.attention_bias)
        self.q_norm = make_norm(config, config.head_dim) if config.qk_norm else None
        self.k_norm = make_norm(config, config.head_dim) if config.qk_norm else None
        self.scale = 1.0 / math.sqrt(config.score_scale_dim)  # SDPA's own default when it is head_dim

    def forward(
        self,
        x: torch.Tensor,
        rope_angles: tuple[torch.Tensor, torch.Tensor] | None,
        kv_cache: KVCache | None,
        mask: torch.Tensor | None,
        record: dict | None,
        edits: ForwardEdits | None = None,
    ) -> torch.Tensor:
        cfg = self.config
        batch, steps, _ = x.shape
        q, k, v = self.qkv(x).split(
            [cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim], dim=-1
        )
        q = q.view(batch, steps, cfg.n_heads, cfg.head_dim).transpose(1, 2)  # (B, H, T, hd)
        k = k.view(batch, steps, cfg.n_kv_heads, cfg.head_dim).transpose(1, 2)  # (B, n_kv, T, hd)
        v = v.view(batch, steps, cfg.n_kv_heads, cfg.head_dim).transpose(1, 2)  # (B, n_kv, T, hd)
        if self.q_norm is not None:  # Gemma 3: each head's query and key normalised over head_dim
            q, k = self.q_norm(q), self.k_norm(k)
        if rope_angles is not None:
            q, k = apply_rotary(q, rope_angles), apply_rotary(k, rope_angles)
        if kv_cache is not None:
            k, v = kv_cache.append(self.layer_index, k, v)  # (B, n_kv, S, hd)
        if edits is not None:  # cut edges: hidden before the softmax
            mask = edits.attention_mask(self.layer_index, mask, cfg.n_heads, k.shape[2])

        if record is None:
            attended = self._fast_attention(q, k, v, mask)  # (B, H, T, hd)
        else:
            attended = self._traced_attention(q, k, v, mask, record)
        if edits is not None:  # head ablations: each head's output before the projection mixes them
            attended = edits.head_outputs(self.layer_index, attended)
        if record is not None:
            record["head_outputs"] = attended
        attended = attended.transpose(1, 2).reshape(batch, steps, cfg.n_heads * cfg.head_dim)  # (B, T, H*hd)
        return self.out(attended)

    def _fast_attention(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None
    ) -> torch.Tensor:
        """SDPA, with grouped-query attention arranged for the device (all paths give the same numbers)."""
        batch, n_heads, steps, head_dim = q.shape
        group, n_kv = self.config.queries_per_kv, self.config.n_kv_heads
        if group > 1 and n_kv == 1 and not q.is_cuda:
            # Multi-query (Gemma 3): the one K/V head is a broadcast view for every query head, no copy.
            # On CPU this beats the grouped decode layout below, whose SDPA call stalls ~40 ms when
            # the machine's cores are shared (measured at 2 threads: 45 ms against 5 ms per call).
            k = k.expand(batch, n_heads, *k.shape[2:])  # (B, H, S, hd), a view
            v = v.expand(batch, n_heads, *v.shape[2:])  # (B, H, S, hd), a view
            group = 1
        if steps == 1 and group > 1:
            # Decode: the group's queries all see every cached key, so they can stand in the
            # query-length slot of their K/V head; no copy of K or V is made.
            grouped = q.view(batch, n_kv, group, head_dim)  # (B, n_kv, group, hd)
            if mask is not None and mask.shape[1] > 1:  # a per-head mask (cut edges), laid out like the groups
                mask = mask.view(batch, n_kv, group, -1)  # (B, n_kv, group, S)
            out = F.scaled_dot_product_attention(
                grouped, k, v, attn_mask=mask, scale=self.scale
            )  # (B, n_kv, group, hd)
            return out.reshape(batch, n_heads, 1, head_dim)  # (B, H, 1, hd); SDPA on CUDA may return a strided layout
        if group > 1 and not q.is_cuda:
            # SDPA's enable_gqa path is ~40x slower than plain SDPA on CPU (torch 2.13):
            # give every query head its own copy of its K/V head instead.
            k = k.repeat_interleave(group, dim=1)  # (B, H, S, hd)
            v = v.repeat_interleave(group, dim=1)  # (B, H, S, hd)
        return F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=mask,
            is_causal=mask is None and steps > 1,
            enable_gqa=q.is_cuda and group > 1,
            scale=self.scale,
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
            mask = causal_padding_mask(key_ok, total - steps, self.window)  # (B, 1, T, S)
        scaled = (raw / math.sqrt(self.config.score_scale_dim)).masked_fill(~mask, float("-inf"))
        probs = scaled.float().softmax(dim=-1).to(q.dtype)  # (B, H, T, S)
        record.update(queries=q, keys=k, values=v, raw_scores=raw, scaled_scores=scaled, attention_probs=probs)
        return probs @ v_rep  # (B, H, T, hd)


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


GATE_ACTIVATIONS = {"llama": F.silu, "gemma3": gelu_tanh}  # SwiGLU, GeGLU


class MLP(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.family = config.family
        self.gate_activation = GATE_ACTIVATIONS.get(config.family)  # None: GPT-2's plain MLP
        if self.gate_activation is not None:
            self.gate_up = nn.Linear(config.d_model, 2 * config.d_ff, bias=config.mlp_bias)
        else:
            self.up = nn.Linear(config.d_model, config.d_ff, bias=config.mlp_bias)
        self.down = nn.Linear(config.d_ff, config.d_model, bias=config.mlp_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate_activation is not None:
            gate, up = self.gate_up(x).chunk(2, dim=-1)  # each (B, T, d_ff)
            return self.down(self.gate_activation(gate) * up)
        return self.down(F.gelu(self.up(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, config: ModelConfig, layer_index: int) -> None:
        super().__init__()
        self.is_local = config.is_local(layer_index)
        self.attn_norm = make_norm(config)
        self.attn = Attention(config, layer_index)
        self.mlp_norm = make_norm(config)
        self.mlp = MLP(config)
        # Gemma 3 also normalises each sub-layer's output before it is added to the stream.
        self.post_attn_norm = make_norm(config) if config.norms_per_block == 4 else None
        self.post_mlp_norm = make_norm(config) if config.norms_per_block == 4 else None

    def forward(
        self, x, rope_angles, kv_cache, mask, trace: ForwardTrace | None, edits: ForwardEdits | None = None
    ) -> torch.Tensor:
        record = {} if trace is not None else None
        attn_input = self.attn_norm(x)
        attn_output = attn_sublayer = self.attn(attn_input, rope_angles, kv_cache, mask, record, edits)
        if self.post_attn_norm is not None:
            attn_output = self.post_attn_norm(attn_sublayer)
        after_attn = x + attn_output
        mlp_input = self.mlp_norm(after_attn)
        mlp_output = mlp_sublayer = self.mlp(mlp_input)
        if self.post_mlp_norm is not None:
            mlp_output = self.post_mlp_norm(mlp_sublayer)
        if edits is not None:  # after the post-norm: the edit acts on what is added to the stream
            mlp_output = edits.mlp_output(self.attn.layer_index, mlp_output)
        out = after_attn + mlp_output
        if edits is not None:  # activation patching: the stream after this block, from another run
            out = edits.residual(self.attn.layer_index, out)
        if trace is not None:
            four_norms = self.post_attn_norm is not None
            trace.layers.append(
                LayerTrace(
                    block_input=keep(x),
                    attn_output=keep(attn_output),
                    after_attn=keep(after_attn),
                    mlp_input=keep(mlp_input),
                    mlp_output=keep(mlp_output),
                    block_output=keep(out),
                    **{name: keep(tensor) for name, tensor in record.items()},  # the attention's, kept here
                    attn_input=keep(attn_input),
                    attn_before_norm=keep(attn_sublayer) if four_norms else None,
                    mlp_before_norm=keep(mlp_sublayer) if four_norms else None,
                )
            )
        return out


def _embedding(rows: int, width: int) -> nn.Embedding:
    """``nn.Embedding(rows, width)``, its normal init skipped on the meta device (a loader's skeleton, filled from a
    file next): the meta kernel of ``normal_`` imports ``torch._dynamo``, a second of every cold start."""
    weight = torch.empty(rows, width)
    if not weight.is_meta:
        nn.init.normal_(weight)
    return nn.Embedding(rows, width, _weight=weight)


class Transformer(nn.Module):
    """Weights and the forward pass; holds no per-request state."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = _embedding(config.vocab_size, config.d_model)
        self.pos_embed = _embedding(config.max_seq_len, config.d_model) if config.family == "gpt2" else None
        self.rope = (
            RotaryEmbedding(config.head_dim, config.rope_theta, config.max_seq_len, config.rope_scaling)
            if config.family in ("llama", "gemma3")
            else None
        )
        self.rope_local = (  # Gemma 3's local layers rotate with their own base
            RotaryEmbedding(config.head_dim, config.rope_local_theta, config.max_seq_len)
            if config.local_layers
            else None
        )
        self.layers = nn.ModuleList(Block(config, i) for i in range(config.n_layers))
        self.final_norm = make_norm(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.embed.weight
        self.quantization = None  # a QuantSummary once quant.quantize_model has swapped the projections
        self.decode_step = None  # a decode_step.DecodeStep (the compiled one-token step) with load_model(compile=True)
        self.compile_note: str | None = None  # why compile=True could not even start compiling, when it could not

    def forward(
        self,
        input_ids: torch.Tensor,
        kv_cache: KVCache | None = None,
        positions: torch.Tensor | None = None,
        padding_mask: torch.Tensor | None = None,
        last_only: bool = False,
        trace: ForwardTrace | None = None,
        interventions: Spec = None,
    ) -> torch.Tensor:
        """Logits (B, T, V), or (B, 1, V) with ``last_only``.

        ``input_ids`` (B, T) continue the sequences held in ``kv_cache`` (from its length
        on) or, without a cache, are the whole sequences. ``padding_mask`` (B, T) marks
        real tokens (False = left padding); ``positions`` (B, T) default to consecutive
        positions after the cache. ``interventions`` (one spec, or one per row) changes
        the forward as ``interventions.py`` describes.
        """
        if (
            self.decode_step is not None
            and padding_mask is None
            and interventions is None
            and self.decode_step.applies(self, kv_cache, input_ids.shape[1], trace)
        ):
            with torch.inference_mode():
                logits = self.decode_step(input_ids, kv_cache, positions)  # (B, 1, V), or None: not compiled (yet)
            if logits is not None:
                return logits
        with torch.inference_mode():
            return self._forward(input_ids, kv_cache, positions, padding_mask, last_only, trace, interventions)

    def _forward(
        self, input_ids, kv_cache, positions, padding_mask, last_only, trace, interventions: Spec = None
    ) -> torch.Tensor:
        x = self._stream(self.all_layers, input_ids, None, kv_cache, positions, padding_mask, trace, interventions)
        if last_only:
            x = x[:, -1:]  # (B, 1, D)
        x = self.final_norm(x)
        if trace is not None:
            trace.final_hidden = keep(x)
        return self.lm_head(x)

    @property
    def all_layers(self) -> range:
        return range(len(self.layers))

    def forward_layers(
        self,
        layers: range,
        input_ids: torch.Tensor | None = None,
        stream: torch.Tensor | None = None,
        kv_cache: KVCache | None = None,
        interventions: Spec = None,
    ) -> torch.Tensor:
        """The residual stream (B, T, D) after the blocks ``layers`` (a contiguous range), through ``kv_cache``.

        From layer 0 the input is ``input_ids`` (B, T), embedded; from a later layer it is ``stream`` (B, T, D),
        the stream entering ``layers.start`` at the cache's next positions. Only those layers' K/V are written,
        then committed: self-speculation drafts with the first layers and verifies with the rest, reusing the
        draft's K/V (``inference.generation.speculative``). ``head`` turns a stream into logits.
        """
        if layers.step != 1 or not 0 <= layers.start < layers.stop <= len(self.layers):
            raise ValueError(f"layers must be a contiguous range within 0..{len(self.layers)}, got {layers}")
        if (input_ids is None) == (layers.start == 0):
            raise ValueError("give input_ids for a range from layer 0, and stream for one from a later layer")
        with torch.inference_mode():
            return self._stream(layers, input_ids, stream, kv_cache, None, None, None, interventions)

    def _stream(
        self, layers: range, input_ids, stream, kv_cache, positions, padding_mask, trace, interventions: Spec = None
    ) -> torch.Tensor:
        """The stream after blocks ``layers``: from ``input_ids`` embedded (layer 0 on) or from ``stream``."""
        batch, steps = input_ids.shape if stream is None else stream.shape[:2]
        device = input_ids.device if stream is None else stream.device
        start = kv_cache.length if kv_cache is not None else 0
        if positions is None:
            positions = torch.arange(start, start + steps, device=device).expand(batch, steps)
        mask = self._mask(batch, steps, start, kv_cache, padding_mask, device)
        edits = None
        if interventions is not None:
            edits = ForwardEdits.build(interventions, self.config, positions, device, self.embed.weight.dtype)

        if stream is None:
            x = self.embed(input_ids)  # (B, T, D)
            if self.config.embed_scale != 1.0:  # Gemma: rows scaled by sqrt(d_model), the factor in the weights' dtype
                x = x * torch.tensor(self.config.embed_scale, dtype=x.dtype)
            if self.pos_embed is not None:
                x = x + self.pos_embed(positions)
            if trace is not None:
                trace.embeddings, trace.cache_start, trace.cache_end = keep(x), start, start + steps
        else:
            x = stream  # (B, T, D)
        rope_angles = self.rope(positions, x.dtype) if self.rope is not None else None
        if self.rope_local is not None:  # Gemma 3: local layers have their own angles and a windowed mask
            local_angles = self.rope_local(positions, x.dtype)
            local_mask = self._mask(batch, steps, start, kv_cache, padding_mask, device, self.config.sliding_window)
        for block in self.layers[layers.start : layers.stop]:
            if block.is_local:
                x = block(x, local_angles, kv_cache, local_mask, trace, edits)
            else:
                x = block(x, rope_angles, kv_cache, mask, trace, edits)
        if kv_cache is not None:
            if edits is not None:
                edits.note_written(kv_cache)
            kv_cache.commit()
        return x

    def reset_rotary(self, device: torch.device | str) -> None:
        """(Re)build the RoPE modules in float32 on ``device``, whatever the weights' dtype."""
        cfg = self.config
        if self.rope is not None:
            self.rope = RotaryEmbedding(cfg.head_dim, cfg.rope_theta, cfg.max_seq_len, cfg.rope_scaling).to(device)
        if self.rope_local is not None:
            self.rope_local = RotaryEmbedding(cfg.head_dim, cfg.rope_local_theta, cfg.max_seq_len).to(device)

    def rope_for(self, layer: int) -> RotaryEmbedding | None:
        """The RoPE module that layer ``layer`` rotates its queries and keys with."""
        return self.rope_local if self.layers[layer].is_local else self.rope

    def _mask(self, batch, steps, start, kv_cache, padding_mask, device, window=None) -> torch.Tensor | None:
        """The attention mask for this forward, or ``None`` when SDPA's own causal mask is exact.

        ``window`` (local layers) also hides keys ``window`` or more positions before the query;
        while no query has that many keys before it, the plain causal mask is already exact.
        """
        beyond_window = window is not None and start + steps > window
        if kv_cache is not None:
            if padding_mask is not None:
                kv_cache.set_padding(padding_mask)
            mask = kv_cache.attention_mask(steps, window)
            if mask is not None or ((steps == 1 or start == 0) and not beyond_window):
                return mask
            key_ok = torch.ones(batch, start + steps, dtype=torch.bool, device=device)
            return causal_padding_mask(key_ok, start, window)  # chunk after a cached prefix, or past the window
        if padding_mask is not None:
            return causal_padding_mask(padding_mask.bool(), 0, window)
        if beyond_window:
            return causal_padding_mask(torch.ones(batch, steps, dtype=torch.bool, device=device), 0, window)
        return None
