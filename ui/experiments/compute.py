"""Cached results for the Experiments page (and the Attention page's "Switch off this head"): the model under an intervention.

Owns the link from an ``ui.experiments.settings.Settings`` to the engine's interventions (a
checked ``Interventions`` spec; where it replaces heads by their means, the backend computes
them) and every number the experiment pages draw, read through the model's client: the next-token distribution before and after
(Δp, KL, top-1), the logit lens before and after with the region the edit can reach,
the greedy continuation, the head-importance sweep and the activation-patching sweep
(one cached forward per layer, so a caller can show progress and a rerun is instant),
and the direct logit attribution. Every result is plain numpy/Python, keyed by the
model's name first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import streamlit as st

from inference.api import AttributionTerms, InterventionError, Interventions, PatchLogits, SamplingParams
from ui.common.resources import client_for
from ui.common.token_text import token_texts
from ui.experiments.settings import Settings
from ui.logits.compute import LogitLens, entropy_bits, lens_view, top_indices

MAX_TOKENS = 128  # the traced forwards (lens, attribution) keep every layer's T x T attention
MAX_PATCH_TOKENS = 32  # patching runs T forwards over a batch of L rows of up to T tokens: ~L·T²/2 positions
LENS_POSITIONS = 16  # the lens shows the last 16 positions, like the logit-lens page
CONTINUATION_TOKENS = 12
TOP_N = 8


class ExperimentError(ValueError):
    """An experiment that cannot run as asked (the message says why, in plain words)."""


# -- the spec ---------------------------------------------------------------------------
def prepared_spec(model: str, ids: tuple[int, ...], settings: Settings) -> Interventions | None:
    """The engine's spec for ``settings`` on this prompt, checked; ``ExperimentError`` says what does not fit."""
    if settings.empty:
        return None
    try:
        spec = settings.spec()
        spec.check(client_for(model).info.config, n_positions=len(ids))
    except InterventionError as error:
        raise ExperimentError(str(error)) from None
    return spec


def check_prompt(ids: list[int], limit: int = MAX_TOKENS, what: str = "The prompt") -> None:
    if len(ids) > limit:
        raise ExperimentError(
            f"{what} has {len(ids):,} tokens; experiments trace every layer and run at most {limit} tokens: shorten it"
        )


# -- before and after ---------------------------------------------------------------------
@st.cache_data(max_entries=64, show_spinner=False)  # one (V,) row each
def next_token_probs(model: str, ids: tuple[int, ...], settings: Settings) -> np.ndarray:
    """softmax of the last position's logits, float64 (V,), under ``settings``."""
    spec = prepared_spec(model, ids, settings)
    return client_for(model).next_token_probs(list(ids), spec)


@dataclass(frozen=True)
class BeforeAfter:
    token_ids: list[int]  # the top tokens before and after, by probability before
    token_strings: list[str]
    before: np.ndarray  # (N,) probabilities without the intervention
    after: np.ndarray  # (N,) with it
    top_before: int
    top_after: int
    top_before_text: str
    top_after_text: str
    kl_bits: float  # KL(before || after) over the whole vocabulary, in bits
    entropy_before: float
    entropy_after: float
    description: str  # the spec, in words

    @property
    def changed(self) -> bool:
        return self.top_before != self.top_after

    def p_before(self, token: int) -> float:
        return float(self.before[self.token_ids.index(token)])

    def p_after(self, token: int) -> float:
        return float(self.after[self.token_ids.index(token)])


def kl_bits(p: np.ndarray, q: np.ndarray) -> float:
    """KL(p || q) in bits; terms where p = 0 add nothing (a q of 0 under p > 0 would be infinite)."""
    mask = p > 0
    return float(np.sum(p[mask] * (np.log2(p[mask]) - np.log2(np.maximum(q[mask], np.finfo(float).tiny)))))


@st.cache_data(max_entries=64, show_spinner="Running the model with and without the intervention…")
def before_after(model: str, ids: tuple[int, ...], settings: Settings, top_n: int = TOP_N) -> BeforeAfter:
    before = next_token_probs(model, ids, Settings())
    after = next_token_probs(model, ids, settings)
    chosen = list(dict.fromkeys([*top_indices(before, top_n).tolist(), *top_indices(after, top_n).tolist()]))
    chosen.sort(key=lambda i: -before[i])
    tokenizer = client_for(model).tokenizer
    top_b, top_a = int(np.argmax(before)), int(np.argmax(after))
    spec = prepared_spec(model, ids, settings)
    return BeforeAfter(
        token_ids=chosen,
        token_strings=token_texts(tokenizer, chosen),
        before=before[chosen],
        after=after[chosen],
        top_before=top_b,
        top_after=top_a,
        top_before_text=token_texts(tokenizer, [top_b])[0],
        top_after_text=token_texts(tokenizer, [top_a])[0],
        kl_bits=kl_bits(before, after),
        entropy_before=entropy_bits(before),
        entropy_after=entropy_bits(after),
        description=spec.describe() if spec is not None else "no intervention",
    )


