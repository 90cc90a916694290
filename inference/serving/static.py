"""Static batching: all prompts left-padded into one batch, prefilled together, then decoded together.

Static batching, step by step:

1. left-pad the prompts to the longest (``padding.left_pad``): ``padding_mask`` marks
   real tokens and each row's positions start at 0, exactly as if it ran alone;
2. one prefill forward through a batch ``KVCache`` gives every row its first token;
3. decode: feed each row its last token at its own next position, sample with the
   row's own settings and its own seeded stream (``generator_for``: draw i from (seed, i)),
   so batch mates never change a request's tokens. A row that has finished keeps its place until the whole batch
   is done (that is static batching's waste, reported in each ``BatchStep``).

Each request may bring its own interventions (``interventions_list``): every forward
passes one spec per row, so batch mates never see each other's edits.

Continuous batching (admit and retire at every step) lives in ``continuous.py``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import torch

from ..generation.sampling import SamplingParams, finish_reason, generator_for, sample
from ..model.interventions import Interventions
from .padding import left_pad
from .requests import BatchResult, BatchRun, BatchStep, check_batch_inputs, encode_each, prepare_each, row_specs

if TYPE_CHECKING:
    from ..generation.engine import Engine


def run_static(
    engine: Engine,
    prompts: list[str | list[int]],
    params_list: list[SamplingParams | None] | None = None,
    chat: bool = False,
    keep_logits: bool = False,
    interventions_list: list[Interventions | None] | None = None,
) -> BatchRun:
    """Static batching of every valid prompt in one batch; see the module docstring."""
    all_params = check_batch_inputs(prompts, params_list)
    results = encode_each(engine, prompts, chat)
    specs = prepare_each(engine, results, interventions_list)
    started = time.perf_counter()
    live = [r for r in results if r.ok]
    if not live:
        return BatchRun(results, [])
    batch = _StaticBatch(engine, live, [all_params[r.index] for r in live], keep_logits, started)
    batch.interventions = row_specs([specs[r.index] for r in live])
    steps = batch.run()
    for result in live:
        result.text = engine.tokenizer.decode(result.token_ids)
    return BatchRun(results, steps)


class _StaticBatch:
    """The state of one static batch: its cache, its rows' settings, and where each row is."""

    def __init__(
        self,
        engine: Engine,
        results: list[BatchResult],
        params: list[SamplingParams],
        keep_logits: bool,
        started: float,
    ) -> None:
        self.engine, self.results, self.params, self.started = engine, results, params, started
        self.interventions: list[Interventions | None] | None = None  # one spec per row, or None for none
        self.lengths = [len(r.prompt_ids) for r in results]  # real tokens per row (prompt + outputs)
        self.done = [False] * len(results)
        self.first_token_at: list[float | None] = [None] * len(results)
        self.finished_at: list[float | None] = [None] * len(results)
        if keep_logits:
            for result in results:
                result.logits = []
        width = max(self.lengths)
        longest_answer = max(min(p.max_new_tokens, engine.config.max_seq_len - n) for p, n in zip(params, self.lengths))
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
                result.time_per_output_token = (self.finished_at[row] - self.first_token_at[row]) / (
                    len(result.token_ids) - 1
                )
        return steps

    def _forward(self, index: int, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None) -> BatchStep:
        """One forward of the whole batch (prefill when ``mask`` is given), then one token per active row."""
        engine, tick = self.engine, time.perf_counter()
        active_rows = [row for row, done in enumerate(self.done) if not done]
        active = [self.results[row] for row in active_rows]
        if mask is not None:
            logits = engine.prefill_batch(ids, self.cache, positions, mask, self.interventions)  # (B, V)
        else:
            logits = engine.decode_batch(ids, self.cache, positions, self.interventions)  # (B, V)
        now = time.perf_counter()
        fed = {r.index: (len(r.prompt_ids) if mask is not None else 1) for r in active}
        sampled = {self.results[row].index: self._take(row, self.results[row], logits[row], now) for row in active_rows}
        rows = len(self.results)
        return BatchStep(
            index=index,
            phase="prefill" if mask is not None else "decode",
            request_ids=[r.index for r in self.results],
            new_tokens=fed,
            sampled=sampled,
            batch_positions=ids.numel(),
            wasted_positions=ids.numel() - sum(fed.values()),
            cache_slots_in_use=rows,
            cache_slots_total=rows,
            cache_positions_in_use=sum(self.lengths) - rows,
            cache_positions_reserved=self.cache.capacity * rows,
            finished=[r.index for r in active if r.finish_reason is not None],
            seconds=time.perf_counter() - tick,
            slots={r.index: row for row, r in enumerate(self.results)},
        )

    def _take(self, row: int, result: BatchResult, logits: torch.Tensor, now: float) -> int:
        """Sample row's next token with its own settings and seeded stream; note whether it is done."""
        params = self.params[row]
        choice = sample(
            logits,
            params,
            generator_for(params, len(result.token_ids)),
            previous_ids=result.prompt_ids + result.token_ids,
        )
        result.token_ids.append(choice.token_id)
        result.probabilities.append(choice.probability)
        if result.logits is not None:
            result.logits.append(logits.clone())
        self.lengths[row] += 1
        if self.first_token_at[row] is None:
            self.first_token_at[row] = now
        reason = finish_reason(
            params, self.engine.eos_ids, result.token_ids, self.lengths[row], self.engine.config.max_seq_len
        )
        if reason is not None:
            result.finish_reason, self.done[row], self.finished_at[row] = reason, True, now
        return choice.token_id
