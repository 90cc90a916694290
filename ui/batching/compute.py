"""The Batching page's link to the engine: request checks, the padded batch, and static vs continuous runs.

Owns turning the page's editable request list into prompts and settings (a bad row
gets its own message, the others go on), the left-padded batch as plain arrays (the
engine's own ``left_pad`` and mask), and one comparison run: static batching,
continuous batching and every request alone, all on the shared engine, returned as
plain data for the figures in ``ui/batching/figures.py``. The editor's rows as the
session keeps them are ``ui/batching/requests.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import streamlit as st

from inference.api import BatchRun, PromptError, SamplingParams, number_text
from inference.api import padded_batch as left_padded
from ui.batching.figures import EMPTY, IDLE, PAUSED
from ui.common import format as fmt
from ui.common.resources import client_for
from ui.common.token_text import sequence_text, token_texts

MAX_REQUESTS = 8
MAX_PROMPT_TOKENS = 64
MAX_NEW_TOKENS = 32
DEFAULT_SLOTS = 4  # fewer than the default requests: two wait, and join as slots free
# One long answer among short ones, prompts of 1 to 11 tokens: the case continuous batching is for. A static
# batch keeps all six rows (five of them finished and idle) until the long one is done; four slots retire the
# short ones and admit the waiting two. Measured on this 2-core CPU: docs/pages-generating.md.
DEFAULT_REQUESTS = [
    {"prompt": "Once upon a time there was", "max new tokens": 32},
    {"prompt": "The cat sat", "max new tokens": 4},
    {"prompt": "Bank is closed", "max new tokens": 2},
    {"prompt": "The cat sat on the mat because it was tired.", "max new tokens": 3},
    {"prompt": "The capital of France is", "max new tokens": 2},
    {"prompt": "Hi", "max new tokens": 4},
]


@dataclass(frozen=True)
class Requests:
    prompts: list[str]  # the valid ones, in order
    max_new_tokens: list[int]
    rows: list[int]  # the editor row each valid prompt came from
    problems: list[str]  # one message per rejected or clamped row


def parse_requests(model: str, rows: list[dict]) -> Requests:
    """Valid (prompt, max new tokens) pairs from the editor; every other row explained."""
    client = client_for(model)
    prompts, budgets, kept, problems = [], [], [], []
    if len(rows) > MAX_REQUESTS:
        problems.append(f"{len(rows)} requests: only the first {MAX_REQUESTS} are run.")
    for index, row in enumerate(rows[:MAX_REQUESTS]):
        prompt = str(row.get("prompt") or "")
        try:
            ids = client.encode_prompt(prompt)
        except PromptError as error:
            problems.append(f"Request {index} is left out: {fmt.clause(error)}.")
            continue
        if len(ids) > MAX_PROMPT_TOKENS:
            problems.append(f"Request {index} is left out: {len(ids)} tokens, the page's limit is {MAX_PROMPT_TOKENS}.")
            continue
        budget = _whole_number(row.get("max new tokens"), default=8)
        if not 1 <= budget <= MAX_NEW_TOKENS:
            clamped = min(max(budget, 1), MAX_NEW_TOKENS)
            problems.append(f"Request {index}: max new tokens {budget} is outside 1–{MAX_NEW_TOKENS}, using {clamped}.")
            budget = clamped
        prompts.append(prompt)
        budgets.append(budget)
        kept.append(index)
    return Requests(prompts, budgets, kept, problems)


def _whole_number(value, default: int) -> int:
    try:
        return int(number_text.real(value))
    except number_text.NumberError:
        return default


@dataclass(frozen=True)
class PaddedBatch:
    tokens: list[list[str | None]]  # (B, T) token texts, None = padding
    positions: np.ndarray  # (B, T) position ids
    real: np.ndarray  # (B, T) True = real token
    masks: np.ndarray  # (B, T, T) attention mask of each request
    padding_share: float


@st.cache_data(max_entries=16, show_spinner=False)
def padded_batch(model: str, prompts: tuple[str, ...]) -> PaddedBatch:
    """The prompts left-padded exactly as static batching pads them (the engine's ``left_pad``)."""
    client = client_for(model)
    ids, mask, positions, masks = left_padded([client.encode_prompt(p) for p in prompts])  # (B, T), (B, T, T)
    texts = [
        [text if real else None for text, real in zip(token_texts(client.tokenizer, row_ids), row_mask)]
        for row_ids, row_mask in zip(ids.tolist(), mask.tolist())
    ]
    return PaddedBatch(texts, positions, mask, masks, float(1 - mask.astype(np.float32).mean()))


@dataclass
class ModeRun:
    """One batching mode's run as plain data."""

    grid: np.ndarray  # (rows or slots, steps): request number, IDLE or EMPTY
    phases: list[str]
    texts: list[str]
    token_ids: list[list[int]]
    output_tokens: int
    seconds: float
    computed_positions: int
    wasted_positions: int
    ttft_ms: list[float]
    tpot_ms: list[float | None]
    step_ms: list[float]  # (steps,) forward + sampling of each step
    rows: list[int]  # (steps,) batch rows each step's forward computed
    reserved_bytes: list[int]  # (steps,) KV cache reserved for the rows/slots in use after each step
    used_bytes: list[int]  # (steps,) of it, holding real tokens
    allocated_bytes: int  # the whole cache the mode allocated (static: the batch; continuous: every slot)
    prompt_positions: int = 0  # the prompts' tokens, all requests
    reused: dict[int, int] = field(default_factory=dict)  # request -> prompt positions copied from a slot, not computed

    @property
    def tokens_per_second(self) -> float:
        return self.output_tokens / self.seconds if self.seconds else 0.0

    def decode_medians(self) -> tuple[float, float]:
        """(median decode step in ms, mean rows per decode step): how fast each step was, for how much work."""
        decodes = [i for i, phase in enumerate(self.phases) if phase == "decode"]
        if not decodes:
            return 0.0, 0.0
        return float(np.median([self.step_ms[i] for i in decodes])), float(np.mean([self.rows[i] for i in decodes]))

    @property
    def late_prefills(self) -> list[int]:
        """Prefill steps after the first: each admits waiting requests and pauses every running one's decoding."""
        return [i for i, phase in enumerate(self.phases) if phase == "prefill" and i > 0]


@dataclass
class Comparison:
    prompts: list[str]
    static: ModeRun
    continuous: ModeRun
    solo: list[list[int]]
    solo_texts: list[str]
    n_slots: int
    share_prefixes: bool = False  # the continuous run reused prompt starts a slot already held


def _mode_run(run: BatchRun, n_rows: int, position_bytes: int, allocated_positions: int) -> ModeRun:
    grid = np.full((n_rows, len(run.steps)), EMPTY)
    done: set[int] = set()
    held: dict[int, int] = {}  # request -> its slot, from its first step until it finishes
    for column, step in enumerate(run.steps):
        for request, slot in held.items():
            if request not in step.slots:
                grid[slot, column] = PAUSED  # in its slot, but not in this forward (others are prefilling)
        for request, slot in step.slots.items():
            grid[slot, column] = IDLE if request in done else request
            held[request] = slot
        done.update(step.finished)
        for request in step.finished:
            held.pop(request, None)
    results = run.results
    return ModeRun(
        grid=grid,
        phases=[s.phase for s in run.steps],
        texts=[r.text for r in results],
        token_ids=[list(r.token_ids) for r in results],
        output_tokens=sum(len(r.token_ids) for r in results),
        seconds=sum(s.seconds for s in run.steps),
        computed_positions=sum(s.batch_positions for s in run.steps),
        wasted_positions=sum(s.wasted_positions for s in run.steps),
        ttft_ms=[1000 * (r.time_to_first_token or 0.0) for r in results],
        tpot_ms=[None if r.time_per_output_token is None else 1000 * r.time_per_output_token for r in results],
        step_ms=[1000 * s.seconds for s in run.steps],
        rows=[len(s.request_ids) for s in run.steps],
        reserved_bytes=[s.cache_positions_reserved * position_bytes for s in run.steps],
        used_bytes=[s.cache_positions_in_use * position_bytes for s in run.steps],
        allocated_bytes=allocated_positions * position_bytes,
        prompt_positions=sum(len(r.prompt_ids) for r in results),
        reused={request: n for step in run.steps for request, n in step.reused_positions.items()},
    )


def compare(
    model: str,
    prompts: list[str],
    budgets: list[int],
    temperature: float,
    seed: int,
    n_slots: int,
    progress: Callable[[float, str], None] | None = None,
    share_prefixes: bool = False,
) -> Comparison:
    """Static, continuous (``n_slots`` cache slots; ``share_prefixes``: a prompt reuses the start a slot holds)
    and solo runs of the same requests and settings."""
    client = client_for(model)
    params = [
        SamplingParams(temperature=temperature, max_new_tokens=b, seed=seed + i, stop_on_eos=True)
        for i, b in enumerate(budgets)
    ]
    report = progress or (lambda share, text: None)
    position_bytes = client.info.config.kv_cache_bytes(1, client.info.dtype_bytes)  # K and V, every layer
    report(0.05, "static batching: one left-padded batch")
    static_run = client.run_batch(prompts, params)
    static_reserved = static_run.steps[0].cache_positions_reserved if static_run.steps else 0
    static = _mode_run(static_run, len(prompts), position_bytes, static_reserved)
    report(0.35, f"continuous batching: {n_slots} cache slots")
    continuous_run = client.run_batch(prompts, params, n_slots=n_slots, share_prefixes=share_prefixes)
    slot_capacity = min(
        client.info.config.max_seq_len, max(len(client.encode_prompt(p)) + b for p, b in zip(prompts, budgets))
    )
    continuous = _mode_run(continuous_run, n_slots, position_bytes, n_slots * slot_capacity)
    solo, solo_texts = [], []
    for i, (prompt, p) in enumerate(zip(prompts, params)):
        report(0.65 + 0.35 * i / len(prompts), f"request {i} alone")
        done = client.complete(prompt, p)
        solo.append(done.token_ids)
        solo_texts.append(done.text)
    report(1.0, "done")
    return Comparison(prompts, static, continuous, solo, solo_texts, n_slots, share_prefixes)


@dataclass(frozen=True)
class ThroughputCurve:
    """Decode steps timed at several batch sizes (the same short prompt in every row)."""

    batch_sizes: list[int]
    step_ms: list[float]  # median decode step at each size
    tokens_per_second: list[float]  # batch size / step time
    prompt: str
    decode_steps: int  # timed per size


CURVE_SIZES = (1, 2, 4, 8)
CURVE_PROMPT = "The cat sat"
CURVE_STEPS = 4  # decode steps timed per size: ~2 s in all on 2 CPU cores


def throughput_curve(
    model: str,
    sizes: tuple[int, ...] | None = None,
    decode_steps: int | None = None,
    progress: Callable[[float, str], None] | None = None,
) -> ThroughputCurve:
    """Static batches of ``CURVE_PROMPT`` at each size (default ``CURVE_SIZES``), greedy: the median of their
    ``decode_steps`` (default ``CURVE_STEPS``) decode steps' times."""
    client = client_for(model)
    sizes, decode_steps = sizes or CURVE_SIZES, decode_steps or CURVE_STEPS
    report = progress or (lambda share, text: None)
    medians = []
    for i, size in enumerate(sizes):
        report(i / len(sizes), f"batch of {size}")
        params = [SamplingParams(temperature=0.0, max_new_tokens=decode_steps + 1, stop_on_eos=False)] * size
        run = client.run_batch([CURVE_PROMPT] * size, params)
        medians.append(1000 * float(np.median([s.seconds for s in run.steps if s.phase == "decode"])))
    report(1.0, "done")
    return ThroughputCurve(
        list(sizes), medians, [1000 * b / ms for b, ms in zip(sizes, medians)], CURVE_PROMPT, decode_steps
    )


def check_table(comparison: Comparison, row_labels: list[int] | None = None) -> list[dict]:
    """Each request's output alone, in the static batch and in the continuous batch, and whether they agree."""
    labels = row_labels or list(range(len(comparison.prompts)))
    return [
        {
            "request": labels[i],
            "prompt": prompt,
            "alone": comparison.solo_texts[i],
            "static batch": comparison.static.texts[i],
            "continuous batch": comparison.continuous.texts[i],
            "identical": "✓"
            if comparison.solo[i] == comparison.static.token_ids[i] == comparison.continuous.token_ids[i]
            else "✗",
        }
        for i, prompt in enumerate(comparison.prompts)
    ]


CLASS_SIZES = (2, 40)  # the "a class asks the same thing" experiment: identical requests sent at once
DEFAULT_CLASS = 20
CLASS_NEW_TOKENS = 12


@dataclass(frozen=True)
class SameRequests:
    """``n`` identical requests sent at once to the shared server, as a class following its teacher sends them."""

    n: int
    shared: int  # answered by another request's computation (the server's ``coalesced`` flag on the result)
    identical: bool  # every request got the same tokens
    text: str  # the answer, decoded together (``sequence_text``: whole characters across token borders)
    seconds: float  # from the first send to the last answer, wall clock

    @property
    def computed(self) -> int:
        return self.n - self.shared


def same_requests(model: str, prompt: str, params: SamplingParams, n: int) -> SameRequests:
    """Send ``n`` copies of one request to the model's shared generation server together, and read back how many
    the server computed and how many rode on an identical one in flight (``BatchResult.coalesced``)."""
    client = client_for(model)
    started = time.perf_counter()
    handles = [client.submit(prompt, params) for _ in range(n)]
    results = [handle.result(timeout=300) for handle in handles]
    seconds = time.perf_counter() - started
    first = results[0].token_ids
    return SameRequests(
        n=n,
        shared=sum(bool(result.coalesced) for result in results),
        identical=all(result.token_ids == first for result in results),
        text=sequence_text(client.tokenizer, first),
        seconds=seconds,
    )
