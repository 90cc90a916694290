"""The sampler on numpy logits, with the numbers it used: one recorded draw, and many draws.

Owns ``recorded_draw`` (one call of ``sample(record=True)``: the probabilities after every stage,
the cumulative ranges, u and the chosen token, as numpy), ``draw_ids`` (draws 0..n-1 of a
request's seeded stream; the UI tests them against the exact probabilities with scipy's χ²). The sampler itself is ``inference.generation.sampling``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..generation.sampling import SamplingParams, generator_for, sample, sample_many


@dataclass(frozen=True)
class RecordedDraw:
    token_id: int
    probability: float  # of the chosen token in the final renormalised distribution
    u: float | None  # None for greedy (T = 0): no random number is drawn
    stage_probs: dict[str, np.ndarray] = field(default_factory=dict)  # (V,) float32 after each stage, in order
    range_token_ids: np.ndarray | None = None  # (K,) survivors, descending probability (None for greedy)
    range_starts: np.ndarray | None = None  # (K,) float64, each survivor's range is [start, end)
    range_ends: np.ndarray | None = None  # (K,) float64


def recorded_draw(
    logits: np.ndarray, params: SamplingParams, previous_ids: list[int] | None = None, draw_index: int = 0
) -> RecordedDraw:
    """Draw number ``draw_index`` of ``params``' seeded stream from ``logits`` (V,), with every number it used:
    computed from (seed, draw_index) alone (``generator_for``), never by replaying the draws before it."""
    result = sample(
        torch.from_numpy(np.asarray(logits)),
        params,
        generator_for(params, draw_index),
        previous_ids=previous_ids,
        record=True,
    )
    ranges = {}
    if result.range_token_ids is not None:
        ranges = dict(
            range_token_ids=result.range_token_ids.numpy().copy(),
            range_starts=result.range_starts.double().numpy(),
            range_ends=result.range_ends.double().numpy(),
        )
    return RecordedDraw(
        result.token_id,
        result.probability,
        result.u,
        {name: probs.numpy() for name, probs in result.stage_probs.items()},
        **ranges,
    )


def draw_ids(logits: np.ndarray, params: SamplingParams, n: int, previous_ids: list[int] | None = None) -> list[int]:
    """The tokens of draws 0..n-1 of ``params``' seeded stream from ``logits`` (V,) (``sample_many``: what ``n``
    calls of ``sample`` give, the stages computed once): draw k here is draw k of ``recorded_draw``."""
    drawn = sample_many(torch.from_numpy(np.asarray(logits)), params, n, previous_ids)
    return [d.token_id for d in drawn]
