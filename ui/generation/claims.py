"""Sentences of the Generation & KV cache page, each computed from the measurements it quotes.

Times are milliseconds measured in this run; a sentence compares them only in the direction they actually went.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from ui.common import format as fmt
from ui.common.token_text import visible


def _quoted(piece: str) -> str:
    return "“" + piece + "”"


EXAMPLE_TAIL = 48  # characters of the prompt's end quoted in the opening sentence


def example_sentence(prompt: str, continuation: Sequence[str] | None, chat: bool = False) -> str:
    """The loop on the learner's own prompt: the model's greedy tokens after ``prompt`` (its last
    ``EXAMPLE_TAIL`` characters quoted, cut at a space), one per step; ``chat``: read inside the chat template.
    ``continuation`` None (a prompt that fills the context): no example, an empty string."""
    if continuation is None:
        return ""
    flat = " ".join(prompt.split())
    tail = flat if len(flat) <= EXAMPLE_TAIL else "…" + flat[-EXAMPLE_TAIL:].split(" ", 1)[-1]
    quoted = "`" + (tail or "∅").replace("`", "ˋ") + "`"
    where = "your prompt in the chat template" if chat else "your prompt"
    if not continuation:
        return f"(*autoregressive* generation; this model, greedy, ends the text right after {where} {quoted})"
    steps = " → ".join(_quoted(visible(piece)) for piece in continuation)
    return f"(*autoregressive* generation; this model, greedy, continues {where} {quoted} → {steps} → …)"


def top_candidates_title(step: int, chosen: str, forced: bool, temperature: float) -> str:
    """The Generation page's top-5 chart title: the probabilities are the model's own (softmax at T = 1), whatever
    temperature the walk samples at, so the title says both."""
    sampled = (
        "the walk is greedy (T = 0)"
        if temperature == 0
        else ("the walk samples at T = 1" if temperature == 1 else f"the walk samples at T = {temperature:g}")
    )
    return (
        f"Step {step}: the model's top 5 at T = 1 ({sampled}; chosen: {visible(chosen) or '∅'}"
        f"{', forced' if forced else ''})"
    )


def generation_suggestions(temperature: float) -> list[str]:
    """The Generation page's "what to try next", each true for the settings in force."""
    greedy = (
        "- Your temperature is 0: every step takes the top token, which is the **Logits** page's greedy pick "
        "for the prompt. Set T above 0 and the steps start drawing from the probabilities."
        if temperature == 0
        else "- Set temperature 0 and compare the first step with the **Logits** page's greedy pick."
    )
    return [
        "- Run a few tokens, rewind to step 1 and **force** a different token: the branch reuses the cache up to "
        "there and the story changes.",
        greedy,
        "- Measure with 64 tokens: how fast does each curve climb as the sequence grows?",
        "- Next: **Batching** — many requests through one model at once.",
    ]


def finished_sentence(ended_by_eos: bool, max_steps: int) -> str:
    return "Generation finished: " + (
        "the model produced its end-of-text token." if ended_by_eos else f"the {max_steps}-token limit was reached."
    )


def quarters(values: Sequence[float]) -> tuple[fmt.Summary, fmt.Summary]:
    """The statistics of a run's first and last quarter of measurements (at least one value each): the page's
    metrics and ``timing_sentence`` quote these same numbers."""
    quarter = max(1, len(values) // 4)
    return fmt.summary(values[:quarter]), fmt.summary(values[-quarter:])


def _quarter_medians(values: Sequence[float]) -> tuple[float, float]:
    first, last = quarters(values)
    return first.median, last.median


def timing_sentence(context_lengths: Sequence[int], cached_ms: Sequence[float], uncached_ms: Sequence[float]) -> str:
    """How each path's step time changed as the sequence grew (first quarter against last quarter of the run)."""
    if len(context_lengths) < 4:
        return "Time more tokens (at least 4) to see how each path grows with the sequence."
    cached_start, cached_end = _quarter_medians(cached_ms)
    full_start, full_end = _quarter_medians(uncached_ms)

    def change(start: float, end: float) -> str:
        ratio = end / start if start > 0 else float("inf")
        if abs(ratio - 1) < 0.1:
            return f"stayed near {fmt.ms(start)} (×{ratio:.2f})"
        return f"went from {fmt.ms(start)} to {fmt.ms(end)} (×{ratio:.2f})"

    full_growth = full_end / full_start if full_start > 0 else 1.0
    cached_growth = cached_end / cached_start if cached_start > 0 else 1.0
    verdict = (
        "the recompute grows with the sequence much faster than the cached step"
        if full_growth > cached_growth + 0.1
        else "at these lengths neither grows much faster than the other: the weights, read once per step, "
        "still dominate both"
    )
    return (
        f"From {context_lengths[0]} to {context_lengths[-1]} tokens (medians of the first and last quarter), "
        f"the full recompute {change(full_start, full_end)} and the cached step {change(cached_start, cached_end)}: "
        f"{verdict}."
    )


BUSY_LOAD_PER_CORE = 1.0  # a one-minute load above the core count: other programs held the cores while we timed


def phase_sentence(
    prompt_tokens: int,
    prefill_ms: float,
    decode_ms: Sequence[float],
    load: float | None = None,
    cores: int | None = None,
) -> str:
    """The prefill against a decode step, per token, from this walk's own timings; when a prompt token cost no less
    in the prefill than a decode step (against the lesson), why, from the machine's ``load`` on its ``cores``."""
    text = (
        f"Here the prefill read {prompt_tokens} prompt token{'s' * (prompt_tokens != 1)} in {fmt.ms(prefill_ms)} "
        f"({fmt.ms(prefill_ms / prompt_tokens)} per token)"
    )
    if not decode_ms:
        return text + "; press **Next token** again for a decode step."
    median = statistics.median(decode_ms)
    per_token = prefill_ms / prompt_tokens
    text += f"; the median decode step took {fmt.ms(median)} for its one token"
    if prompt_tokens > 1 and per_token < median:
        return text + (
            f": a prompt token costs {median / per_token:.1f}× less in the prefill, because one "
            "pass reads the weights once for all of them."
        )
    if prompt_tokens == 1:
        return text + ": a one-token prompt's prefill is one step's work, so there is nothing to share."
    again = "Press **Back to the prompt**, then **Next token**, to time the prefill again."
    if load is not None and cores and load > BUSY_LOAD_PER_CORE * cores:
        return text + (
            f". A prompt token cost {per_token / median:.1f}× *more* in the prefill here, against the lesson, and the "
            f"reason is this machine, not the prefill: it is busy (load {load:.1f} on {cores} "
            f"core{'s' * (cores != 1)}). The prefill's matrix-matrix products are split across the torch threads, "
            "and each one waits for the thread another program is holding up; a decode step's one-row products "
            f"suffer less. On a quiet machine, or with one thread (LLM_EXPLORER_THREADS=1), the prefill's share "
            f"per token is the smaller one. {again}"
        )
    return text + (
        f". A prompt token cost {per_token / median:.1f}× *more* in the prefill here, against the lesson: these are "
        f"single timings of each on a machine shared with other programs, and one slow moment in the prefill is "
        f"enough. {again}"
    )
