"""The sampling settings shared by the Logits and Sampling pages: their widgets, clamps and notes.

Owns the session keys of the part-2 sampling controls (kept across pages through
``state.bind``, so a temperature set on one page is still there on the other) and the
step from raw widget values to a validated ``SamplingParams`` plus plain-language
notes: T = 0 is greedy, top-k above the vocabulary is clamped, a tiny top-p leaves one
token. ``resolve`` never raises; bad input comes back as ``error`` for the page to show.
A stored value the controls cannot show (set from code or an old session, never by
the widgets) is brought into the control's range with a note, since Streamlit raises
on a slider whose value lies outside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from inference.api import SamplingError, SamplingParams, number_text
from ui.common import state

TEMPERATURE, TOP_K, TOP_P, MIN_P, REPETITION_PENALTY = (  # their session keys
    state.TEMPERATURE,
    state.TOP_K,
    state.TOP_P,
    state.MIN_P,
    state.REPETITION_PENALTY,
)
DEFAULTS: dict[str, Any] = {TEMPERATURE: 0.8, TOP_K: 0, TOP_P: 1.0, MIN_P: 0.0, REPETITION_PENALTY: 1.0}
SMALLEST_TOP_P = 0.001
# What each control can show: (lowest, highest or None for no upper end), and the sliders' steps.
# The widgets, ``fit_to_controls`` and the shared links (``ui.session.links``) all read these.
RANGES: dict[str, tuple[float, float | None]] = {
    TEMPERATURE: (0.0, 2.0),
    TOP_K: (0, None),
    TOP_P: (0.0, 1.0),
    MIN_P: (0.0, 1.0),
    REPETITION_PENALTY: (0.5, 2.0),
}
STEPS: dict[str, float] = {TEMPERATURE: 0.05, TOP_P: 0.01, MIN_P: 0.01, REPETITION_PENALTY: 0.05}
LABELS = {
    TEMPERATURE: "temperature",
    TOP_K: "top-k",
    TOP_P: "top-p",
    MIN_P: "min-p",
    REPETITION_PENALTY: "repetition penalty",
}
# Each widget's label and help, in the row's order (DEFAULTS' order).
WIDGETS: dict[str, tuple[str, str]] = {
    TEMPERATURE: ("Temperature T", "0 = greedy. Logits are divided by T before softmax."),
    TOP_K: ("top-k (0 = off)", "Keep only the k most probable tokens."),
    TOP_P: ("top-p (1 = off)", "Keep the smallest set of most probable tokens whose mass reaches p."),
    MIN_P: ("min-p (0 = off)", "Drop tokens below min-p × the top probability."),
    REPETITION_PENALTY: (
        "Repetition penalty (1 = off)",
        "Push down tokens already in the prompt (divide positive logits, multiply negative ones).",
    ),
}


@dataclass
class Settings:
    """The outcome of the controls: params to run with (None on error), notes to show, or an error."""

    params: SamplingParams | None
    notes: list[str] = field(default_factory=list)
    error: str | None = None


def parse_seed(value: Any) -> int:
    """The seed as an int >= 0; anything else raises ``SamplingError`` with a message for the user."""
    try:
        if isinstance(value, str) and not number_text.WHOLE.fullmatch(value.strip()):
            value = number_text.real(value)  # "42.0" as typed
        return number_text.whole(value, low=0)
    except number_text.NumberError:
        message = f"the seed must be a whole number ≥ 0, got {value!r}: type digits only, e.g. 42"
        raise SamplingError(message) from None


def resolve(raw: dict[str, Any], seed: Any, vocab_size: int, max_new_tokens: int = 32) -> Settings:
    """Turn raw control values into ``SamplingParams``, clamping what can be clamped and saying so."""
    notes: list[str] = []
    try:
        seed_value = parse_seed(seed)
        top_k = number_text.whole(raw[TOP_K], "top-k")
        if top_k > vocab_size:
            notes.append(
                f"top-k = {top_k:,} is larger than the vocabulary ({vocab_size:,} tokens): "
                f"clamped to {vocab_size:,}, which keeps every token (the same as top-k off)."
            )
            top_k = vocab_size
        top_p = number_text.real(raw[TOP_P], "top-p")
        if top_p <= 0:
            notes.append(
                f"top-p must be above 0 (it keeps the smallest set whose mass reaches p): "
                f"using {SMALLEST_TOP_P}, which keeps only the most probable token."
            )
            top_p = SMALLEST_TOP_P
        params = SamplingParams(
            temperature=number_text.real(raw[TEMPERATURE], "temperature"),
            top_k=top_k,
            top_p=top_p,
            min_p=number_text.real(raw[MIN_P], "min-p"),
            repetition_penalty=number_text.real(raw[REPETITION_PENALTY], "repetition penalty"),
            max_new_tokens=max_new_tokens,
            seed=seed_value,
        )
    except (SamplingError, ValueError, TypeError) as error:
        return Settings(params=None, notes=notes, error=f"Invalid setting: {error}")
    if params.greedy:
        notes.append(
            "Temperature 0 means greedy decoding: dividing by T = 0 is undefined, so the sampler "
            "skips the draw and always takes the highest-scoring token, whatever the seed. "
            "top-k, top-p and min-p then change nothing."
        )
    return Settings(params=params, notes=notes)


def fit_to_controls(values: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``values`` as the controls can show them (clamped into range, or the default), and a note for each change."""
    fitted, notes = dict(values), []
    for key, value in values.items():
        if key not in RANGES:
            continue
        low, high = RANGES[key]
        kind = type(DEFAULTS[key])  # float for the sliders, int for top-k
        usable = (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and (isinstance(value, int) or (not math.isnan(value) and (kind is float or value.is_integer())))
        )
        if not usable:
            fitted[key] = DEFAULTS[key]
            notes.append(
                f"{LABELS[key]} = {value!r} is not a setting the control can hold: reset to {DEFAULTS[key]:g}."
            )
            continue
        fitted[key] = kind(max(value, low) if high is None else min(max(value, low), high))
        if fitted[key] != value:
            span = f"{low:g}–{high:g}" if high is not None else f"≥ {low:g}"
            notes.append(f"{LABELS[key]} = {value:g} is outside the control's range ({span}): using {fitted[key]:g}.")
    return fitted, notes


