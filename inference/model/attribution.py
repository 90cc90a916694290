"""Direct logit attribution: how much each head, each MLP and the embeddings add to one token's logit.

Owns ``attribute_logit`` (read off a traced forward) and the rounding bound its sum is
checked against. The residual stream at the last block's output is a plain sum:

    x = embeddings + Σ_layers (Σ_heads W_O,h · head_h + b_O + mlp)  (+ what any patch changed)

and the logit of token w is ``W_U[w] · norm(x)``. (Gemma 3 normalises the attention output
once more before adding it: its post-attention norm's σ is frozen the same way, so each head
adds ``γ_post ⊙ (W_O,h · head_h) / σ_post``; the MLP's term is its post-normed output, which is
what the stream receives.) The final norm is not linear: it divides
by the stream's RMS σ (LayerNorm also subtracts the mean, which is linear, and adds a
bias). **The approximation:** σ is frozen at its value in this run. Then every component
c contributes exactly ``W_U[w] · (γ ⊙ c) / σ`` (centred first under LayerNorm), and the
contributions add up to the logit. What a term is *not*: the change in the logit if that
component were removed, since removing it would change σ and everything later layers
compute from it (that is what an ablation measures).

The sum differs from the model's logit only by float rounding (the two are sums of the
same numbers taken in other orders); ``rounding_bound`` is the derived bound of
``inference/model/tolerances.py`` with the sum of the terms' magnitudes as the scale, because
terms that cancel carry the rounding of their own size. A quantized model (``quant.py``) is
split with its decoded weights, and bounded with bfloat16's roundoff, since its matmuls round
their inputs to bfloat16.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from .interventions import InterventionError
from .trace import ForwardTrace
from .transformer import GemmaRMSNorm, RMSNorm, Transformer

UNIT_ROUNDOFF = {torch.float32: 2.0**-24, torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}


@dataclass(frozen=True)
class LogitAttribution:
    """One token's logit at one position, split into the components that wrote the residual stream."""

    token_id: int
    position: int
    logit: float  # the model's own logit for the token
    embedding: float  # token (+ learned position) embeddings
    heads: torch.Tensor  # (L, H) each head, through its slice of the output projection
    attention_bias: torch.Tensor  # (L,) each output projection's bias (zeros without one)
    mlps: torch.Tensor  # (L,) each MLP's output
    patches: float  # what residual patches at this position added (0 without)
    final_bias: float  # the final LayerNorm's bias (0 for RMSNorm)
    inverse_rms: float  # 1/σ of the final norm, frozen at this run's value
    magnitude: float  # Σ |term|: the scale of the rounding bound
    bound: float  # |total - logit| stays below this (``rounding_bound``)

    @property
    def total(self) -> float:
        """The sum of every term: equals ``logit`` up to rounding."""
        return (
            self.embedding
            + float(self.heads.sum())
            + float(self.attention_bias.sum())
            + float(self.mlps.sum())
            + self.patches
            + self.final_bias
        )

    @property
    def residual(self) -> float:
        return self.total - self.logit


def rounding_bound(
    magnitude: float, reduction: int, depth: int, compared: int, dtype: torch.dtype = torch.float32
) -> float:
    """``inference/model/tolerances.py``'s bound: sqrt(2) · sqrt(2 ln N) · u · scale · sqrt(n · depth).

    Two evaluations of one sum in other orders; each length-``reduction`` reduction carries
    an error of about u·sqrt(n)·scale, ``depth`` layers add in quadrature, and the largest of
    ``compared`` values (a bound for every token of the vocabulary at once) stays below
    sqrt(2 ln N) standard deviations.
    """
    sigma = UNIT_ROUNDOFF[dtype] * max(magnitude, 1.0) * math.sqrt(reduction * depth)
    return math.sqrt(2.0) * math.sqrt(2.0 * math.log(max(compared, 2))) * sigma


def _dense_weight(module) -> torch.Tensor:
    """A projection's weight (N, K) as a dense float tensor; a quantized module decodes its own."""
    dense = getattr(module, "dense_weight", None)
    return dense() if callable(dense) else module.weight


def _norm_scale(norm) -> torch.Tensor:
    """The elementwise scale γ a norm applies after dividing by σ (Gemma stores it as an offset from 1)."""
    weight = norm.weight.double().cpu()
    return 1.0 + weight if isinstance(norm, GemmaRMSNorm) else weight


