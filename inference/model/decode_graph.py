"""The whole one-token decode step as one function of tensors: what AOTInductor compiles into one graph.

Owns ``StepGraph`` (and its variants ``AnglesGivenStepGraph`` and ``PagedStepGraph``, which reads a paged cache's
blocks through the rows' block tables), an ``nn.Module`` around a loaded ``Transformer``
whose ``forward`` is one decode step of every row of a batch: the embedding, every block (norms, fused QKV, RoPE,
attention over the cache, the MLP), the final norm and the output matrix, returning the next token's logits and each
layer's new keys and values. Its inputs are tensors only, with no Python number that changes from
step to step, so one compiled graph serves every step of every request (gpt-fast's
``decode_one_token``; ``decode_step.py`` compiles it with every size dynamic):

- ``ids``, ``positions`` (B,): each row's new token and its RoPE position (``AnglesGivenStepGraph``, what the CPU
  package compiles, takes the position's RoPE cos and sin instead, computed by the caller);
- ``slots``, ``columns`` (B,): the cache row (a batch row, or a continuous-batching slot) each row
  reads, and the column its new K/V belong in;
- ``key_ok`` (B, S): which of the first S cache columns each row attends to (its own new one included);
- ``keys``, ``values`` (L, P, n_kv, C, hd): the cache, read only.

The graph does not write the cache: a compiled graph that mutates an input copies the whole input
(every slot of a continuous-batching pool, every step). Each row's new K/V stand in for its column
where the attention reads it, and are returned, (B, L, n_kv, hd) each, for the caller to write in
one indexed copy (``decode_step.py``).

It computes what ``Transformer.forward`` computes for one new token per row (the modules' own
norms, projections and MLPs are called, so the arithmetic is theirs; tests compare the two), for
the Llama and Gemma 3 families: a Gemma local layer gets its own RoPE angles and sees only the
``sliding_window`` columns ending at its own (left padding keeps distances between a row's tokens
the same in columns as in positions). Attention is written as plain products and a softmax over the
gathered cache columns, which the compiler fuses into loops that read the cache once.
"""

from __future__ import annotations

import torch
from torch import nn

from .transformer import Transformer, apply_rotary

FAMILIES = ("llama", "gemma3")  # the families the one-graph step covers (GPT-2 keeps the eager step)


class StepGraph(nn.Module):
    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor, positions: torch.Tensor, *cache: torch.Tensor):
        """Logits (B, V) in float32 for each row's next token, and its new keys and values (B, L, n_kv, hd); ``cache``:
        slots, columns, key_ok, keys, values (see ``step``)."""
        return self.step(ids, self.rope_inputs(positions), *cache)

    def rope_inputs(self, positions: torch.Tensor) -> torch.Tensor:
        """The RoPE cos and sin of each row's position (B,), for every base the model has (Gemma 3's local layers
        have their own): (B, bases, 2, hd), in the activations' dtype, as ``RotaryEmbedding.forward`` computes them."""
        model = self.model
        dtype = next(model.parameters()).dtype  # the activations' (the engine's rule: its first parameter's)
        ropes = [model.rope] + ([model.rope_local] if model.rope_local is not None else [])
        pairs = [torch.stack(rope(positions[:, None], dtype), dim=1) for rope in ropes]  # each (B, 2, 1, 1, hd)
        return torch.stack(pairs, dim=1)[:, :, :, 0, 0]  # (B, bases, 2, 1, 1, hd) -> (B, bases, 2, hd)

    def step(
        self,
        ids: torch.Tensor,
        rope: torch.Tensor,
        slots: torch.Tensor,
        columns: torch.Tensor,
        key_ok: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``forward`` with the RoPE cos and sin given (``rope_inputs``) instead of the positions."""
        seen = key_ok.shape[1]
        return self.layers_step(
            ids, rope, columns, key_ok, lambda index: (keys[index][slots, :, :seen], values[index][slots, :, :seen])
        )

    def layers_step(self, ids: torch.Tensor, rope: torch.Tensor, columns: torch.Tensor, key_ok: torch.Tensor, read):
        """The step, with each layer's cached keys and values given by ``read(layer)``: (B, n_kv, S, hd) each, the S
        columns of ``key_ok``; the column ``columns`` of each row is stale (its new K/V stand in for it)."""
        model, config = self.model, self.model.config
        x = model.embed(ids[:, None])  # (B, 1, D)
        if config.embed_scale != 1.0:
            x = x * torch.tensor(config.embed_scale, dtype=x.dtype)
        angles = _angles(rope[:, 0])
        local_angles = _angles(rope[:, 1]) if model.rope_local is not None else None
        column_ids = torch.arange(key_ok.shape[1], device=key_ok.device)  # (S,)
        is_new = column_ids[None, :] == columns[:, None]  # (B, S): the column each row's new K/V belong in
        local_ok = None
        if config.sliding_window is not None:
            local_ok = key_ok & (column_ids[None, :] > columns[:, None] - config.sliding_window)  # (B, S)
        new_keys, new_values = [], []
        for index, block in enumerate(model.layers):  # ``Block.forward`` for one new token per row
            local = block.is_local
            attn_output, k, v = _attention(
                block.attn,
                block.attn_norm(x),
                local_angles if local else angles,
                local_ok if local else key_ok,
                is_new,
                *read(index),
            )
            x = _after_attention(block, x, attn_output)  # (B, 1, D)
            new_keys.append(k)
            new_values.append(v)
        logits = model.lm_head(model.final_norm(x))[:, 0].float()  # (B, V)
        return logits, torch.stack(new_keys, dim=1), torch.stack(new_values, dim=1)  # (B, L, n_kv, hd) each


class AnglesGivenStepGraph(StepGraph):
    """The step that AOTInductor compiles for the CPU: the RoPE cos and sin are inputs (``rope_inputs``, computed by the
    caller per step), not computed from the positions inside the graph. Inside, inductor inlines the cos and sin of
    each position into every loop that reads the rotated queries and keys, so they were evaluated again for every
    cached key of every layer (a quarter of a 16-row step on an AVX2 machine); as inputs they are loads."""

    def forward(self, ids, rope, slots, columns, key_ok, keys, values):  # (B,), (B, bases, 2, hd), ...: see ``step``
        return self.step(ids, rope, slots, columns, key_ok, keys, values)  # every input named: export keeps the names


class PagedStepGraph(StepGraph):
    """The step over a paged cache (``inference.serving.paged_cache``), compiled as its own graph: each layer reads its
    keys and values from its group's pool of blocks through the rows' block tables, in place (the gather is fused
    into the loops that read it), where the eager step gathers every layer's blocks into a dense copy first.

    Inputs: ``ids`` (B,); ``rope`` (B, bases, 2, hd) as ``AnglesGivenStepGraph``'s; ``held`` (B,) the keys each row
    holds once this step's is written (its position + 1); ``tables`` (G, B, W) each layer group's physical block of
    each row's logical blocks 0..W-1 (a block released from a window, or past the row's end: any block, masked);
    ``pools``: each group's keys and values (L_g, n_kv, NB, bs, hd), groups in ``ModelConfig.layer_groups`` order.
    Column c of a row is its position c, so the masks are ``Transformer.forward``'s: c < held, and inside a local
    layer's window."""

    def forward(self, ids, rope, held, tables, *pools):  # every input named: export keeps the names
        config = self.model.config
        block_size = pools[0].shape[3]
        key_len = tables.shape[2] * block_size  # S = W * bs: every column of the rows' tables
        key_ok = torch.arange(key_len, device=held.device)[None, :] < held[:, None]  # (B, S)
        where = config.layer_places()

        def read(index: int) -> tuple[torch.Tensor, torch.Tensor]:
            group, within = where[index]
            table = tables[group]  # (B, W)
            return _gather(pools[2 * group][within], table), _gather(pools[2 * group + 1][within], table)

        return self.layers_step(ids, rope, held - 1, key_ok, read)