@dataclass(frozen=True)
class LensPair:
    before: LogitLens
    after: LogitLens
    keep_from: int  # the lens's first position in the prompt
    region: tuple[int, int] | None  # (first lens row, first lens column) the edit can change; None: no edit
    changed: np.ndarray  # (L+1, T') bool: top-1 differs from before

    @property
    def changed_outside(self) -> int:
        """Cells whose top guess changed outside the region (always 0: a causal model cannot do it)."""
        if self.region is None:
            return int(self.changed.sum())
        inside = np.zeros_like(self.changed)
        inside[self.region[0] :, self.region[1] :] = True
        return int((self.changed & ~inside).sum())


@st.cache_data(max_entries=32, show_spinner="Running the logit lens with and without the intervention…")
def lens_pair(model: str, ids: tuple[int, ...], settings: Settings) -> LensPair:
    """The logit lens (last ``LENS_POSITIONS`` positions) of the plain and the intervened run."""
    client = client_for(model)
    keep_from = max(0, len(ids) - LENS_POSITIONS)
    spec = prepared_spec(model, ids, settings)
    lenses = []
    for run_spec in (None, spec) if spec is not None else (None,):  # no edit: one run is both
        lens = client.trace(list(ids), keep_from, run_spec).lens
        lenses.append(lens_view(model, lens, list(ids)))
    before, after = lenses[0], lenses[-1]
    region = None
    if spec is not None:
        first_block, first_position = spec.affected_from()
        region = (first_block + 1, max(0, first_position - keep_from))  # lens row 0 is the embeddings
    changed = before.top_ids[:, :, 0] != after.top_ids[:, :, 0]
    return LensPair(before, after, keep_from, region, changed)


@st.cache_data(max_entries=64, show_spinner="Generating a greedy continuation…")
def continuation(model: str, ids: tuple[int, ...], settings: Settings, n: int = CONTINUATION_TOKENS) -> str:
    """The greedy continuation with the intervention on at every step."""
    spec = prepared_spec(model, ids, settings)
    greedy = SamplingParams(temperature=0.0, max_new_tokens=n)
    return client_for(model).complete(list(ids), greedy, spec=spec).text


# -- the target token -------------------------------------------------------------------------
def target_token(model: str, text: str, fallback: int) -> int:
    """The one token ``text`` encodes to ("" = ``fallback``, the model's top guess); ``ExperimentError`` otherwise."""
    if text == "":
        return fallback
    ids = client_for(model).tokenizer.encode(text)
    if len(ids) != 1:
        raise ExperimentError(
            f"{text!r} is {len(ids)} tokens for this model; the target must be exactly one "
            "(mind the leading space: “ cat” is one token, “cat” may be another)"
        )
    return ids[0]


# -- head importance ------------------------------------------------------------------------
@st.cache_data(max_entries=2048, show_spinner=False)  # n_heads floats each
def head_importance_layer(
    model: str, ids: tuple[int, ...], target: int, mode: str, factor: float, layer: int
) -> np.ndarray:
    """log p(target) with each head of ``layer`` changed alone: (H,), one forward over a batch of H rows."""
    return client_for(model).head_importance(list(ids), target, mode, factor, layer)


@dataclass(frozen=True)
class HeadImportance:
    baseline: float  # log p(target) without any change
    logprobs: np.ndarray  # (L, H)

    @property
    def delta(self) -> np.ndarray:
        """(L, H) change in log p(target) when that head alone is changed."""
        return self.logprobs - self.baseline


def head_importance(
    model: str,
    ids: tuple[int, ...],
    target: int,
    mode: str,
    factor: float,
    on_progress: Callable[[int, int], None] | None = None,
) -> HeadImportance:
    """Every head changed in turn, a layer per forward; ``on_progress(done, total)`` after each layer."""
    n_layers = client_for(model).info.config.n_layers
    rows = []
    for layer in range(n_layers):
        rows.append(head_importance_layer(model, ids, target, mode, factor, layer))
        if on_progress is not None:
            on_progress(layer + 1, n_layers)
    baseline = float(np.log(next_token_probs(model, ids, Settings())[target]))
    return HeadImportance(baseline, np.stack(rows))


