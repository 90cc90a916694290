"""Several requests in one forward: result and step records, input checks, and static batching.

Owns ``BatchResult`` (one request's outcome) and ``BatchStep`` (what one batched
forward did, for the explorer), the checks shared by both batching modes, and
static batching: all prompts left-padded into one batch, prefilled together, then
decoded together until the last one finishes. Continuous batching (admit and
retire at every step) lives in ``continuous.py``; ``generate_batch`` picks one.

Static batching, step by step:

1. left-pad the prompts to the longest; ``padding_mask`` marks real tokens, and
   each row's positions are ``cumsum(mask) - 1`` so every prompt starts at 0
   exactly as if it ran alone (pads get position 0; they are masked as keys and
   their outputs are never used, so no row is ever fully masked);
2. one prefill forward through a batch ``KVCache`` gives every row its first token;
3. decode: feed each row its last token at its own next position, sample with the
   row's own settings and its own seeded generator, so batch mates never change a
   request's tokens. A row that has finished keeps its place until the whole batch
   is done (that is static batching's waste, reported in each ``BatchStep``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from .sampling import SamplingParams, sample
from .scheduler import finish_reason

if TYPE_CHECKING:
    from .engine import Engine


@dataclass
class BatchResult:
    """One request's outcome; ``error`` is set (and no tokens) when its prompt could not run."""

    index: int  # position in the caller's list
    prompt_ids: list[int]
    token_ids: list[int] = field(default_factory=list)
    probabilities: list[float] = field(default_factory=list)  # of each token after all sampling stages
    text: str = ""
    finish_reason: str | None = None  # "eos", "length", "context", "cancelled" or "error"
    error: Exception | None = None
    time_to_first_token: float | None = None  # seconds from submission to the first token
    time_per_output_token: float | None = None  # mean seconds between later tokens
    max_batch_size: int | None = None  # the most requests that shared one forward with this one (itself included)
    logits: list[torch.Tensor] | None = field(default=None, repr=False)  # (V,) per token, with keep_logits

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


@dataclass
class BatchRun:
    results: list[BatchResult]
    steps: list[BatchStep]


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
        raise ValueError(f"got {len(prompts)} prompts but {len(params_list)} sampling parameter sets: "
                         "pass one per prompt (or None for the defaults)")
    for index, params in enumerate(params_list):
        if params is not None and not isinstance(params, SamplingParams):
            raise ValueError(f"params_list[{index}] is a {type(params).__name__}, not SamplingParams")
    return [params or SamplingParams() for params in params_list]


def encode_each(engine: "Engine", prompts: list[str | list[int]], chat: bool = False) -> list[BatchResult]:
    """Encode every prompt; a bad one gets its own error and the others go on."""
    results = []
    for index, prompt in enumerate(prompts):
        try:
            results.append(BatchResult(index, engine.encode_prompt(prompt, chat=chat)))
        except (ValueError, TypeError) as exc:
            results.append(BatchResult(index, [], finish_reason="error", error=exc))
    return results


def generate_batch(
    engine: "Engine",
    prompts: list[str | list[int]],
    params_list: list[SamplingParams | None] | None = None,
    mode: str = "static",
    **options,
) -> list[BatchResult]:
    """One ``BatchResult`` per prompt, in order, by static or continuous batching."""
    if mode == "static":
        return run_static(engine, prompts, params_list, **options).results
    if mode == "continuous":
        from .continuous import run_continuous

        return run_continuous(engine, prompts, params_list, **options).results
    raise ValueError(f"mode must be 'static' or 'continuous', got {mode!r}")


