"""Shareable links: the session's state written to the URL, and a URL read back into a new session.

Owns the list of what a link carries (``PARAMS``: prompt, chat, seed, model, sampling
settings, attention layer/head/query, logit-lens block, the Generation walk, presenter
mode, the experiment: heads, edges and MLPs changed, the target token, the patching
prompts and which sweeps ran, the Paged KV cache page's scenario, block size and step; the
page is the URL path), how each value is checked,
and the two directions:

- ``restore()`` runs once per browser session, before anything is drawn: every query
  parameter is parsed against its allowlist or range. Unknown names, unparsable values
  and values over ``MAX_VALUE_CHARS`` are ignored; numbers out of range are clamped;
  a model must be one of ``ui.common.models.allowlist()`` (a name, never a path). Each such
  decision becomes a plain-text note for the page to show.
- ``publish()`` runs after every page run (and fragment run): the URL's query string is
  replaced by the current state, leaving out values at their defaults.

Values never reach HTML: notes show them ``repr``-quoted inside code spans.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import streamlit as st

from inference.api import PromptError, TokenizerError, number_text
from ui.attention.compute import default_query
from ui.common import models, state
from ui.common.resources import client_for
from ui.experiments import settings as exp
from ui.generation import compute as generation
from ui.generation import walk
from ui.paged_kv import compute as paged
from ui.sampling import controls as sampling_controls
from ui.tokenization.compute import tokenize

MAX_VALUE_CHARS = 64  # any value but the prompt; longer ones are ignored
MAX_PROMPT_CHARS = 4000  # a longer prompt in a link is cut (the sidebar accepts more, typed)
MAX_NOTES = 8
_TRUE, _FALSE = {"1", "true", "on", "yes"}, {"0", "false", "off", "no", ""}


class _Ignored(ValueError):
    """A value that cannot be used at all (the message says why)."""


@dataclass(frozen=True)
class Limits:
    """Ranges that depend on the model and prompt, computed once per restore."""

    n_layers: int
    n_heads: int
    vocab_size: int
    n_tokens: int  # of the (restored) prompt, at least 1


Bound = float | Callable[[Limits], float]


@dataclass(frozen=True)
class Param:
    name: str  # in the URL
    key: str  # in the session
    kind: str  # "int", "float", "bool", "text", "model", "choice", "token", "heads", "edges" or "layers"
    default: Any = None  # left out of the URL at this value (None: always written when set)
    low: Bound | None = None
    high: Bound | None = None
    step: float | None = None  # floats are snapped to the widget's step
    options: tuple[str, ...] = ()  # "choice": the allowed values


def _sampling(name: str, kind: str = "float", high: Bound | None = None) -> Param:
    """A sampling setting, with the range and step of its control (``high`` where the control has no upper end)."""
    low, control_high = sampling_controls.RANGES[name]
    return Param(
        name,
        name,
        kind,
        sampling_controls.DEFAULTS[name],
        low,
        control_high if control_high is not None else high,
        sampling_controls.STEPS.get(name),
    )


# In restore order: model, prompt and chat first, since the other ranges depend on them.
PARAMS: list[Param] = [
    Param("model", models.MODEL, "model"),
    Param("prompt", state.PROMPT, "text", state.DEFAULT_PROMPT),
    Param("chat", state.CHAT, "bool", False),
    Param("seed", state.SEED, "int", 0, 0, 2**31 - 1),
    _sampling(sampling_controls.TEMPERATURE),
    _sampling(sampling_controls.TOP_K, "int", high=lambda lim: lim.vocab_size),
    _sampling(sampling_controls.TOP_P),
    _sampling(sampling_controls.MIN_P),
    _sampling(sampling_controls.REPETITION_PENALTY),
    Param("layer", state.ATT_LAYER, "int", 0, 0, lambda lim: lim.n_layers - 1),
    Param("head", state.ATT_HEAD, "int", 0, 0, lambda lim: lim.n_heads - 1),
    Param("query", state.ATT_QUERY, "int", None, 0, lambda lim: lim.n_tokens - 1),  # default: the page's, per prompt
    Param("block", state.BLOCK_LAYER, "int", 0, 0, lambda lim: lim.n_layers - 1),
    Param("step", state.GEN_REPLAY_STEPS, "int", 0, 0, generation.MAX_STEPS),
    Param("present", state.PRESENTER, "bool", False),
    # the experiment (pages/experiments.py; "off" is also the Attention page's switched-off heads)
    Param("off", exp.HEADS, "heads", ()),
    Param("head_mode", exp.HEAD_MODE, "choice", "zero", options=tuple(exp.HEAD_MODES)),
    Param("head_scale", exp.HEAD_FACTOR, "float", 0.0, *exp.FACTOR_RANGE, exp.FACTOR_STEP),
    Param("cut", exp.EDGES, "edges", ()),
    Param("mlp_off", exp.MLPS, "layers", ()),
    Param("mlp_scale", exp.MLP_FACTOR, "float", 0.0, *exp.FACTOR_RANGE, exp.FACTOR_STEP),
    Param("target", exp.TARGET, "token", ""),
    Param("clean", exp.CLEAN, "text", exp.DEFAULT_CLEAN),
    Param("corrupt", exp.CORRUPT, "text", exp.DEFAULT_CORRUPT),
    Param("sweep", exp.SWEEP, "bool", False),
    Param("patching", exp.PATCHING, "bool", False),
    # the Paged KV cache page (the step's upper end is clamped again to the replay's length there)
    Param("scenario", state.PAGED_SCENARIO, "choice", paged.DEFAULT_SCENARIO, options=tuple(paged.SCENARIOS)),
    Param("block_size", state.PAGED_BLOCK_SIZE, "int", paged.DEFAULT_BLOCK_SIZE, *paged.BLOCK_SIZE_RANGE),
    Param("paged_step", state.PAGED_STEP, "int", 0, 0, paged.MAX_STEPS),
    # the Lesson page (pages/lesson.py): the lesson's name (short text the page checks) and its step, 0 its first page
    Param("lesson", state.LESSON, "token", ""),
    Param("at", state.LESSON_AT, "int", 0, 0, state.MAX_STEPS + 1),
]
BY_NAME = {param.name: param for param in PARAMS}
FORCED = "forced"  # the Generation walk's forced tokens, "step:id" pairs (read with ``step``)
# In the URL but not part of the view: the teacher-only link's key (``ui.class_page.broadcast`` reads and removes it).
NOT_STATE = frozenset({"teacher"})


def _quote(value: str, limit: int = 40) -> str:
    """A value for a note: repr-quoted, shortened, inside a code span (no markdown, no HTML)."""
    text = repr(value if len(value) <= limit else value[:limit] + "…")
    return "`" + text.replace("`", "'") + "`"


def _bound(bound: Bound | None, limits: Limits) -> float | None:
    return bound(limits) if callable(bound) else bound


def parse(param: Param, raw: str, limits: Limits) -> tuple[Any, str | None]:
    """The session value for ``raw`` and an optional note; ``_Ignored`` when it cannot be used."""
    if param.kind == "text":
        if len(raw) > MAX_PROMPT_CHARS:
            return raw[:MAX_PROMPT_CHARS], (
                f"`{param.name}` in the link had {len(raw):,} characters: kept the first {MAX_PROMPT_CHARS:,}."
            )
        return raw, None
    if param.kind in ("heads", "edges", "layers"):
        return _parse_list(param, raw, limits)
    if len(raw) > MAX_VALUE_CHARS:
        raise _Ignored(f"`{param.name}` ignored: {len(raw):,} characters is not a setting.")
    if param.kind == "token":
        return raw, None  # one token's text; the page checks that it is one token of the model
    value = raw.strip()
    if param.kind == "choice":
        if value not in param.options:
            raise _Ignored(f"`{param.name}` ignored: {_quote(value)} is not one of {', '.join(param.options)}.")
        return value, None
    if param.kind == "model":
        offered = models.allowlist()
        if value in models.missing():
            raise _Ignored(
                f"`model` ignored: {_quote(value)} is not installed on this server; {models.missing()[value]}."
            )
        if value not in offered:
            raise _Ignored(
                f"`model` ignored: {_quote(value)} is not one of the models this server offers ({', '.join(offered)})."
            )
        return value, None
    if param.kind == "bool":
        if value.lower() not in _TRUE | _FALSE:
            raise _Ignored(f"`{param.name}` ignored: {_quote(value)} is not on/off (use 1 or 0).")
        return value.lower() in _TRUE, None
    try:
        number = number_text.real(value)
    except number_text.NumberError as error:
        kind = "a finite number" if error.not_finite else "a number"
        raise _Ignored(f"`{param.name}` ignored: {_quote(value)} is not {kind}.") from None
    if param.kind == "int" and number != int(number):
        raise _Ignored(f"`{param.name}` ignored: {_quote(value)} is not a whole number.")
    low, high = _bound(param.low, limits), _bound(param.high, limits)
    clamped = min(max(number, low), high)
    if param.step:
        clamped = round(round(clamped / param.step) * param.step, 6)
    result = int(clamped) if param.kind == "int" else float(clamped)
    note = None
    if number < low or number > high:
        note = (
            f"`{param.name}` = {_quote(value)} is outside {_number(low)}…{_number(high)}: clamped to {_number(result)}."
        )
    return result, note


def _parse_list(param: Param, raw: str, limits: Limits) -> tuple[tuple, str | None]:
    """A comma-separated list of heads, edges or layers; items that do not fit the model or prompt are left out."""
    if len(raw) > exp.MAX_LIST_CHARS:
        raise _Ignored(f"`{param.name}` ignored: {len(raw):,} characters is not a list of settings.")
    if param.kind == "heads":
        kept, bad = exp.parse_heads(raw, limits.n_layers, limits.n_heads)
        rule = f"layer.head with layers 0…{limits.n_layers - 1} and heads 0…{limits.n_heads - 1}"
    elif param.kind == "edges":
        kept, bad = exp.parse_edges(raw, limits.n_tokens)
        rule = f"query-key with key < query < {limits.n_tokens} (the prompt's tokens)"
    else:
        kept, bad = exp.parse_layers(raw, limits.n_layers)
        rule = f"layers 0…{limits.n_layers - 1}"
    note = None
    if bad:
        shown = ", ".join(_quote(item, 12) for item in bad[:4]) + (" …" if len(bad) > 4 else "")
        note = f"`{param.name}`: left out {shown}, not {rule}."
    return kept, note


def _number(value: float) -> str:
    """A bound as people write it: whole numbers with thousands separators (2,147,483,647, not 2.14748e+09)."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def _limits() -> Limits:
    model = models.current()
    config = client_for(model).info.config
    try:
        n_tokens = len(tokenize(model, state.get(state.PROMPT), state.get(state.CHAT)).ids)
    except (PromptError, TokenizerError):
        n_tokens = 1  # the pages explain the prompt's problem themselves
    return Limits(config.n_layers, config.n_heads, config.vocab_size, max(1, n_tokens))


