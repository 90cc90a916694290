"""Every right answer of a lesson, computed from the model for the step's prompt and settings, and the grading.

Owns the truth of each question kind (``next_token`` for pick and type, ``number`` for an estimate, ``direction``),
the numbers its reveal chart draws, and ``grade``. The model is reached only through the chapters' own cached helpers
(``ui.compute``: one forward per prompt, shared with the chapter pages), which reach the engine through
``inference.api``. A question that cannot be answered on this model (a word that is not one of its prompt's tokens)
raises ``LessonError`` with the step's place, like a malformed file.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

import numpy as np

from inference.api import PromptError, SamplingParams, TokenizerError
from ui.attention.compute import attention_maps, find_token
from ui.common.resources import client_for
from ui.common.token_text import visible as visible_token
from ui.lesson.format import Lesson, LessonError, Step
from ui.logits.compute import entropy_bits, kept_by, prompt_logits, softmax_at, token_texts, top_indices
from ui.sampling import controls as sampling_controls
from ui.tokenization.compute import tokenize

TOP_SHOWN = 10  # tokens on a next-token reveal chart
TEMPERATURE_CURVE = tuple(round(0.05 * i, 2) for i in range(2, 41))  # T = 0.1 … 2.0
TOP_P_CURVE = tuple(round(0.1 * i, 1) for i in range(1, 11))  # p = 0.1 … 1.0 (each point is one pass of the sampler)
MAX_RANKS = 200  # points of a cumulative-probability curve


@dataclass(frozen=True)
class NextToken:
    """The next token after the step's prompt (pick and type)."""

    token_ids: list[int]  # the top TOP_SHOWN by probability (the options of a pick are added when not among them)
    texts: list[str]
    probs: list[float]  # at the step's temperature (T = 1 when the step's is 0: greedy has no distribution)
    right_id: int  # the most probable: what the model picks greedily
    options: list[int]  # a pick's offered tokens, shuffled; empty for a typed guess
    temperature: float
    vocab_size: int


@dataclass(frozen=True)
class Number:
    """The true value of an estimate, what it measures in words, and the chart around it."""

    quantity: str
    value: float
    unit: str
    tolerance: float  # absolute, in the unit (a relative one already applied to the value)
    about: str  # "the probability of ' on'"
    chart: str  # "bars", "curve" or "line"
    xs: list  # bar labels or curve x values
    ys: list[float]
    marked: int | None  # the bar (or curve point) the number is
    x_title: str = ""
    y_title: str = ""
    high: float | None = None  # the largest value an estimate can take
    point: tuple[float, float] | None = None  # a curve's true point (x, y): where the answer is on it
    guide: tuple[float, str] | None = None  # a horizontal line that explains the answer (top-p's p) and its label


@dataclass(frozen=True)
class Direction:
    quantity: str
    setting: str
    start: float
    to: float
    before: float
    after: float
    answer: str  # one of format.DIRECTION_WORDS
    xs: list[float]  # the setting over its range ...
    ys: list[float]  # ... and the quantity at each


Truth = NextToken | Number | Direction


@dataclass(frozen=True)
class Graded:
    answer: str  # what the learner answered, as shown back
    right: bool
    value: float | None = None  # an estimate's number, for the chart's line
    token_id: int | None = None  # a pick's or a typed word's token, for the chart's bar


def _fail(step: Step, key: str, message: str) -> LessonError:
    return LessonError([f"step {step.number}, {key}: {message}"])


def _prompt(step: Step) -> tuple[str, bool]:
    return step.state["prompt"], bool(step.state.get("chat", False))


def _temperature(step: Step) -> float:
    return float(step.setting(sampling_controls.TEMPERATURE))


# -- the truth of each kind ---------------------------------------------------------------------------
def truth(model: str, lesson: Lesson, step: Step) -> Truth:
    """The right answer of ``step``'s question on ``model`` (``LessonError`` when this model cannot answer it)."""
    question = step.question
    assert question is not None
    try:
        if question.kind in ("pick", "type"):
            return next_token(model, lesson, step)
        if question.kind == "estimate":
            return number(model, step)
        return direction(model, step)
    except (PromptError, TokenizerError) as error:
        raise _fail(step, "state.prompt", str(error)) from None


def next_token(model: str, lesson: Lesson, step: Step) -> NextToken:
    prompt, chat = _prompt(step)
    logits = prompt_logits(model, prompt, chat).logits
    temperature = _temperature(step) or 1.0
    probs = softmax_at(logits, temperature)
    ids = [int(i) for i in top_indices(logits, TOP_SHOWN)]
    options: list[int] = []
    question = step.question
    if question is not None and question.kind == "pick":
        options = ids[: question.candidates]
        tokenizer = client_for(model).tokenizer
        for word in question.distractors:
            first = tokenizer.encode(word, special_tokens=False)[:1]
            if first and first[0] not in options:
                options.append(first[0])
        # shuffled the same way on every run (and for every learner) of this lesson, step and model
        seed = hashlib.sha256(f"{lesson.name}:{step.number}:{model}".encode()).digest()
        random.Random(seed).shuffle(options)
        ids += [i for i in options if i not in ids]
    return NextToken(
        ids,
        token_texts(model, ids),
        [float(probs[i]) for i in ids],
        ids[0],
        options,
        temperature,
        int(logits.size),
    )