def render(vocab_size: int) -> Settings:
    """Draw the five sampling controls in one row and resolve them with the shared seed."""
    stored = {key: st.session_state[key] for key in DEFAULTS if key in st.session_state}
    fitted, fit_notes = fit_to_controls(stored)
    st.session_state.update(fitted)
    for column, key in zip(st.columns(5), DEFAULTS):
        label, help_text = WIDGETS[key]
        with column:
            if key == TOP_K:  # a whole number with no upper end: typed, not slid
                st.number_input(
                    label, min_value=RANGES[TOP_K][0], step=1, help=help_text, **state.bind(TOP_K, DEFAULTS[TOP_K])
                )
            else:
                st.slider(label, *RANGES[key], step=STEPS[key], help=help_text, **state.bind_slider(key, DEFAULTS[key]))
    raw = {key: st.session_state.get(key, default) for key, default in DEFAULTS.items()}
    settings = resolve(raw, state.get(state.SEED), vocab_size)
    settings.notes[:0] = fit_notes
    return settings


def stored_settings(vocab_size: int) -> Settings:
    """The settings the controls hold, resolved without drawing them (presenter mode on the Generation page)."""
    stored = {key: st.session_state.get(key, default) for key, default in DEFAULTS.items()}
    fitted, fit_notes = fit_to_controls(stored)
    settings = resolve(fitted, state.get(state.SEED), vocab_size)
    settings.notes[:0] = fit_notes
    return settings


def summary(params: SamplingParams) -> str:
    """The sampling settings in one line, as the controls name them."""
    if params.greedy:
        return "T = 0 (greedy)"
    parts = [f"T = {params.temperature:g}"]
    parts += [f"top-k {params.top_k}"] if params.top_k else []
    parts += [f"top-p {params.top_p:g}"] if params.top_p < 1 else []
    parts += [f"min-p {params.min_p:g}"] if params.min_p > 0 else []
    parts += [f"repetition penalty {params.repetition_penalty:g}"] if params.repetition_penalty != 1 else []
    return ", ".join(parts) + f", seed {params.seed}"


def show_notes(settings: Settings) -> None:
    """Each note as an info box; the error (if any) as an error box."""
    for note in settings.notes:
        st.info(note, icon=":material/info:")
    if settings.error:
        st.error(settings.error, icon=":material/block:")


def settings_or_stop(vocab_size: int, draw: bool = True) -> Settings:
    """Draw the controls (``draw``: else only read them) and their notes; stop the page run (after showing why)
    when they are invalid."""
    settings = render(vocab_size) if draw else stored_settings(vocab_size)
    show_notes(settings)
    if settings.params is None:
        st.stop()
    return settings


def step_draw(delta: int | None) -> None:
    """The Sampling page's draw buttons: the draw shown moves on by ``delta``, or back to the first (None)."""
    st.session_state[state.DRAW_INDEX] = 0 if delta is None else st.session_state.get(state.DRAW_INDEX, 0) + delta
