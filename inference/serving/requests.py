"""What batching gives back and checks on the way in: one request's result, one batched step, a whole run.

Owns ``BatchResult`` (one request's outcome), ``BatchStep`` (what one batched forward
did, for the explorer), ``BatchRun``, and the input checks both batching modes share
(``check_batch_inputs``, ``encode_each``, ``prepare_each`` for per-request interventions).
No tensors are computed here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from ..generation.sampling import SamplingParams
from ..generation.speculative import SpeculativeRun
from ..model.interventions import Interventions

if TYPE_CHECKING:
    from ..generation.engine import Engine
    from .paging_records import PagingTrace
    from .scheduler import Sequence


@dataclass
class BatchResult:
    """One request's outcome; ``error`` is set (and no tokens) when its prompt could not run."""

    index: int  # position in the caller's list
    prompt_ids: list[int]
    token_ids: list[int] = field(default_factory=list)
    probabilities: list[float] = field(default_factory=list)  # of each token after all sampling stages (a
    # speculative request: p(x) of each token, as its steps' records hold it; None where a record has not got it)
    text: str = ""
    finish_reason: str | None = None  # "eos", "length", "context", "cancelled" or "error"
    error: Exception | None = None
    time_to_first_token: float | None = None  # seconds from submission to the first token
    time_per_output_token: float | None = None  # mean seconds between later tokens
    max_batch_size: int | None = None  # the most requests that shared one forward with this one (itself included)
    logits: list[torch.Tensor] | None = field(default=None, repr=False)  # (V,) per token, with keep_logits
    speculation: SpeculativeRun | None = field(default=None, repr=False)  # a speculative request's every step
    coalesced: bool = False  # computed once for an identical request already in flight, and handed to this one too

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class BatchStep:
    """One batched forward, as the explorer shows it."""

    index: int
    phase: str  # "prefill" or "decode"
    request_ids: list[int]  # rows of the batch, in order
    new_tokens: dict[int, int]  # request -> positions it fed this step (prefill: its prompt; decode: 1)
    sampled: dict[int, int]  # request -> token produced (requests still in need of tokens)
    batch_positions: int  # rows x columns actually computed
    wasted_positions: int  # computed but useless: padding, and rows that had already finished
    cache_slots_in_use: int  # static: rows of the batch cache; continuous: occupied slots
    cache_slots_total: int
    cache_positions_in_use: int  # positions holding real tokens after the step
    cache_positions_reserved: int  # positions allocated for the rows/slots in use
    finished: list[int]  # requests that finished at this step
    seconds: float
    slots: dict[int, int] = field(default_factory=dict)  # request -> batch row (static) or cache slot (continuous)
    reused_positions: dict[int, int] = field(default_factory=dict)  # request -> prompt positions copied, not computed
    kv_bytes_held: int | None = None  # paged blocks: K/V bytes of the blocks in use after the step (None: slots)
    kv_bytes_without_release: int | None = None  # what they would be if sliding-window layers kept every block


@dataclass
class BatchRun:
    results: list[BatchResult]
    steps: list[BatchStep]
    paging: PagingTrace | None = None  # a run on paged blocks: the pool after every step (``paging_trace.py``)


def check_batch_inputs(
    prompts: list[str | list[int]], params_list: list[SamplingParams | None] | None
) -> list[SamplingParams]:
    """The parameters for each prompt; a clear ``ValueError`` for an empty or mismatched batch."""
    if isinstance(prompts, (str, bytes)) or not isinstance(prompts, (list, tuple)):
        raise ValueError("prompts must be a list of prompts (strings or token-id lists)")
    if not prompts:
        raise ValueError("the batch is empty: pass at least one prompt")
    if params_list is None:
        return [SamplingParams() for _ in prompts]
    if len(params_list) != len(prompts):
        raise ValueError(
            f"got {len(prompts)} prompts but {len(params_list)} sampling parameter sets: "
            "pass one per prompt (or None for the defaults)"
        )
    for index, params in enumerate(params_list):
        if params is not None and not isinstance(params, SamplingParams):
            raise ValueError(f"params_list[{index}] is a {type(params).__name__}, not SamplingParams")
    return [params or SamplingParams() for params in params_list]


def encode_each(engine: Engine, prompts: list[str | list[int]], chat: bool = False) -> list[BatchResult]:
    """Encode every prompt; a bad one gets its own error and the others go on."""
    results = []
    for index, prompt in enumerate(prompts):
        try:
            results.append(BatchResult(index, engine.encode_prompt(prompt, chat=chat)))
        except (ValueError, TypeError) as exc:
            results.append(BatchResult(index, [], finish_reason="error", error=exc))
    return results


def prepare_each(
    engine: Engine, results: list[BatchResult], interventions_list: list[Interventions | None] | None
) -> dict[int, Interventions | None]:
    """Each request's own interventions, checked and prepared against its prompt; a bad one fails only its request."""
    if interventions_list is None:
        return {r.index: None for r in results}
    if not isinstance(interventions_list, (list, tuple)) or len(interventions_list) != len(results):
        raise ValueError(
            f"got {len(results)} prompts but interventions_list has "
            f"{len(interventions_list) if isinstance(interventions_list, (list, tuple)) else 'no'} "
            "entries: pass one per prompt (or None for a request without)"
        )
    prepared = {}
    for result, spec in zip(results, interventions_list):
        if not result.ok:
            continue
        try:
            prepared[result.index] = engine.prepare_interventions(spec, result.prompt_ids)
        except (ValueError, TypeError) as exc:
            result.finish_reason, result.error = "error", exc
    return prepared


def row_specs(specs: list[Interventions | None]) -> list[Interventions | None] | None:
    """The forward's ``interventions`` argument for these rows: None when no row has one (the plain path)."""
    return None if all(spec is None for spec in specs) else list(specs)


def finished_result(seq: Sequence, index: int, text: str, logits: list[torch.Tensor] | None) -> BatchResult:
    """A finished (or cancelled) scheduler sequence as a ``BatchResult``: the one record both batchers return."""
    return BatchResult(
        index=index,
        prompt_ids=seq.prompt_ids,
        token_ids=list(seq.output_ids),
        probabilities=list(seq.output_probs),
        text=text,
        finish_reason=seq.finish_reason,
        time_to_first_token=seq.time_to_first_token,
        time_per_output_token=seq.time_per_output_token,
        max_batch_size=seq.max_batch_size or None,  # None: cancelled before its first forward
        logits=logits,
    )