def _gather(pool: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Each row's blocks of one layer's pool (n_kv, NB, bs, hd), in table order (B, W): (B, n_kv, W * bs, hd)."""
    blocks = pool[:, table]  # (n_kv, B, W, bs, hd)
    return blocks.transpose(0, 1).flatten(2, 3)  # (B, n_kv, W, bs, hd) -> (B, n_kv, W * bs, hd)


def _angles(rope: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One base's cos and sin (B, 1, 1, hd), as ``apply_rotary`` takes them, from its (B, 2, hd) pair."""
    return rope[:, 0, None, None], rope[:, 1, None, None]  # (B, hd) -> (B, 1, 1, hd) each


def _after_attention(block, x: torch.Tensor, attn_output: torch.Tensor) -> torch.Tensor:
    """The rest of ``Block.forward`` once the attention sub-layer has run: x, attn_output (B, 1, D)."""
    if block.post_attn_norm is not None:
        attn_output = block.post_attn_norm(attn_output)
    x = x + attn_output
    mlp_output = block.mlp(block.mlp_norm(x))
    if block.post_mlp_norm is not None:
        mlp_output = block.post_mlp_norm(mlp_output)
    return x + mlp_output


def _attention(
    attn,
    x: torch.Tensor,
    angles,
    key_ok: torch.Tensor,
    is_new: torch.Tensor,
    cached_keys: torch.Tensor,
    cached_values: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The attention sub-layer's output (B, 1, D), and this step's K and V (B, n_kv, hd) for the cache; x (B, 1, D)
    normed, cached_keys/cached_values the columns of key_ok each row reads, (B, n_kv, S, hd)."""
    config = attn.config
    batch, n_heads, n_kv, head_dim = x.shape[0], config.n_heads, config.n_kv_heads, config.head_dim
    q, k, v = attn.qkv(x).split([n_heads * head_dim, n_kv * head_dim, n_kv * head_dim], dim=-1)
    q = q.view(batch, 1, n_heads, head_dim).transpose(1, 2)  # (B, H, 1, hd)
    k = k.view(batch, 1, n_kv, head_dim).transpose(1, 2)  # (B, n_kv, 1, hd)
    v = v.view(batch, 1, n_kv, head_dim).transpose(1, 2)  # (B, n_kv, 1, hd)
    if attn.q_norm is not None:
        q, k = attn.q_norm(q), attn.k_norm(k)
    q, k = apply_rotary(q, angles), apply_rotary(k, angles)
    new = is_new[:, None, :, None]  # (B, 1, S, 1): the row's own column holds this step's K/V
    cached_k = torch.where(new, k, cached_keys).float()  # (B, n_kv, S, hd)
    cached_v = torch.where(new, v, cached_values).float()  # (B, n_kv, S, hd)
    grouped = q.reshape(batch, n_kv, n_heads // n_kv, head_dim).float()  # (B, n_kv, group, hd): a K/V head's queries
    scores = (grouped[:, :, :, None, :] * cached_k[:, :, None, :, :]).sum(-1) * attn.scale  # (B, n_kv, group, S)
    probs = scores.masked_fill(~key_ok[:, None, None, :], float("-inf")).softmax(dim=-1)
    attended = (probs[..., None] * cached_v[:, :, None, :, :]).sum(-2)  # (B, n_kv, group, hd)
    output = attn.out(attended.reshape(batch, 1, n_heads * head_dim).to(x.dtype))  # (B, 1, D)
    return output, k[:, :, 0], v[:, :, 0]  # (B, 1, D), (B, n_kv, hd) twice