def attribute_logit(
    model: Transformer,
    logits: torch.Tensor,
    trace: ForwardTrace,
    token_id: int,
    position: int = -1,
    patched_layers: Iterable[int] = (),
) -> LogitAttribution:
    """Split ``logits[position, token_id]`` of a traced forward (row 0) into per-component terms.

    ``patched_layers``: blocks whose output a residual patch replaced; the change the patch
    made at ``position`` becomes the ``patches`` term.
    """
    config = model.config
    if not 0 <= token_id < config.vocab_size:
        raise InterventionError(f"token id {token_id} is outside the vocabulary (0..{config.vocab_size - 1})")
    if not trace.layers or trace.layers[0].head_outputs is None:
        raise InterventionError("attribution needs a traced forward (Engine.traced_forward) with head outputs")
    steps = trace.layers[0].block_output.shape[1]
    position = position % steps
    norm = model.final_norm
    layer_norm = not isinstance(norm, (RMSNorm, GemmaRMSNorm))
    with torch.inference_mode():
        stream = trace.layers[-1].block_output[0, position].double()  # (D,)
        centred = stream - stream.mean() if layer_norm else stream
        inverse_rms = 1.0 / math.sqrt(float((centred**2).mean()) + norm.eps)  # frozen σ
        unembed = _dense_weight(model.lm_head)[token_id].double().cpu()  # (D,)
        direction = unembed * _norm_scale(norm) * inverse_rms  # (D,)

        def term(vectors: torch.Tensor) -> torch.Tensor:
            """Contributions of (…, D) component vectors through the frozen norm and the token's row."""
            vectors = vectors.double()
            if layer_norm:
                vectors = vectors - vectors.mean(dim=-1, keepdim=True)
            return vectors @ direction

        heads, biases, mlps, patch_total = [], [], [], 0.0
        patched = set(patched_layers)
        for index, (block, layer) in enumerate(zip(model.layers, trace.layers)):
            out = block.attn.out
            head_out = layer.head_outputs[0, :, position].double()  # (H, hd)
            weight = (
                _dense_weight(out).double().cpu().view(config.d_model, config.n_heads, config.head_dim)
            )  # (D, H, hd)
            per_head = torch.einsum("dhk,hk->hd", weight, head_out)  # (H, D)
            if block.post_attn_norm is not None:  # Gemma 3: the sum of the heads is normalised before the stream
                raw = layer.attn_before_norm[0, position].double()  # (D,) the attention output before its norm
                post_rms = math.sqrt(float((raw**2).mean()) + block.post_attn_norm.eps)  # frozen σ_post
                per_head = per_head * _norm_scale(block.post_attn_norm) / post_rms  # (H, D)
            heads.append(term(per_head))
            biases.append(
                term(out.bias.double().cpu()) if out.bias is not None else torch.zeros((), dtype=torch.float64)
            )
            mlps.append(term(layer.mlp_output[0, position]))
            if index in patched:
                jump = layer.block_output[0, position].double() - (
                    layer.after_attn[0, position].double() + layer.mlp_output[0, position].double()
                )
                patch_total += float(term(jump))
        embedding = float(term(trace.embeddings[0, position]))
        final_bias = float(norm.bias.double().cpu() @ unembed) if layer_norm and norm.bias is not None else 0.0
    heads_t, biases_t, mlps_t = torch.stack(heads), torch.stack(biases), torch.stack(mlps)  # (L, H), (L,), (L,)
    magnitude = (
        abs(embedding)
        + float(heads_t.abs().sum())
        + float(biases_t.abs().sum())
        + float(mlps_t.abs().sum())
        + abs(patch_total)
        + abs(final_bias)
    )
    reduction = max(config.d_model, config.d_ff, config.n_heads * config.head_dim)
    dtype = next(model.parameters()).dtype
    if getattr(model, "quantization", None) is not None:
        dtype = torch.bfloat16  # quantized matmuls round their inputs to bfloat16: that is the rounding to bound
    return LogitAttribution(
        token_id=token_id,
        position=position,
        logit=float(logits[position, token_id]),
        embedding=embedding,
        heads=heads_t,
        attention_bias=biases_t,
        mlps=mlps_t,
        patches=patch_total,
        final_bias=final_bias,
        inverse_rms=inverse_rms,
        magnitude=magnitude,
        bound=rounding_bound(magnitude, reduction, config.n_layers, config.vocab_size, dtype),
    )
