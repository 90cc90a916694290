"""Choosing the next token from logits: the sampler, its per-request settings, and the stop rule.

Owns ``SamplingParams`` (validated on construction), ``sample``, ``generator_for`` (the one
seed rule: draw i of a request comes from a generator seeded from (seed, i), in every runner
and on the Sampling page) and ``finish_reason`` (when a sequence stops: the one rule every
runner uses). The stages are always applied in this order, everywhere (the same order as
transformers' ``generate``):

1. repetition penalty on tokens already in the sequence (divide positive logits,
   multiply negative ones);
2. temperature: logits / T (T == 0 means greedy: take the argmax, no draw);
3. top-k: keep the k highest;
4. top-p: keep the smallest set, by descending probability, whose mass reaches p
   (the token that crosses p is kept);
5. min-p: drop tokens whose probability is below min_p × p_max;
   3 renormalises what it keeps (all of them when it is off), and 4 and 5 do when they are on;
6. lay the survivors end to end on [0, 1) in descending order of
   probability (the cumulative ranges), draw u ~ U[0, 1) from the draw's own seeded
   ``torch.Generator`` (``generator_for``), and take the token whose range holds u.

With ``record=True`` the result carries the probability vector after each stage,
the ranges, u and the choice: the exact numbers used, for the explorer to show.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import torch


class SamplingError(ValueError):
    """A sampling setting is out of its valid range."""


# Temperature and repetition penalty divide (or multiply) float32 logits. Outside these bounds the result
# overflows to ±inf or the setting itself rounds to 0 in float32 (1e-320 is a subnormal double, 0 as a float32),
# and the softmax turns to NaN: such a setting is refused, not taken as greedy (0 is greedy, and says so).
MIN_TEMPERATURE, MAX_TEMPERATURE = 1e-6, 1e6
MIN_PENALTY, MAX_PENALTY = 1e-6, 1e6


@dataclass(frozen=True)
class SamplingParams:
    """One request's sampling settings, checked on construction (``SamplingError`` names the field and its range).

    ``temperature`` is 0 (greedy: the argmax, no draw) or within [1e-6, 1e6]; a temperature between 0 and 1e-6
    (a subnormal 1e-320, say) is refused rather than rounded to greedy, since the division by it overflows the
    float32 logits. ``repetition_penalty`` lies within [1e-6, 1e6] for the same reason (1.0 = off). Bools are
    not numbers here; NaN and ±inf are refused everywhere.
    """

    temperature: float = 1.0
    top_k: int = 0  # 0 = off
    top_p: float = 1.0  # 1.0 = off
    min_p: float = 0.0  # 0.0 = off
    repetition_penalty: float = 1.0  # 1.0 = off
    max_new_tokens: int = 32
    seed: int | None = 0
    stop_on_eos: bool = True

    def __post_init__(self) -> None:
        _check(
            _is_real(self.temperature)
            and (self.temperature == 0 or MIN_TEMPERATURE <= self.temperature <= MAX_TEMPERATURE),
            f"temperature must be 0 (greedy) or from {MIN_TEMPERATURE:g} to {MAX_TEMPERATURE:g}, got {self.temperature!r}",
        )
        _check(_is_int(self.top_k) and self.top_k >= 0, f"top_k must be an integer >= 0 (0 = off), got {self.top_k!r}")
        _check(_is_real(self.top_p) and 0 < self.top_p <= 1, f"top_p must be in (0, 1], got {self.top_p!r}")
        _check(
            _is_real(self.min_p) and 0 <= self.min_p <= 1,
            f"min_p must be in [0, 1], got {self.min_p!r}",
        )
        _check(
            _is_real(self.repetition_penalty) and MIN_PENALTY <= self.repetition_penalty <= MAX_PENALTY,
            f"repetition_penalty must be from {MIN_PENALTY:g} to {MAX_PENALTY:g} (1.0 = off), "
            f"got {self.repetition_penalty!r}",
        )
        _check(
            _is_int(self.max_new_tokens) and self.max_new_tokens >= 1,
            f"max_new_tokens must be an integer >= 1, got {self.max_new_tokens!r}",
        )
        _check(
            self.seed is None or (_is_int(self.seed) and 0 <= self.seed < 2**63),
            f"seed must be an integer in [0, 2**63) or None, got {self.seed!r}",
        )

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def canonical(self) -> SamplingParams:
        """These settings with every field that cannot change a result reset: greedy (T = 0) takes the argmax,
        whatever top-k, top-p, min-p and the seed say. Equal canonical params give equal results, so a cache
        keyed by them (every field, a new one included) reuses a greedy result when only those moved."""
        if not self.greedy:
            return self
        return replace(self, top_k=0, top_p=1.0, min_p=0.0, seed=0)


SEED_STRIDE = (
    1_000_003  # a prime: seeds (s, i) and (s', i') collide only when s*STRIDE + i = s'*STRIDE + i' (mod 2**64)
)


def generator_for(params: SamplingParams, index: int) -> torch.Generator:
    """The generator of draw ``index`` of a request: its ``index``-th generated token, in every runner (generate,
    the stepper, both batchers, the server), or the Sampling page's draw number ``index``.

    Seeded from (seed, index), so any draw is computed on its own, never by replaying the draws before it:
    a rewound step draws the same u again, batch mates and the order of requests change nothing, and a
    change to how many numbers one draw takes cannot shift the draws after it. Draws happen on the CPU so
    every device agrees. ``seed=None``: a fresh random seed for each draw.
    """
    generator = torch.Generator(device="cpu")
    if params.seed is None:
        generator.seed()
    else:
        # modulo 2**64: torch takes seeds up to 2**64 - 1, and any seed < 2**63 is a valid setting
        generator.manual_seed((params.seed * SEED_STRIDE + index) % 2**64)
    return generator


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value) -> bool:
    """A finite int or float (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise SamplingError(message)


@dataclass
class Candidate:
    """A possible next token and its probability (softmax of the logits at T = 1, or where a record says so)."""

    token_id: int
    text: str
    probability: float


@dataclass
class SampleResult:
    token_id: int
    probability: float  # of the chosen token, in the final renormalised distribution
    u: float | None = None  # the uniform draw; None for greedy
    # Recorded only with record=True, all float32 CPU tensors of shape (V,):
    stage_probs: dict[str, torch.Tensor] = field(default_factory=dict)
    range_token_ids: torch.Tensor | None = None  # (K,) survivors, descending probability
    range_starts: torch.Tensor | None = None  # (K,) each survivor's range is [start, end)
    range_ends: torch.Tensor | None = None  # (K,)


def apply_repetition_penalty(logits: torch.Tensor, previous_ids: list[int], penalty: float) -> torch.Tensor:
    if penalty == 1.0 or not previous_ids:
        return logits
    ids = torch.tensor(sorted(set(previous_ids)), dtype=torch.long)
    picked = logits[ids]
    logits = logits.clone()
    logits[ids] = torch.where(picked > 0, picked / penalty, picked * penalty)
    return logits


def top_k_mask(probs: torch.Tensor, k: int) -> torch.Tensor:
    """True for the k most probable tokens (all when k == 0 or k >= V)."""
    if k == 0 or k >= probs.numel():
        return torch.ones_like(probs, dtype=torch.bool)
    keep = torch.zeros_like(probs, dtype=torch.bool)
    keep[torch.topk(probs, k).indices] = True
    return keep


def top_p_mask(probs: torch.Tensor, p: float) -> torch.Tensor:
    """True for the smallest descending-probability set whose mass reaches p."""
    if p >= 1.0:
        return probs > 0
    order = descending(probs, torch.arange(probs.numel(), device=probs.device))  # (V,)
    sorted_probs = probs[order]  # (V,)
    mass_before = sorted_probs.cumsum(0) - sorted_probs  # mass of the strictly more probable tokens
    keep_sorted = mass_before < p  # the token that crosses p is kept
    keep_sorted[0] = True
    keep = torch.zeros_like(probs, dtype=torch.bool)
    keep[order] = keep_sorted
    return keep & (probs > 0)


def min_p_mask(probs: torch.Tensor, min_p: float) -> torch.Tensor:
    if min_p == 0:
        return probs > 0
    return probs >= min_p * probs.max()


def total(probs: torch.Tensor) -> torch.Tensor:
    """The sum of ``probs`` (V,) as a 0-d float64 tensor, the same bits at any thread count.

    ``Tensor.sum`` splits a long vector over the intra-op threads, so its last bits depend on how
    many there are; a seeded draw must not (a recount in another thread, process or setting would
    land a u near a range's edge in the neighbouring range). A cumulative sum runs in order.
    """
    return probs.double().cumsum(0)[-1]


def _renormalise(probs: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    """``probs`` (V,) with the tokens ``keep`` drops set to 0, divided by their new sum (None: every token kept)."""
    kept = probs if keep is None else torch.where(keep, probs, 0.0)
    return kept / total(kept).float()


# The most probable tokens a single draw orders first (``draw``); a u past their mass orders every survivor.
DRAW_HEADS = (256, 4096)


def descending(probs: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """``ids`` (M,), ascending, in descending ``probs`` (V,), ties in id order: what a stable descending sort gives.

    A float32 vector of non-negative numbers (no NaN) takes one numpy sort of int64 keys, (2**31 - 1 - its bits) * 2**32
    + id: a non-negative float32's bits order as its value, so ascending keys are descending values, then ascending
    ids. 5-7x faster than ATen's stable sort on 4,096 and 49,152 values (2-core Zen 2). Anything else: ATen's.
    """
    flat = probs.detach().numpy() if probs.dtype == torch.float32 and probs.device.type == "cpu" else None
    if flat is not None:
        at = ids.numpy()  # (M,)
        bits = flat[at].view(np.int32)  # (M,)
        if not len(bits) or (bits.min() >= 0 and bits.max() <= 0x7F800000):  # no sign bit, no NaN
            keys = ((0x7FFFFFFF - bits.astype(np.int64)) << 32) | at  # (M,)
            keys.sort()
            return torch.from_numpy(keys & 0xFFFFFFFF)
    return ids[probs[ids].sort(descending=True, stable=True).indices]


def _ordered(probs: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``ids`` (M,), ascending, in descending probability (ties keep id order, as a stable sort of all V does),
    their probabilities and running sums (float64 partial sums rounded to float32, in order: the first M of the
    sums over every survivor, bit for bit)."""
    order = descending(probs, ids)  # (M,)
    values = probs[order]  # (M,)
    return order, values, values.cumsum(0)


@dataclass
class Ranges:
    """The final distribution's survivors laid end to end on [0, 1), most probable first."""

    token_ids: torch.Tensor  # (K,)
    probs: torch.Tensor  # (K,) descending
    starts: torch.Tensor  # (K,)
    ends: torch.Tensor  # (K,) the last is exactly 1.0

    @classmethod
    def from_probs(cls, probs: torch.Tensor) -> Ranges:
        survivors = torch.from_numpy(np.flatnonzero(probs.numpy() > 0))  # (K,) ascending ids
        if not len(survivors):  # NaN or -inf logits everywhere: nothing to draw from
            raise SamplingError("no token has a positive probability: the logits are not finite numbers")
        token_ids, sorted_probs, ends = _ordered(probs, survivors)  # (K,) each
        ends[-1] = 1.0  # float rounding must not leave a gap at the top of [0, 1)
        starts = torch.cat([ends.new_zeros(1), ends[:-1]])  # (K,) ranges tile [0, 1) exactly
        return cls(token_ids, sorted_probs, starts, ends)

    def draw(self, generator: torch.Generator) -> tuple[int, float, float]:
        """(token id, its probability, u): one u ~ U[0, 1) and the range it lands in."""
        u = float(torch.rand((), generator=generator))
        return (*self.at(u), u)

    def at(self, u: float) -> tuple[int, float]:
        """The token whose range holds ``u``, and its probability."""
        slot = min(int(torch.searchsorted(self.ends, torch.tensor(u), right=True)), len(self.ends) - 1)
        return int(self.token_ids[slot]), float(self.probs[slot])


def draw(
    probs: torch.Tensor, generator: torch.Generator, heads: tuple[int, ...] = DRAW_HEADS
) -> tuple[int, float, float]:
    """``Ranges.from_probs(probs).draw(generator)``, the same (token id, probability, u), without ordering every
    survivor: u mostly lands among the most probable few hundred tokens, whose ranges are the first of the full
    order. Orders the tokens at least as probable as the k-th (each k of ``heads`` in turn) and takes u's range
    there when it lies before their last end (which is not the forced 1.0: more tokens survive); else all of them."""
    u = float(torch.rand((), generator=generator))
    flat = probs.numpy()  # (V,) the same memory: numpy's passes over one vector are 3-8x faster than ATen's here
    survivors = int(np.count_nonzero(flat > 0))
    for k in heads:
        if k >= survivors:
            break
        threshold = np.partition(flat, flat.size - k)[flat.size - k]  # the k-th largest probability, > 0
        head = torch.from_numpy(np.flatnonzero(flat >= threshold))  # (M,) ascending ids; M >= k with ties
        if not k <= len(head) < survivors:  # ties reach the last survivor (its end is 1.0), or NaNs among the top k
            break
        token_ids, values, ends = _ordered(probs, head)  # (M,) each
        slot = int(torch.searchsorted(ends, torch.tensor(u), right=True))
        if slot < len(head):
            return int(token_ids[slot]), float(values[slot]), u
    return (*Ranges.from_probs(probs).at(u), u)


def argmax(values: torch.Tensor) -> int:
    """The index of the largest of ``values`` (V,), a CPU float tensor, as ``Tensor.argmax`` gives it: the first of
    ties, a NaN counting as the largest. Through numpy: its reduction takes ~6 µs on a 49,152-token vocabulary where
    ATen's CPU argmax takes ~67 (2-core Zen 2), and greedy decoding takes one per row and step."""
    return int(values.detach().numpy().argmax())


def _penalised(logits: torch.Tensor, params: SamplingParams, previous_ids: list[int] | None) -> torch.Tensor:
    """Stage 1: the logits (V,) in float32 on the CPU, with the repetition penalty applied."""
    logits = logits.detach().to("cpu", torch.float32)
    return apply_repetition_penalty(logits, previous_ids or [], params.repetition_penalty)


def _stages(
    logits: torch.Tensor, params: SamplingParams, previous_ids: list[int] | None, record: bool
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Stages 1-5: the final distribution (V,) and, with ``record``, the one after each stage."""
    logits = _penalised(logits, params, previous_ids)
    stages: dict[str, torch.Tensor] = {}
    if record:
        stages["softmax"] = logits.softmax(-1)
    if params.greedy:
        probs = torch.zeros_like(logits).index_fill_(0, torch.tensor([argmax(logits)]), 1.0)
        if record:
            stages["final"] = probs
        return probs, stages
    probs = (logits / params.temperature).softmax(-1)  # (V,)
    if record:
        stages["temperature"] = probs
    # top-k renormalises even when it is off: a float32 softmax over a large vocabulary sums to 1 within ~3e-5
    # (Gemma's 262,144 tokens), and top-p compares running masses with p. A later filter that is off keeps every
    # token as it is, and renormalising again would only move the last bits.
    for name, on, keep in (
        ("top_k", True, lambda p: top_k_mask(p, params.top_k) if 0 < params.top_k < p.numel() else None),
        ("top_p", params.top_p < 1.0, lambda p: top_p_mask(p, params.top_p)),
        ("min_p", params.min_p > 0, lambda p: min_p_mask(p, params.min_p)),
    ):
        if on:
            probs = _renormalise(probs, keep(probs))
        if record:
            stages[name] = probs
    if record:
        stages["final"] = probs
    return probs, stages


def filtered_probs(logits: torch.Tensor, params: SamplingParams, previous_ids: list[int] | None = None) -> torch.Tensor:
    """The distribution (V,) that ``sample`` draws from: stages 1-5 (a one-hot at the argmax when greedy).

    Speculative decoding compares the draft's and the model's under the same stages (its p and q).
    """
    return _stages(logits, params, previous_ids, record=False)[0]


def sample(
    logits: torch.Tensor,
    params: SamplingParams,
    generator: torch.Generator | None = None,
    previous_ids: list[int] | None = None,
    record: bool = False,
) -> SampleResult:
    """Pick the next token from ``logits`` (V,) following the stages in the module docstring."""
    if params.greedy and not record:  # no draw: the argmax, whatever the seed (no one-hot built)
        return SampleResult(token_id=argmax(_penalised(logits, params, previous_ids)), probability=1.0)
    probs, stages = _stages(logits, params, previous_ids, record)
    if params.greedy:
        return SampleResult(token_id=argmax(probs), probability=1.0, stage_probs=stages)
    generator = generator if generator is not None else generator_for(params, 0)
    if not record:
        token, probability, u = draw(probs, generator)
        return SampleResult(token_id=token, probability=probability, u=u, stage_probs=stages)
    ranges = Ranges.from_probs(probs)
    token, probability, u = ranges.draw(generator)
    result = SampleResult(token_id=token, probability=probability, u=u, stage_probs=stages)
    result.range_token_ids, result.range_starts, result.range_ends = ranges.token_ids, ranges.starts, ranges.ends
    return result


def sample_many(
    logits: torch.Tensor,
    params: SamplingParams,
    n: int,
    previous_ids: list[int] | None = None,
    first: int = 0,
) -> list[SampleResult]:
    """Draws ``first`` … ``first + n - 1`` from the same logits: exactly what ``sample`` with
    ``generator_for(params, i)`` returns for each, with the stages and ranges computed once instead of ``n`` times."""
    if n < 0:
        raise SamplingError(f"n must be >= 0, got {n}")
    probs, _ = _stages(logits, params, previous_ids, record=False)
    if params.greedy:
        return [SampleResult(token_id=argmax(probs), probability=1.0) for _ in range(n)]
    ranges = Ranges.from_probs(probs)
    draws = (ranges.draw(generator_for(params, index)) for index in range(first, first + n))
    return [SampleResult(token, probability, u) for token, probability, u in draws]


def finish_reason(
    params: SamplingParams, eos_ids: frozenset[int], outputs: list[int], total_ids: int, position_limit: int
) -> str | None:
    """Why a sequence stops after its latest output token, or None: the one rule every runner uses.

    End of text (when the request stops on it), its token budget, or no room left
    (``total_ids`` prompt + output positions reaching ``position_limit``), in that order.
    """
    if params.stop_on_eos and outputs[-1] in eos_ids:
        return "eos"
    if len(outputs) >= params.max_new_tokens:
        return "length"
    if total_ids >= position_limit:
        return "context"
    return None