def restore() -> None:
    """Once per session: apply the URL's query parameters to the session state, noting every decision."""
    if st.session_state.get(state.LINK_RESTORED):
        return
    st.session_state[state.LINK_RESTORED] = True
    query = {name: st.query_params[name] for name in st.query_params if name not in NOT_STATE}
    notes = apply_query(query)
    st.session_state[state.LINK_NOTES] = notes[:MAX_NOTES] + (
        [f"…and {len(notes) - MAX_NOTES} more."] if len(notes) > MAX_NOTES else []
    )


def apply_query(query: dict[str, str], reset_missing: bool = False, skip: frozenset[str] = frozenset()) -> list[str]:
    """Set the session state from link parameters, each parsed by its ``Param``; the notes on what was not used.

    ``reset_missing`` also puts every parameter the query leaves out back to its default (a link leaves
    defaults out): used by a student following the teacher, whose state must become the teacher's, not a
    mix. ``skip`` names parameters to leave alone (the follower's own presenter mode).
    """
    notes: list[str] = []
    unknown = [name for name in query if name not in BY_NAME and name != FORCED]
    if unknown:
        shown = ", ".join(_quote(name, 20) for name in unknown[:5])
        notes.append(f"Ignored {len(unknown)} unknown link parameter{'s' * (len(unknown) > 1)}: {shown}.")
    limits = None
    for param in PARAMS:  # in order: the model, prompt and chat are set before any range is computed
        if param.name in skip:
            continue
        if param.name not in query:
            if reset_missing:
                _reset(param)
            continue
        if limits is None and param.kind in ("int", "float", "heads", "edges", "layers"):
            limits = _limits()
        try:
            value, note = parse(param, query[param.name], limits)
        except _Ignored as ignored:
            notes.append(str(ignored))
            continue
        st.session_state[param.key] = value
        if note:
            notes.append(note)
    if st.session_state.get(state.GEN_REPLAY_STEPS):
        forced, note = generation.parse_forced(query.get(FORCED, ""), st.session_state[state.GEN_REPLAY_STEPS])
        st.session_state[state.GEN_REPLAY_FORCED] = forced
        st.session_state[state.GEN_REPLAY_PROMPT] = (state.get(state.PROMPT), state.get(state.CHAT))
        if note:
            notes.append(note)
    return notes