# -- activation patching ------------------------------------------------------------------
@dataclass(frozen=True)
class PatchSetup(PatchLogits):
    """The engine's patching setup (``PatchLogits``: first difference, answers, gaps) with both prompts' tokens."""

    clean_ids: tuple[int, ...]
    corrupt_ids: tuple[int, ...]
    clean_pieces: list[str]
    corrupt_pieces: list[str]
    clean_answer_text: str
    corrupt_answer_text: str


@st.cache_data(max_entries=16, show_spinner="Running the clean and the corrupted prompt…")
def patch_setup(model: str, clean: str, corrupt: str) -> PatchSetup:
    """Both prompts' tokens and answers; ``ExperimentError`` (or ``PromptError``) when they cannot be compared."""
    client = client_for(model)
    clean_ids, corrupt_ids = client.encode_prompt(clean), client.encode_prompt(corrupt)
    check_prompt(clean_ids, MAX_PATCH_TOKENS, "The clean prompt")
    try:
        logits = client.patch(clean_ids, corrupt_ids).setup
    except InterventionError as error:
        raise ExperimentError(str(error)) from None
    tokenizer = client.tokenizer
    if logits.clean_answer == logits.corrupt_answer:
        raise ExperimentError(
            f"both prompts' most likely next token is {token_texts(tokenizer, [logits.clean_answer])[0]!r}: "
            "patching measures how much of the clean answer comes back, so the corrupted prompt "
            "must answer something else"
        )
    return PatchSetup(
        **vars(logits),
        clean_ids=tuple(clean_ids),
        corrupt_ids=tuple(corrupt_ids),
        clean_pieces=token_texts(tokenizer, clean_ids),
        corrupt_pieces=token_texts(tokenizer, corrupt_ids),
        clean_answer_text=token_texts(tokenizer, [logits.clean_answer])[0],
        corrupt_answer_text=token_texts(tokenizer, [logits.corrupt_answer])[0],
    )


@st.cache_data(max_entries=1024, show_spinner=False)  # L floats each
def patch_position_column(model: str, setup: PatchSetup, position: int) -> np.ndarray:
    """Share of the clean answer restored by patching ``position`` after each block: (L,), one batched forward."""
    return client_for(model).patch(list(setup.clean_ids), list(setup.corrupt_ids), (position,)).restored[0]


def patching(model: str, setup: PatchSetup, on_progress: Callable[[int, int], None] | None = None) -> np.ndarray:
    """(L, T) share restored for every (block, position); ``on_progress(done, total)`` after each position.

    Positions before the first difference hold the same stream in both runs: a patch there
    changes nothing, so they are 0 without a forward.
    """
    n_layers, steps = client_for(model).info.config.n_layers, len(setup.clean_ids)
    restored = np.zeros((n_layers, steps))
    todo = range(setup.first_difference, steps)
    for done, position in enumerate(todo, start=1):
        restored[:, position] = patch_position_column(model, setup, position)
        if on_progress is not None:
            on_progress(done, len(todo))
    return restored


# -- direct logit attribution ---------------------------------------------------------------
@dataclass(frozen=True)
class Attribution(AttributionTerms):
    """The engine's split of one logit (``AttributionTerms``) with the target token written."""

    token_text: str


@st.cache_data(max_entries=32, show_spinner="Splitting the logit into its sources…")
def attribution(model: str, ids: tuple[int, ...], target: int, settings: Settings) -> Attribution:
    client = client_for(model)
    spec = prepared_spec(model, ids, settings)
    split = client.attribution(list(ids), target, spec)
    return Attribution(**vars(split), token_text=token_texts(client.tokenizer, [target])[0])


# -- the Attention page: heads that send one token to another ----------------------------------
def heads_sending(probs: np.ndarray, query: int, key: int, threshold: float) -> list[tuple[int, int, float]]:
    """(layer, head, weight) of every head whose attention from ``query`` to ``key`` is at least ``threshold``."""
    weights = probs[:, :, query, key]  # (L, H)
    found = np.argwhere(weights >= threshold)
    return sorted(((int(l), int(h), float(weights[l, h])) for l, h in found), key=lambda t: -t[2])
