"""The Paged KV cache page's link to the engine: its scenarios, and one replay of a scenario on the real model.

Owns the scenarios the reader picks (the requests, their settings, the pool they share) and
``replay``: the scenario run through the engine's own ``PagedBatcher`` (``Backend.run_batch`` with
``paged=PagedKV(...)``), recorded after every scheduler step, plus, for each sequence that was
preempted, the same request run alone (its answer must be the same). Plain data out, cached per
(model, scenario, block size, seed); the figures (``figures.py``) and sentences (``claims.py``) read it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import streamlit as st

from inference.api import Backend, PagedKV, PagingTrace, SamplingParams
from ui.common.resources import client_for

BLOCK_SIZE_RANGE = (1, 32)
DEFAULT_BLOCK_SIZE = 8
MAX_STEPS = 500  # a link's step is clamped here first, then to the replay's own last step
DEFAULT_SCENARIO = "class"


@dataclass(frozen=True)
class Scenario:
    title: str
    story: str  # what the reader should watch for, in one sentence
    prompts: tuple[str, ...]
    labels: tuple[str, ...]  # one per answer (samples: one per sample)
    new_tokens: tuple[int, ...]  # per prompt
    temperature: float
    samples: int = 1  # answers per prompt, forked from the first
    tight_pool: bool = False  # a pool too small for every request at once: someone is preempted


_LESSON = (
    "Explain in two short sentences why the sky looks blue on a clear afternoon, so that a class of "
    "ten-year-old students can follow it."
)
_SYSTEM = (
    "You are a patient assistant for a science museum. Answer every visitor's question in one short, "
    "friendly sentence, and never use jargon. Question:"
)
SCENARIOS: dict[str, Scenario] = {
    "one": Scenario(
        "One prompt",
        "one request takes a block, fills it, and takes the next only when the last one is full.",
        ("The history of the printing press began in",),
        ("request 0",),
        (24,),
        0.0,
    ),
    "class": Scenario(
        "A class on one prompt",
        "the students ask at once, so the first one's prefill computes the prompt and the others are forked from it: "
        "they share every block, and a shared block that is only partly filled is copied when one of them first "
        "writes into it (copy-on-write).",
        (_LESSON,) * 6,
        tuple(f"student {i}" for i in range(6)),
        (8,) * 6,
        0.8,
    ),
    "system": Scenario(
        "One system prompt, different questions",
        "the system prompt's full blocks are computed once and shared; each question starts its own blocks where "
        "the texts part.",
        tuple(
            f"{_SYSTEM} {question}"
            for question in (
                "Why do stars twinkle?",
                "How do bees make honey?",
                "What is a volcano?",
                "Why is the sea salty?",
            )
        ),
        tuple(f"question {i}" for i in range(4)),
        (8,) * 4,
        0.0,
    ),
    "samples": Scenario(
        "n samples of one prompt",
        "the prompt is computed once and forked: every sample shares every block, and the first write into the "
        "shared, partly filled last block copies it (copy-on-write).",
        ("Write the opening line of a short story about a lighthouse keeper who",),
        tuple(f"sample {i}" for i in range(4)),
        (12,),
        0.9,
        samples=4,
    ),
    "preempt": Scenario(
        "A long request forces a preemption",
        "two requests share a pool too small for both to finish: when it runs out, the newest gives every block "
        "back and waits, then comes back and recomputes (its cached blocks still on the free list are hits).",
        (
            "List the planets of the solar system in order, with one fact about each:",
            "The lighthouse stood on the last rock of the island, and every night for forty years its keeper climbed "
            "the one hundred and twelve steps to light the lamp. Ships passing far out at sea saw the beam sweep "
            "across the water and knew where the reef lay. One winter night a storm",
        ),
        ("short prompt, long answer", "long prompt"),
        (28, 12),
        0.0,
        tight_pool=True,
    ),
}


@dataclass(frozen=True)
class Replay:
    """One scenario's run on paged blocks, with what the page says about it."""

    scenario: str
    trace: PagingTrace
    labels: tuple[str, ...]  # per sequence
    answers: tuple[str, ...]  # per sequence: the generated text
    token_ids: tuple[tuple[int, ...], ...]  # per sequence: the generated tokens
    alone: tuple[tuple[int, bool], ...]  # per preempted sequence: (sequence, its tokens equal its run alone)


def blocks_for(positions: int, block_size: int) -> int:
    return -(-positions // block_size)


def tight_pool(lengths: list[int], new_tokens: list[int], block_size: int) -> int:
    """A pool that admits every prompt at once and fits each request alone, but not every answer together."""
    alone = max(blocks_for(n + m, block_size) for n, m in zip(lengths, new_tokens))
    prompts = sum(blocks_for(n, block_size) for n in lengths)
    return max(alone, prompts + 1)


def scenario_params(scenario: Scenario, seed: int) -> list[SamplingParams]:
    """Each prompt's settings: request i draws from seed + i (samples of one prompt: from seed + j, by fork)."""
    return [
        SamplingParams(
            temperature=scenario.temperature,
            max_new_tokens=new_tokens,
            seed=seed + index * scenario.samples,
            stop_on_eos=False,
        )
        for index, new_tokens in enumerate(scenario.new_tokens)
    ]


@st.cache_data(max_entries=16, show_spinner=False)
def replay(model: str, scenario_key: str, block_size: int, seed: int) -> Replay:
    """``scenario_key`` through the real ``PagedBatcher`` of ``model`` with blocks of ``block_size`` positions."""
    return replay_on(client_for(model), scenario_key, block_size, seed)


def replay_on(client: Backend, scenario_key: str, block_size: int, seed: int) -> Replay:
    """``replay`` on any backend (uncached)."""
    scenario = SCENARIOS[scenario_key]
    params = scenario_params(scenario, seed)
    ids = [client.encode_prompt(prompt) for prompt in scenario.prompts]
    num_blocks = (
        tight_pool([len(i) for i in ids], list(scenario.new_tokens), block_size) if scenario.tight_pool else None
    )
    run = client.run_batch(ids, params, paged=PagedKV(block_size, num_blocks, scenario.samples))
    for result in run.results:
        if not result.ok:
            raise ValueError(f"{scenario.labels[result.index]} could not run: {result.error}")
    trace = run.paging
    preempted = sorted({e.sequence for step in trace.steps for e in step.events if e.kind == "preempt"})
    alone = []
    for sequence in preempted:
        prompt = trace.prompt_of[sequence]
        own = params[prompt]
        if scenario.samples > 1:
            own = replace(own, seed=own.seed + sequence % scenario.samples)
        solo = client.complete(ids[prompt], own).token_ids
        alone.append((sequence, list(solo) == run.results[sequence].token_ids))
    return Replay(
        scenario=scenario_key,
        trace=trace,
        labels=scenario.labels,
        answers=tuple(result.text for result in run.results),
        token_ids=tuple(tuple(result.token_ids) for result in run.results),
        alone=tuple(alone),
    )
