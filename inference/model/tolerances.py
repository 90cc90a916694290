"""Numeric tolerances, derived from the arithmetic rather than fitted to one machine.

Most comparisons in the suite put two float32 evaluations of the *same* network side by
side that differ only in the order their sums are taken: batched against solo (other
matrix shapes, so other GEMM blocking), one thread against two (reductions split
differently), SDPA against the step-by-step traced attention, a cached decode step
against a full recompute, our engine against transformers on the same weights. Neither
is "the exact answer"; the question is how far apart two correctly rounded evaluations
can be. The model used here (the probabilistic rounding-error analysis of Higham & Mary,
SIAM J. Sci. Comput. 2019):

- one reduction of length ``n`` (a dot product inside a matmul) carries a rounding error
  of about ``u · sqrt(n) · scale``, with ``u = 2**-24`` float32's unit roundoff;
- a network of ``depth`` layers adds one such error per layer, independently, so the
  errors add in quadrature: ``sqrt(depth)``;
- the scale that the error multiplies is bounded by the largest logit, ``logit_scale``;
- two evaluations rounded independently differ by ``sqrt(2)`` times one error;
- the largest of ``compared`` such differences (a Gaussian's maximum) stays below
  ``sqrt(2 · ln(compared))`` standard deviations.

So ``|Δlogit| <= sqrt(2) · sqrt(2 ln N) · u · logit_scale · sqrt(n · depth)``.
On SmolLM2-135M-Instruct (n = d_ff = 1536, 30 layers, max |logit| ≈ 31, N ≈ 10^6) that is
≈ 2.9e-3; the largest spread measured across 1 vs 2 threads, batches of 1-8 with left
padding, cache vs recompute and traced vs fast was 1.3e-4, 23x below it
(docs/testing.md has the table). A real bug moves logits by 0.1 or more.

``bfloat16`` comparisons use the same formula with ``u = 2**-8``, but against a float32
reference they also carry the weights' own rounding, so the bf16 tests compare
decisions (the reference's token within our top 5) rather than logits.
"""

from __future__ import annotations

import math

import torch

UNIT_ROUNDOFF = {torch.float32: 2.0**-24, torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}


def logit_tolerance(
    reference: torch.Tensor | float,
    reduction: int,
    depth: int,
    compared: int | None = None,
    dtype: torch.dtype = torch.float32,
) -> float:
    """The largest |Δlogit| two evaluations of one network can differ by through summation order alone.

    ``reference`` is the logits compared against (or their largest magnitude), ``reduction``
    the longest sum inside a layer (max of d_model, d_ff and the context attended over),
    ``depth`` the number of layers, ``compared`` how many values are compared (default:
    ``reference.numel()``).
    """
    if isinstance(reference, torch.Tensor):
        scale = float(reference.detach().abs().max())
        compared = compared or reference.numel()
    else:
        scale = float(reference)
    compared = max(int(compared or 1), 2)
    sigma = UNIT_ROUNDOFF[dtype] * max(scale, 1.0) * math.sqrt(reduction * depth)
    return math.sqrt(2.0) * math.sqrt(2.0 * math.log(compared)) * sigma


def model_tolerance(
    config,
    reference: torch.Tensor | float,
    context: int = 0,
    compared: int | None = None,
    dtype: torch.dtype = torch.float32,
) -> float:
    """``logit_tolerance`` with the reduction length and depth read off a ``ModelConfig``."""
    reduction = max(config.d_model, config.d_ff, config.n_heads * config.head_dim, context)
    return logit_tolerance(reference, reduction, config.n_layers, compared, dtype)


def max_abs_diff(a: torch.Tensor | list[torch.Tensor], b: torch.Tensor | list[torch.Tensor]) -> float:
    """The largest absolute difference between two tensors (or two equal-length lists of them)."""
    if isinstance(a, torch.Tensor):
        return float((a.detach() - b.detach()).abs().max())
    assert len(a) == len(b), f"{len(a)} tensors against {len(b)}"
    return max(float((x.detach() - y.detach()).abs().max()) for x, y in zip(a, b))


def top2_margin(logits: torch.Tensor) -> float:
    """How far the best logit leads the second: a greedy choice can only flip where this is below the tolerance."""
    top = logits.float().topk(2).values
    return float(top[0] - top[1])
