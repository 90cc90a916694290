"""The Speculative decoding page's numbers: one speculative run beside plain decoding, a sweep, and a χ² test.

Owns turning the page's controls into a ``Speculation`` (or the engine's own message), the cached runs, all
read through the model's client (``EngineClient.speculate`` and ``generate``, plain records only): the
speculative run's steps as display rows, plain decoding of the same request timed in the same call
(interleaved), greedy speculative against plain greedy, the acceptance sweep over draft depths and n-gram
lengths, and many seeds' first two tokens of plain and speculative decoding with their χ². Figures live in
``ui/speculative/figures.py`` and the sentences in ``ui/speculative/claims.py``.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st

from inference.api import (
    PromptError,
    SamplingError,
    SamplingParams,
    Speculation,
    SpeculationError,
    recorded_draw,
)
from ui.common import stats, token_text
from ui.common.lru import SharedLRU
from ui.common.resources import client_for
from ui.common.token_text import visible

DRAFTERS = {"lookup": "Prompt lookup (n-grams)", "self": "Self-speculation (first k layers)"}
MAX_DRAFT_TOKENS = 16  # the engine's own bound (``speculative.MAX_DRAFT_TOKENS``)
MAX_NGRAM = 8  # the n-gram lengths the control offers (0 is offered too: the engine's message says why not)
DEFAULT_NEW_TOKENS, MAX_NEW_TOKENS = 16, 48  # the run on screen: short, since plain decoding runs twice beside it
SWEEP_TOKENS = 12  # new tokens of each point of the sweep
SWEEP_NGRAMS = (1, 2, 3, 4)
SWEEP_DEPTH_SHARES = (0.25, 0.5, 0.9)  # the sweep's draft depths, as shares of the model's layers (3: the slow drafter)
DEFAULT_SEEDS, MIN_SEEDS, MAX_SEEDS = (
    100,
    20,
    1000,
)  # the χ² test's seeds (a real run each; the engine's tests use 2,000)
CHECKED_SEEDS = 3  # seeds on which the replayed plain draws are checked against plain decoding itself
POOL_BELOW = 10  # χ² cells seen fewer times than this (both samples together) are pooled into one
ERRORS = (SpeculationError, SamplingError, PromptError)
# The prompt the page decodes from, at most (its last tokens, after its BOS: ``prompt_tail``). The page runs it four
# to six times as a whole request (plain and speculative, twice each; the greedy check), each reading the prompt
# again: a 9,002-token prompt kept Gemma 3 270M's page busy for 316 s on two cores.
MAX_PROMPT_TOKENS = 1024


@st.cache_resource(show_spinner=False)
def _store() -> SharedLRU:
    """The last few long measurements (a sweep, a χ² test) by their inputs, shared by every session of the server.
    Not ``st.cache_data``: these run with a progress bar drawn outside them, which a cached function cannot call
    (Streamlit replays a cached function's elements, and the bar's block is not the function's)."""
    return SharedLRU(max_entries=8)


def speculation_for(drafter: str, draft_tokens: int, ngram: int, depth: int, n_layers: int) -> Speculation:
    """The engine's ``Speculation`` for the page's controls; ``SpeculationError`` with the engine's own message
    for one it cannot run (a depth out of 1..n_layers - 1, an n-gram length of 0)."""
    if drafter == "lookup":
        speculation = Speculation("lookup", int(draft_tokens), ngram=int(ngram))
    else:
        speculation = Speculation("self", int(draft_tokens), layers=int(depth))
    speculation.check(n_layers)
    return speculation


def sweep_depths(n_layers: int) -> list[int]:
    """A few draft depths spread over the model's layers (each 1..n_layers - 1, no repeats)."""
    depths = {min(max(1, round(share * n_layers)), n_layers - 1) for share in SWEEP_DEPTH_SHARES}
    return sorted(depths)


def load_average() -> float | None:
    """The machine's one-minute load (what else was running while we timed), or None where it cannot be read."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


# -- one run, with plain decoding beside it ---------------------------------------------------------------
@dataclass(frozen=True)
class CheckView:
    """One drafted token as the page shows it (display texts in ``token_text``'s notation: <0xNN> for bytes)."""

    position: int
    token_id: int
    text: str
    q: float
    p: float
    accept_probability: float
    u: float | None
    accepted: bool
    p_top: list[tuple[int, str, float]]  # (id, text, probability), the model's most probable tokens here
    q_top: list[tuple[int, str, float]]
    p_range: tuple[float, float] | None  # prompt lookup, sampling: x's range of p on [0, 1)


@dataclass(frozen=True)
class StepView:
    index: int
    phase: str  # "prefill", "verify" or "plain"
    checks: list[CheckView]
    final_text: str
    final_id: int
    final_kind: str  # "residual", "bonus" or "plain"
    final_probability: float
    final_u: float | None
    distribution: list[tuple[int, str, float]]  # the distribution the final token was drawn from (top entries)
    rejected_mass: float | None
    emitted: int  # tokens the step added (a stop may cut it)
    ngram: int | None


@dataclass(frozen=True)
class RunView:
    """A speculative run and plain decoding of the same request, timed in one call, interleaved."""

    steps: list[StepView]
    token_ids: list[int]
    texts: list[str]
    text: str  # the output decoded together (whole characters across token borders)
    plain_ids: list[int]
    plain_texts: list[str]
    drafted: int
    accepted: int
    forwards: int
    speculative_seconds: tuple[float, ...]  # wall time of each speculative run (whole request)
    plain_seconds: tuple[float, ...]  # of each plain run, interleaved with them
    finish_reason: str | None
    measured_at: str  # UTC clock time of the measurement
    load: float | None  # one-minute load average just before it

    @property
    def acceptance_rate(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None

    @property
    def tokens_per_forward(self) -> float:
        return len(self.token_ids) / self.forwards if self.forwards else 0.0

    @property
    def speculative_tps(self) -> float:
        return len(self.token_ids) / min(self.speculative_seconds)

    @property
    def plain_tps(self) -> float:
        return len(self.plain_ids) / min(self.plain_seconds)

    @property
    def speedup(self) -> float:
        """Speculative tokens/s over plain tokens/s, each the best of its interleaved runs."""
        return self.speculative_tps / self.plain_tps


def _candidates(tokenizer, candidates) -> list[tuple[int, str, float]]:
    ids = [c.token_id for c in candidates]
    return [
        (i, text, float(c.probability)) for i, text, c in zip(ids, token_text.token_texts(tokenizer, ids), candidates)
    ]


def _step_view(tokenizer, step) -> StepView:
    texts = token_text.token_texts(tokenizer, [c.token_id for c in step.checks] + [step.final.token_id])
    checks = [
        CheckView(
            c.position,
            c.token_id,
            text,
            float(c.q),
            float(c.p),
            float(c.accept_probability),
            c.u,
            bool(c.accepted),
            _candidates(tokenizer, c.p_top),
            _candidates(tokenizer, c.q_top),
            c.p_range,
        )
        for c, text in zip(step.checks, texts)
    ]
    final = step.final
    return StepView(
        step.index,
        step.phase,
        checks,
        texts[-1],
        final.token_id,
        final.kind,
        float(final.probability),
        final.u,
        _candidates(tokenizer, final.distribution),
        final.rejected_mass,
        len(step.token_ids),
        step.ngram,
    )


@st.cache_data(max_entries=16, show_spinner=False)
def run(
    model: str, ids: tuple[int, ...], params: SamplingParams, speculation: Speculation, repeats: int = 2
) -> RunView:
    """``repeats`` plain runs and speculative runs of one request, interleaved (plain first), each timed whole;
    the records are the last speculative run's (every run of a seeded request gives the same)."""
    client = client_for(model)
    load = load_average()
    plain_seconds, speculative_seconds = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        plain = client.complete(list(ids), params).steps
        plain_seconds.append(time.perf_counter() - started)
        started = time.perf_counter()
        speculative = client.complete(list(ids), params, speculation=speculation)
        speculative_seconds.append(time.perf_counter() - started)
    tokenizer = client.tokenizer
    token_ids, plain_ids = speculative.token_ids, [record.token_id for record in plain]
    return RunView(
        steps=[_step_view(tokenizer, step) for step in speculative.steps],
        token_ids=token_ids,
        texts=token_text.token_texts(tokenizer, token_ids),
        text=token_text.sequence_text(tokenizer, token_ids),
        plain_ids=plain_ids,
        plain_texts=token_text.token_texts(tokenizer, plain_ids),
        drafted=speculative.drafted,
        accepted=speculative.accepted,
        forwards=speculative.forwards,
        speculative_seconds=tuple(speculative_seconds),
        plain_seconds=tuple(plain_seconds),
        finish_reason=speculative.finish_reason,
        measured_at=time.strftime("%H:%M:%S UTC", time.gmtime()),
        load=load,
    )


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:.4g}"


def step_rows(steps: list[StepView]) -> tuple[list[list[tuple[str, str, str]]], list[str]]:
    """Each step as cells (token text, kind, hover) for ``figures.speculative.make_step_rows``, and the row names."""
    rows, names = [], []
    for step in steps:
        cells = []
        for check in step.checks:
            verdict = "kept" if check.accepted else "rejected"
            hover = (
                f"drafted {visible(check.text)}<br>q = {_number(check.q)}, p = {_number(check.p)}"
                f"<br>min(1, p/q) = {_number(check.accept_probability)}<br>u = {_number(check.u)}: {verdict}"
            )
            cells.append((check.text, verdict, hover))
        origin = {
            "residual": "replacement after the rejection",
            "bonus": "bonus: every draft was kept, one more from p",
            "plain": "an ordinary step: nothing drafted",
        }[step.final_kind]
        hover = f"{visible(step.final_text)}: {origin}<br>probability {_number(step.final_probability)}"
        hover += f", u = {_number(step.final_u)}"
        cells.append((step.final_text, step.final_kind, hover))
        rows.append(cells)
        names.append(f"{step.index} · {'prompt' if step.phase == 'prefill' else step.phase}")
    return rows, names


def focus_options(steps: list[StepView]) -> list[tuple[int, int]]:
    """(step, draft) of every drafted token, in order."""
    return [(step.index, i) for step in steps for i in range(len(step.checks))]


def default_focus(steps: list[StepView]) -> tuple[int, int] | None:
    """The first rejected draft (where the rule has most to show), else the first draft, else None."""
    options = focus_options(steps)
    rejected = [(s, i) for s, i in options if not steps[s].checks[i].accepted]
    return (rejected or options or [None])[0]


@dataclass(frozen=True)
class FocusBars:
    """p and q on the tokens either records: None where a record holds no value (not in that distribution's top)."""

    ids: list[int]
    texts: list[str]
    p: list[float | None]
    q: list[float | None]
    drafted: int  # index of the drafted token


def focus_bars(check: CheckView, drafter: str) -> FocusBars:
    """The drafted token and both distributions' top entries; prompt lookup's q is a point mass (0 elsewhere)."""
    p_of = {i: v for i, _, v in check.p_top} | {check.token_id: check.p}
    q_of = {i: v for i, _, v in check.q_top} | {check.token_id: check.q}
    texts = {i: t for i, t, _ in check.p_top + check.q_top} | {check.token_id: check.text}
    order = sorted(texts, key=lambda i: (-(p_of.get(i) or 0.0), -(q_of.get(i) or 0.0)))
    return FocusBars(
        order,
        [texts[i] for i in order],
        [p_of.get(i) for i in order],
        [q_of.get(i, 0.0 if drafter == "lookup" else None) for i in order],
        order.index(check.token_id),
    )


@dataclass(frozen=True)
class GreedyCheck:
    plain_ids: list[int]
    speculative_ids: list[int]
    plain_texts: list[str]
    speculative_texts: list[str]

    @property
    def first_difference(self) -> int | None:
        """The first position where the two differ (a length difference counts), None when identical."""
        for i, (a, b) in enumerate(zip(self.plain_ids, self.speculative_ids)):
            if a != b:
                return i
        if len(self.plain_ids) != len(self.speculative_ids):
            return min(len(self.plain_ids), len(self.speculative_ids))
        return None


@st.cache_data(max_entries=16, show_spinner=False)
def greedy_check(model: str, ids: tuple[int, ...], params: SamplingParams, speculation: Speculation) -> GreedyCheck:
    """Greedy speculative decoding against plain greedy decoding on the same request (``params`` made greedy)."""
    client = client_for(model)
    greedy = dataclasses.replace(params, temperature=0.0)
    plain = [record.token_id for record in client.complete(list(ids), greedy).steps]
    speculative = client.complete(list(ids), greedy, speculation=speculation).token_ids
    tokenizer = client.tokenizer
    return GreedyCheck(
        plain, speculative, token_text.token_texts(tokenizer, plain), token_text.token_texts(tokenizer, speculative)
    )


# -- the sweep ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SweepPoint:
    drafter: str
    setting: int  # the draft depth k (self) or the n-gram length n (lookup)
    acceptance_rate: float | None  # None: nothing was drafted
    tokens_per_forward: float
    speedup: float  # against plain decoding timed before and after the sweep


@dataclass(frozen=True)
class Sweep:
    points: list[SweepPoint]
    plain_tps: tuple[float, float]  # plain decoding before and after the sweep
    new_tokens: int
    draft_tokens: int
    measured_at: str
    load: float | None

    def of(self, drafter: str) -> list[SweepPoint]:
        return [point for point in self.points if point.drafter == drafter]


def sweep(
    model: str,
    ids: tuple[int, ...],
    params: SamplingParams,
    draft_tokens: int,
    progress: Callable[[float, str], None] | None = None,
) -> Sweep:
    """Acceptance, tokens per forward and speed-up for a few draft depths and n-gram lengths, ``SWEEP_TOKENS`` new
    tokens each, with plain decoding timed before and after (the speed-up is against the mean of the two); kept
    in the server's store (``stored``), so the same request is measured once."""
    key = ("sweep", model, ids, params, draft_tokens)
    found = _store().get(key)
    if found is None:
        found = _store().put(key, _sweep(model, ids, params, draft_tokens, progress))
    return found


def _sweep(
    model: str,
    ids: tuple[int, ...],
    params: SamplingParams,
    draft_tokens: int,
    _progress: Callable[[float, str], None] | None,
) -> Sweep:
    client = client_for(model)
    params = dataclasses.replace(params, max_new_tokens=SWEEP_TOKENS)
    settings = [("self", k) for k in sweep_depths(client.info.config.n_layers)] + [("lookup", n) for n in SWEEP_NGRAMS]
    load = load_average()

    def plain_tps() -> float:
        started = time.perf_counter()
        records = client.complete(list(ids), params).steps
        return len(records) / (time.perf_counter() - started)

    before = plain_tps()
    measured = []
    for i, (drafter, setting) in enumerate(settings):
        if _progress is not None:
            _progress(i / len(settings), f"{'k' if drafter == 'self' else 'n'} = {setting}")
        speculation = (
            Speculation("self", draft_tokens, layers=setting)
            if drafter == "self"
            else Speculation("lookup", draft_tokens, ngram=setting)
        )
        started = time.perf_counter()
        result = client.complete(list(ids), params, speculation=speculation)
        tps = len(result.token_ids) / (time.perf_counter() - started)
        measured.append((drafter, setting, result.acceptance_rate, result.tokens_per_forward or 0.0, tps))
    after = plain_tps()
    reference = (before + after) / 2
    points = [SweepPoint(d, s, rate, tpf, tps / reference) for d, s, rate, tpf, tps in measured]
    return Sweep(
        points, (before, after), SWEEP_TOKENS, draft_tokens, time.strftime("%H:%M:%S UTC", time.gmtime()), load
    )


# -- "it changes nothing": many seeds' first two tokens -------------------------------------------------
@dataclass(frozen=True)
class SeedTest:
    seeds: int
    plain: dict[tuple[int, ...], int]  # (first token, second token) -> seeds that drew it (one token: it ended)
    speculative: dict[tuple[int, ...], int]
    texts: dict[int, str]  # display text of every token drawn
    same_seeds: int  # seeds on which both drew the same two tokens
    statistic: float
    dof: int
    p_value: float
    replay_checked: int  # seeds on which the replayed plain draws were checked against plain decoding itself
    replay_matched: int
    seconds: float


def seed_test(
    model: str,
    ids: tuple[int, ...],
    params: SamplingParams,
    speculation: Speculation,
    seeds: int,
    progress: Callable[[float, str], None] | None = None,
) -> SeedTest:
    """The χ² test of ``_seed_test``, kept in the server's store (the same request is run once)."""
    key = ("seeds", model, ids, params, speculation, seeds)
    found = _store().get(key)
    if found is None:
        found = _store().put(key, _seed_test(model, ids, params, speculation, seeds, progress))
    return found


def _seed_test(
    model: str,
    ids: tuple[int, ...],
    params: SamplingParams,
    speculation: Speculation,
    seeds: int,
    _progress: Callable[[float, str], None] | None,
) -> SeedTest:
    """Seeds 0..``seeds`` - 1: each one's first two tokens from speculative decoding (a real run per seed) and from
    plain decoding, replayed from the model's logits with each seed's own draws (exactly ``generate``'s, checked
    against it on ``CHECKED_SEEDS`` seeds), and the χ² that the two samples have one distribution."""
    started = time.perf_counter()
    client, prompt = client_for(model), list(ids)
    two = dataclasses.replace(params, max_new_tokens=2)
    first_logits = client.last_logits(prompt)  # (V,)
    second_logits: dict[int, object] = {}

    def replayed(seed: int) -> tuple[int, ...]:
        """Plain decoding's first two tokens for ``seed`` (one when the first ends the text), from the logits."""
        seeded = dataclasses.replace(two, seed=seed)
        t0 = recorded_draw(first_logits, seeded, prompt, 0).token_id
        if t0 in client.info.eos_ids:
            return (t0,)
        if t0 not in second_logits:
            second_logits[t0] = client.last_logits(prompt + [t0])
        return t0, recorded_draw(second_logits[t0], seeded, prompt + [t0], 1).token_id

    plain, speculative, same = Counter(), Counter(), 0
    for seed in range(seeds):
        if _progress is not None and seed % 10 == 0:
            _progress(seed / seeds, f"seed {seed:,} of {seeds:,}")
        cell = replayed(seed)
        drawn = tuple(
            client.complete(prompt, dataclasses.replace(two, seed=seed), speculation=speculation).token_ids[:2]
        )
        plain[cell] += 1
        speculative[drawn] += 1
        same += drawn == cell
    checked = min(CHECKED_SEEDS, seeds)
    matched = sum(
        tuple(r.token_id for r in client.complete(prompt, dataclasses.replace(two, seed=seed)).steps) == replayed(seed)
        for seed in range(checked)
    )
    test = stats.homogeneity(plain, speculative, POOL_BELOW)
    drawn_ids = sorted({t for cell in list(plain) + list(speculative) for t in cell})
    texts = dict(zip(drawn_ids, token_text.token_texts(client.tokenizer, drawn_ids)))
    return SeedTest(
        seeds,
        dict(plain),
        dict(speculative),
        texts,
        same,
        test.statistic,
        test.dof,
        test.p_value,
        checked,
        matched,
        time.perf_counter() - started,
    )


@dataclass(frozen=True)
class Cell:
    label: str
    plain: int
    speculative: int


def top_cells(test: SeedTest, n: int = 10) -> list[Cell]:
    """The ``n`` pairs of first tokens drawn most often (both samples together), then the rest as one row."""
    counts = Counter(test.plain) + Counter(test.speculative)
    ranked = [cell for cell, _ in counts.most_common()]
    shown, rest = ranked[:n], ranked[n:]

    def label(cell: tuple[int, ...]) -> str:
        return " ".join(visible(test.texts[t]) or "∅" for t in cell) + (" (ended)" if len(cell) == 1 else "")

    cells = [Cell(label(c), test.plain.get(c, 0), test.speculative.get(c, 0)) for c in shown]
    if rest:
        cells.append(
            Cell(
                f"{len(rest):,} other pairs",
                sum(test.plain.get(c, 0) for c in rest),
                sum(test.speculative.get(c, 0) for c in rest),
            )
        )
    return cells