def _reset(param: Param) -> None:
    """Put one setting back to its default (the walk's length is the follower's stepper's, see ``ui.class_page.broadcast``)."""
    if param.key == state.GEN_REPLAY_STEPS:
        return
    if param.kind == "model":
        st.session_state[param.key] = models.default_name()
    elif param.default is None:
        st.session_state.pop(param.key, None)  # e.g. the attention query: the page picks its own per prompt
    else:
        st.session_state[param.key] = param.default


def current_query() -> dict[str, str]:
    """The query parameters for the current state (defaults left out)."""
    query: dict[str, str] = {}
    for param in PARAMS:
        if param.key == state.GEN_REPLAY_STEPS:
            query.update(walk.walk_query())
            continue
        value = st.session_state.get(param.key)
        if (
            value is None
            or value == param.default
            or (param.key == state.ATT_QUERY and value == _prompt_default_query())
        ):
            continue
        if param.kind == "bool":
            query[param.name] = "1" if value else "0"
        elif param.kind in ("heads", "edges", "layers"):
            value = tuple(value)
            if value == param.default:
                continue
            fmt = {"heads": exp.format_heads, "edges": exp.format_edges, "layers": exp.format_layers}[param.kind]
            query[param.name] = fmt(value)
        elif param.kind == "float":
            query[param.name] = f"{value:g}"
        else:
            query[param.name] = str(value)
    if query.get("model") == models.default_name():
        del query["model"]
    return query


def _prompt_default_query() -> int | None:
    """The Attention page's own starting query for the current prompt (left out of the URL like any default)."""
    try:
        return default_query(tokenize(models.current(), state.get(state.PROMPT), state.get(state.CHAT)).pieces)
    except (PromptError, TokenizerError):
        return None


def publish() -> None:
    """Make the URL's query string match the current state (no write when it already does)."""
    query = current_query()
    if {name: st.query_params[name] for name in st.query_params} != query:
        st.query_params.from_dict(query)


def show_notes() -> None:
    """The notes from restoring this session's link, if any, with a button to dismiss them."""
    notes = st.session_state.get(state.LINK_NOTES)
    if not notes:
        return
    st.warning(
        "**Some of this link's settings were not used as given:**\n\n" + "\n".join(f"- {note}" for note in notes),
        icon=":material/link:",
    )
    st.button("Dismiss", key=state.LINK_NOTES_DISMISS, on_click=st.session_state.pop, args=(state.LINK_NOTES, None))
