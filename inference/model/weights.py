"""Renaming checkpoint tensors into the engine's own layout.

Owns the name maps from Hugging Face Llama, GPT-2 and Gemma 3 state dicts to
``Transformer``'s parameters, fusing Q/K/V (and the gated MLP's gate/up) into single
matrices on the way. Reading files is not its concern (``loader.py`` and ``gguf.py``
do that).
"""

from __future__ import annotations

import torch

from .config import ModelConfig


class WeightsError(ValueError):
    """A checkpoint is missing tensors or has tensors of the wrong shape."""


def to_engine_state_dict(hf: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    if config.family == "llama":
        return _llama(hf, config)
    if config.family == "gemma3":
        return _gemma3(hf, config)
    return _gpt2(hf, config)


def _cat(parts: list[torch.Tensor]) -> torch.Tensor:
    """``torch.cat(parts)`` (rows), or, for weights not read (meta tensors: a GGUF's blocks replace them), a meta
    tensor of the fused shape: torch's meta kernel of ``cat`` is Python that imports ``torch._dynamo`` and sympy
    (~70 MiB of modules and a second of a cold start that the weights never need)."""
    if all(part.is_meta for part in parts):
        rows = sum(part.shape[0] for part in parts)
        return torch.empty((rows, *parts[0].shape[1:]), dtype=parts[0].dtype, device="meta")  # (sum N_i, K)
    return torch.cat(parts)


def _take(hf: dict[str, torch.Tensor], name: str) -> torch.Tensor:
    try:
        return hf[name]
    except KeyError:
        raise WeightsError(f"checkpoint has no tensor {name!r}") from None


def _llama(hf: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    hf = {name.removeprefix("model."): tensor for name, tensor in hf.items()}
    out = {"embed.weight": _take(hf, "embed_tokens.weight"), "final_norm.weight": _take(hf, "norm.weight")}
    if not config.tie_embeddings:
        out["lm_head.weight"] = _take(hf, "lm_head.weight")
    for i in range(config.n_layers):
        src, dst = f"layers.{i}.", f"layers.{i}."
        attn = src + "self_attn."
        out[dst + "attn_norm.weight"] = _take(hf, src + "input_layernorm.weight")
        out[dst + "mlp_norm.weight"] = _take(hf, src + "post_attention_layernorm.weight")
        out[dst + "attn.qkv.weight"] = _cat([_take(hf, attn + f"{p}_proj.weight") for p in "qkv"])
        out[dst + "attn.out.weight"] = _take(hf, attn + "o_proj.weight")
        if config.attention_bias:
            out[dst + "attn.qkv.bias"] = _cat([_take(hf, attn + f"{p}_proj.bias") for p in "qkv"])
            out[dst + "attn.out.bias"] = _take(hf, attn + "o_proj.bias")
        mlp = src + "mlp."
        out[dst + "mlp.gate_up.weight"] = _cat([_take(hf, mlp + "gate_proj.weight"), _take(hf, mlp + "up_proj.weight")])
        out[dst + "mlp.down.weight"] = _take(hf, mlp + "down_proj.weight")
        if config.mlp_bias:
            out[dst + "mlp.gate_up.bias"] = _cat([_take(hf, mlp + "gate_proj.bias"), _take(hf, mlp + "up_proj.bias")])
            out[dst + "mlp.down.bias"] = _take(hf, mlp + "down_proj.bias")
    return out


def _gemma3(hf: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """Llama's layout plus Gemma 3's q/k norms and four block norms.

    Gemma's HF names differ from Llama's in one trap: its ``post_attention_layernorm`` is
    the norm *after* attention, and ``pre_feedforward_layernorm`` the one before the MLP.
    """
    out = _llama(hf, config)
    hf = {name.removeprefix("model."): tensor for name, tensor in hf.items()}
    for i in range(config.n_layers):
        src, dst = f"layers.{i}.", f"layers.{i}."
        out[dst + "mlp_norm.weight"] = _take(hf, src + "pre_feedforward_layernorm.weight")
        out[dst + "post_attn_norm.weight"] = _take(hf, src + "post_attention_layernorm.weight")
        out[dst + "post_mlp_norm.weight"] = _take(hf, src + "post_feedforward_layernorm.weight")
        out[dst + "attn.q_norm.weight"] = _take(hf, src + "self_attn.q_norm.weight")
        out[dst + "attn.k_norm.weight"] = _take(hf, src + "self_attn.k_norm.weight")
    return out


def _gpt2(hf: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    hf = {name.removeprefix("transformer."): tensor for name, tensor in hf.items()}
    out = {
        "embed.weight": _take(hf, "wte.weight"),
        "pos_embed.weight": _take(hf, "wpe.weight"),
        "final_norm.weight": _take(hf, "ln_f.weight"),
        "final_norm.bias": _take(hf, "ln_f.bias"),
    }
    # GPT-2 stores its linear layers as Conv1D with weight (in, out): transpose to (out, in).
    renames = {"attn_norm": "ln_1", "mlp_norm": "ln_2"}
    linears = {"attn.qkv": "attn.c_attn", "attn.out": "attn.c_proj", "mlp.up": "mlp.c_fc", "mlp.down": "mlp.c_proj"}
    for i in range(config.n_layers):
        src, dst = f"h.{i}.", f"layers.{i}."
        for ours, theirs in renames.items():
            out[dst + ours + ".weight"] = _take(hf, src + theirs + ".weight")
            out[dst + ours + ".bias"] = _take(hf, src + theirs + ".bias")
        for ours, theirs in linears.items():
            out[dst + ours + ".weight"] = _take(hf, src + theirs + ".weight").t().contiguous()
            out[dst + ours + ".bias"] = _take(hf, src + theirs + ".bias")
    return out


def projection_sources(config: ModelConfig) -> dict[str, list[str]]:
    """Each engine projection (``layers.3.attn.qkv``) -> the checkpoint tensors stacked into it, in order,
    plus ``"embed"`` (the token rows) and ``"lm_head"`` (the token rows again when the embeddings are tied)."""
    if config.family not in ("llama", "gemma3"):  # Gemma 3 names its projections as Llama does
        raise WeightsError(f"no checkpoint-name map for quantizing the {config.family!r} family")
    sources = {
        "embed": ["model.embed_tokens.weight"],
        "lm_head": ["model.embed_tokens.weight" if config.tie_embeddings else "lm_head.weight"],
    }
    for i in range(config.n_layers):
        layer = f"model.layers.{i}."
        sources[f"layers.{i}.attn.qkv"] = [layer + f"self_attn.{p}_proj.weight" for p in "qkv"]
        sources[f"layers.{i}.attn.out"] = [layer + "self_attn.o_proj.weight"]
        sources[f"layers.{i}.mlp.gate_up"] = [layer + "mlp.gate_proj.weight", layer + "mlp.up_proj.weight"]
        sources[f"layers.{i}.mlp.down"] = [layer + "mlp.down_proj.weight"]
    return sources