def rank_of(model: str, step: Step, token_id: int) -> tuple[int, float]:
    """(rank from 1, probability at the step's temperature) of one token after the step's prompt."""
    prompt, chat = _prompt(step)
    probs = softmax_at(prompt_logits(model, prompt, chat).logits, _temperature(step) or 1.0)
    return int((probs > probs[token_id]).sum()) + 1, float(probs[token_id])


def number(model: str, step: Step) -> Number:
    question = step.question
    assert question is not None
    quantity = question.quantity
    return {
        "probability": _probability,
        "entropy": _entropy,
        "top_p_kept": _top_p_kept,
        "attention": _attention,
        "kv_bytes": _kv_bytes,
        "tokens": _tokens,
    }[quantity](model, step)


def _tolerance(step: Step, value: float) -> float:
    question = step.question
    assert question is not None
    return question.tolerance * abs(value) if question.relative else question.tolerance


def _probability(model: str, step: Step) -> Number:
    question = step.question
    assert question is not None
    prompt, chat = _prompt(step)
    logits = prompt_logits(model, prompt, chat).logits
    temperature = _temperature(step) or 1.0
    probs = softmax_at(logits, temperature)
    ids = [int(i) for i in top_indices(logits, TOP_SHOWN)]
    asked = ids[0]
    if question.token:
        encoded = client_for(model).tokenizer.encode(question.token, special_tokens=False)
        if len(encoded) != 1:
            raise _fail(step, "question.token", f"{question.token!r} is {len(encoded)} tokens on {model}, not one")
        asked = encoded[0]
        if asked not in ids:
            ids.append(asked)
    text = token_texts(model, [asked])[0]
    value = float(probs[asked])
    return Number(
        "probability",
        value,
        "",
        _tolerance(step, value),
        f"the probability of {visible_token(text)} at T = {temperature:g}",
        "bars",
        token_texts(model, ids),
        [float(probs[i]) for i in ids],
        ids.index(asked),
        y_title=f"probability at T = {temperature:g}",
        high=1.0,
    )


def _entropy(model: str, step: Step) -> Number:
    prompt, chat = _prompt(step)
    logits = prompt_logits(model, prompt, chat).logits
    temperature = _temperature(step)
    curve = [entropy_bits(softmax_at(logits, t)) for t in TEMPERATURE_CURVE]
    value = entropy_bits(softmax_at(logits, temperature))
    return Number(
        "entropy",
        value,
        "bits",
        _tolerance(step, value),
        f"the entropy of the next-token distribution at T = {temperature:g}",
        "curve",
        [*TEMPERATURE_CURVE],
        curve,
        None,
        "temperature T",
        "entropy (bits)",
        point=(temperature, value),
    )


def _top_p_kept(model: str, step: Step) -> Number:
    prompt, chat = _prompt(step)
    params = sampling_controls_params(step)
    top_p = float(step.setting(sampling_controls.TOP_P))
    kept, _ = kept_by(model, prompt, chat, params.canonical(), top_p, 0.0)
    probs = softmax_at(prompt_logits(model, prompt, chat).logits, _temperature(step) or 1.0)
    shown = min(max(2 * kept, 20), MAX_RANKS, probs.size)
    cumulative = np.cumsum(np.sort(probs)[::-1][:shown])  # (shown,)
    return Number(
        "top_p_kept",
        float(kept),
        "tokens",
        _tolerance(step, kept),
        f"the tokens top-p = {top_p:g} keeps at T = {_temperature(step):g}",
        "curve",
        list(range(1, shown + 1)),
        cumulative.tolist(),
        kept - 1 if kept <= shown else None,
        "the most probable tokens, counted",
        "their probability together",
        point=(float(kept), float(cumulative[kept - 1])) if kept <= shown else None,
        guide=(top_p, f"top-p = {top_p:g}"),
    )


def sampling_controls_params(step: Step) -> SamplingParams:
    """The step's sampling settings as the engine's ``SamplingParams`` (controls' defaults where the step has none)."""
    return SamplingParams(**{name: step.setting(name) for name in sampling_controls.DEFAULTS})