def left_pad(rows: list[list[int]], pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Token ids, padding mask and positions, each (B, T), for prompts of different lengths."""
    width = max(len(row) for row in rows)
    ids = torch.tensor([[pad_id] * (width - len(row)) + row for row in rows], dtype=torch.long)  # (B, T)
    mask = torch.tensor([[False] * (width - len(row)) + [True] * len(row) for row in rows])  # (B, T)
    positions = (mask.long().cumsum(dim=1) - 1).clamp(min=0)  # (B, T) every prompt starts at 0
    return ids, mask, positions


def run_static(
    engine: "Engine",
    prompts: list[str | list[int]],
    params_list: list[SamplingParams | None] | None = None,
    chat: bool = False,
    keep_logits: bool = False,
) -> BatchRun:
    """Static batching of every valid prompt in one batch; see the module docstring."""
    all_params = check_batch_inputs(prompts, params_list)
    results = encode_each(engine, prompts, chat)
    started = time.perf_counter()
    live = [r for r in results if r.ok]
    if not live:
        return BatchRun(results, [])
    batch = _StaticBatch(engine, live, [all_params[r.index] for r in live], keep_logits, started)
    steps = batch.run()
    for result in live:
        result.text = engine.tokenizer.decode(result.token_ids)
    return BatchRun(results, steps)


class _StaticBatch:
    """The state of one static batch: its cache, its rows' generators, and where each row is."""

    def __init__(self, engine: "Engine", results: list[BatchResult], params: list[SamplingParams],
                 keep_logits: bool, started: float) -> None:
        self.engine, self.results, self.params, self.started = engine, results, params, started
        self.generators = [p.make_generator() for p in params]
        self.lengths = [len(r.prompt_ids) for r in results]  # real tokens per row (prompt + outputs)
        self.done = [False] * len(results)
        self.first_token_at: list[float | None] = [None] * len(results)
        self.finished_at: list[float | None] = [None] * len(results)
        if keep_logits:
            for result in results:
                result.logits = []
        width = max(self.lengths)
        longest_answer = max(min(p.max_new_tokens, engine.config.max_seq_len - n)
                             for p, n in zip(params, self.lengths))
        self.cache = engine.new_cache(width + longest_answer, batch_size=len(results))

    def run(self) -> list[BatchStep]:
        ids, mask, positions = left_pad([r.prompt_ids for r in self.results])
        steps = [self._forward(0, ids, positions, mask)]
        while not all(self.done):
            last = torch.tensor([[r.token_ids[-1]] for r in self.results])  # (B, 1)
            next_positions = torch.tensor(self.lengths)[:, None] - 1  # (B, 1) each row's own position
            steps.append(self._forward(len(steps), last, next_positions, None))
        for row, result in enumerate(self.results):
            result.time_to_first_token = self.first_token_at[row] - self.started
            result.max_batch_size = len(self.results)  # every row is in every forward of a static batch
            if len(result.token_ids) > 1:
                result.time_per_output_token = (
                    (self.finished_at[row] - self.first_token_at[row]) / (len(result.token_ids) - 1))
        return steps

    def _forward(self, index: int, ids: torch.Tensor, positions: torch.Tensor,
                 mask: torch.Tensor | None) -> BatchStep:
        """One forward of the whole batch (prefill when ``mask`` is given), then one token per active row."""
        engine, tick = self.engine, time.perf_counter()
        active_rows = [row for row, done in enumerate(self.done) if not done]
        active = [self.results[row] for row in active_rows]
        logits = engine.model(ids.to(engine.device), kv_cache=self.cache, positions=positions.to(engine.device),
                              padding_mask=None if mask is None else mask.to(engine.device), last_only=True)
        logits = logits[:, -1].float().cpu()  # (B, V)
        now = time.perf_counter()
        fed = {r.index: (len(r.prompt_ids) if mask is not None else 1) for r in active}
        sampled = {self.results[row].index: self._take(row, self.results[row], logits[row], now)
                   for row in active_rows}
        rows = len(self.results)
        return BatchStep(
            index=index, phase="prefill" if mask is not None else "decode",
            request_ids=[r.index for r in self.results], new_tokens=fed, sampled=sampled,
            batch_positions=ids.numel(), wasted_positions=ids.numel() - sum(fed.values()),
            cache_slots_in_use=rows, cache_slots_total=rows,
            cache_positions_in_use=sum(self.lengths) - rows, cache_positions_reserved=self.cache.capacity * rows,
            finished=[r.index for r in active if r.finish_reason is not None], seconds=time.perf_counter() - tick,
            slots={r.index: row for row, r in enumerate(self.results)},
        )

    def _take(self, row: int, result: BatchResult, logits: torch.Tensor, now: float) -> int:
        """Sample row's next token with its own settings and generator; note whether it is done."""
        params = self.params[row]
        choice = sample(logits, params, self.generators[row], previous_ids=result.prompt_ids + result.token_ids)
        result.token_ids.append(choice.token_id)
        result.probabilities.append(choice.probability)
        if result.logits is not None:
            result.logits.append(logits.clone())
        self.lengths[row] += 1
        if self.first_token_at[row] is None:
            self.first_token_at[row] = now
        reason = finish_reason(params, self.engine.eos_ids, result.token_ids, self.lengths[row],
                               self.engine.config.max_seq_len)
        if reason is not None:
            result.finish_reason, self.done[row], self.finished_at[row] = reason, True, now
        return choice.token_id