def _attention(model: str, step: Step) -> Number:
    question = step.question
    assert question is not None
    prompt, chat = _prompt(step)
    view = tokenize(model, prompt, chat)
    query, key = find_token(view.pieces, question.query.strip().lower()), None
    if query is None:
        raise _fail(step, "question.query", f"{question.query!r} is not one of the prompt's tokens on {model}")
    key = find_token(view.pieces[:query], question.key.strip().lower())
    if key is None:
        raise _fail(step, "question.key", f"{question.key!r} is not a token of the prompt before {question.query!r}")
    maps = attention_maps(model, view.ids)
    if "layer" in step.state or "head" in step.state:
        layer, head = int(step.setting("layer")), int(step.setting("head"))
        which = f"layer {layer}, head {head}"
    else:  # the head that sends the query most to the key: a lesson stays true on any model's head numbering
        layer, head = (int(i) for i in np.unravel_index(maps.probs[:, :, query, key].argmax(), maps.probs.shape[:2]))
        which = f"the head that attends most to it (layer {layer}, head {head})"
    row = maps.probs[layer, head, query, : query + 1]  # (query + 1,) the query's attention over the keys it sees
    value = float(row[key])
    labels = view.pieces[: query + 1]
    return Number(
        "attention",
        value,
        "",
        _tolerance(step, value),
        f"the share of {visible_token(view.pieces[query])}'s attention on {visible_token(view.pieces[key])} in {which}",
        "bars",
        labels,
        row.astype(float).tolist(),
        key,
        y_title=f"attention from {visible_token(view.pieces[query])}",
        high=1.0,
    )


def _kv_bytes(model: str, step: Step) -> Number:
    question = step.question
    assert question is not None
    info = client_for(model).info
    config, length = info.config, question.length
    lengths = np.linspace(0, 2 * length, 21).astype(int).tolist()
    value = float(config.kv_cache_bytes(length, info.dtype_bytes))
    return Number(
        "kv_bytes",
        value,
        "bytes",
        _tolerance(step, value),
        (
            f"the KV cache of {length:,} tokens: 2 × {config.n_layers} layers × {config.n_kv_heads} KV heads × "
            f"{config.head_dim} dims × {info.dtype_bytes} bytes ({info.dtype}) × {length:,}"
        ),
        "curve",
        lengths,
        [float(config.kv_cache_bytes(n, info.dtype_bytes)) for n in lengths],
        lengths.index(length),
        "tokens in the cache",
        "KV cache (bytes)",
        point=(float(length), value),
    )


def _tokens(model: str, step: Step) -> Number:
    prompt, chat = _prompt(step)
    view = tokenize(model, prompt, chat)
    value = float(len(view.ids))
    return Number(
        "tokens",
        value,
        "tokens",
        _tolerance(step, value),
        f"the tokens {model} reads ({' | '.join(visible_token(p) for p in view.pieces[:24])})",
        "line",
        [],
        [],
        None,
    )


def direction(model: str, step: Step) -> Direction:
    question = step.question
    assert question is not None
    prompt, chat = _prompt(step)
    start, to = float(step.setting(question.setting)), question.to
    if question.setting == sampling_controls.TEMPERATURE:
        logits = prompt_logits(model, prompt, chat).logits

        def measure(t: float) -> float:
            probs = softmax_at(logits, t)
            return entropy_bits(probs) if question.quantity == "entropy" else float(probs.max())

        xs = list(TEMPERATURE_CURVE)
    else:
        params = sampling_controls_params(step).canonical()

        def measure(p: float) -> float:
            return float(kept_by(model, prompt, chat, params, p, 0.0)[0])

        xs = list(TOP_P_CURVE)
    before, after = measure(start), measure(to)
    scale = max(abs(before), abs(after), 1e-12)
    change = "stays the same" if abs(after - before) <= 1e-9 * scale else ("rises" if after > before else "falls")
    return Direction(
        question.quantity, question.setting, start, to, before, after, change, xs, [measure(x) for x in xs]
    )


# -- grading ------------------------------------------------------------------------------------------
def grade(model: str, step: Step, found: Truth, answer: object) -> Graded:
    """Whether ``answer`` (a token id, a typed word, a number or a direction word) is right."""
    if isinstance(found, NextToken):
        if isinstance(answer, int):
            shown = visible_token(token_texts(model, [answer])[0])  # '·on': a leading space seen, and bold in Markdown
            return Graded(shown, answer == found.right_id, token_id=answer)
        typed = str(answer)
        right_text = found.texts[0].strip().casefold()
        first = typed_token(model, step, typed)
        right = typed.strip().casefold() == right_text or first == found.right_id
        return Graded(typed.strip(), right, token_id=first)
    if isinstance(found, Number):
        value = float(answer)  # type: ignore[arg-type]
        shown = f"{value / 2**20:g} MiB" if found.unit == "bytes" else f"{value:g}"  # as the learner typed it
        return Graded(shown, abs(value - found.value) <= found.tolerance + 1e-9, value=value)
    return Graded(str(answer), answer == found.answer)


def typed_token(model: str, step: Step, typed: str) -> int | None:
    """The first token of a typed word as it would follow the prompt (a space before it unless the prompt ends
    with one), or None for nothing typed."""
    word = typed.strip()
    if not word:
        return None
    prompt, _ = _prompt(step)
    text = word if prompt.endswith((" ", "\n")) else " " + word
    ids = client_for(model).tokenizer.encode(text, special_tokens=False)
    return ids[0] if ids else None


def check_answers(model: str, lesson: Lesson) -> list[str]:
    """Every question's answer computed on ``model``: the problems found, one line each (none: the lesson plays)."""
    problems = []
    for step in lesson.questions:
        try:
            truth(model, lesson, step)
        except LessonError as error:
            problems += [f"{lesson.name}.toml: {line} (on {model})" for line in error.lines]
    return problems
