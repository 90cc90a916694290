"""The lesson file: its format, read from TOML into plain dataclasses, and every check that needs no model.

Owns what a teacher may write (``TOP_KEYS``, ``STEP_KEYS``, the question kinds and what each asks), the rules a file
must keep (a known chapter; a state of link parameters, each in its control's range and on its step; a question that
fits its chapter) and the one error, ``LessonError``: one line per problem, naming the file and the place in it
(``step 3, question.tolerance``). Numbers go through ``inference.api.number_text``, the project's one parser of
numbers from outside. There is no key for an answer: the right answer is computed from the model
(``ui.lesson.answers``), so a lesson stays true on any model and after any edit of its prompt. Ranges that depend on
a model (its layers, heads, vocabulary) are checked by ``check_on_model`` against that model's ``Limits``.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from typing import Any

from inference.api import number_text
from ui.common.navigation import PAGES
from ui.common.state import MAX_STEPS
from ui.sampling import controls as sampling_controls
from ui.session import links

MAX_FILE_BYTES = 100_000
MAX_TEXT_CHARS = 2_000
MAX_TITLE_CHARS = 120
MAX_DISTRACTORS = 6
CANDIDATES_RANGE = (2, 8)  # the model's top candidates a pick question shows
MAX_KV_LENGTH = 1_000_000

TOP_KEYS = {"title", "level", "about", "steps"}
STEP_KEYS = {"chapter", "text", "state", "question"}
LEVELS = ("beginner", "intermediate", "advanced")
# Chapters a step can open: every story page (not the overview, the class, nor this page itself).
CHAPTERS = {spec.url_path: spec.title for spec in PAGES if spec.url_path not in ("overview", "class", "lesson")}
# Link parameters a lesson sets: the prompt and the settings. Not the model (a lesson plays on the learner's),
# nor what names a position of one model's tokens (``query``: questions name words instead).
STATE_PARAMS = ("prompt", "chat", "seed", *sampling_controls.DEFAULTS, "layer", "head", "block", "step")

NEXT_TOKEN_CHAPTERS = frozenset({"logits", "sampling", "generation"})
DISTRIBUTION_CHAPTERS = frozenset({"logits", "sampling"})


@dataclass(frozen=True)
class Quantity:
    """A number a question can ask about: where it fits, what else it needs, and its unit."""

    chapters: frozenset[str]
    needs: tuple[str, ...] = ()  # question keys it requires
    allows: tuple[str, ...] = ()  # question keys it may have
    unit: str = ""
    high: float | None = None  # the largest possible value (a probability: 1)


ESTIMATES: dict[str, Quantity] = {
    "probability": Quantity(DISTRIBUTION_CHAPTERS, allows=("token",), high=1.0),  # default token: the most probable
    "entropy": Quantity(frozenset({"logits"}), unit="bits"),
    "top_p_kept": Quantity(DISTRIBUTION_CHAPTERS, unit="tokens"),
    "attention": Quantity(frozenset({"attention"}), needs=("query", "key"), high=1.0),
    "kv_bytes": Quantity(frozenset({"generation"}), needs=("length",), unit="bytes"),
    "tokens": Quantity(frozenset({"tokenization"}), unit="tokens"),
}
# A direction question: the setting that changes, and the quantities it can ask about.
DIRECTIONS: dict[str, tuple[str, ...]] = {
    sampling_controls.TEMPERATURE: ("entropy", "top_probability"),
    sampling_controls.TOP_P: ("top_p_kept",),
}
DIRECTION_WORDS = ("rises", "falls", "stays the same")
KINDS: dict[str, tuple[frozenset[str], set[str]]] = {  # kind: (chapters it fits, its keys besides kind and ask)
    "pick": (NEXT_TOKEN_CHAPTERS, {"candidates", "distractors"}),
    "type": (NEXT_TOKEN_CHAPTERS, set()),
    "estimate": (frozenset(), {"quantity", "tolerance", "token", "query", "key", "length"}),  # chapters: per quantity
    "direction": (DISTRIBUTION_CHAPTERS, {"setting", "to", "quantity"}),
}
PLAIN_KEY = re.compile(r"[A-Za-z0-9_.-]{1,60}")  # keys and dotted paths shown as they are; others quoted
ANSWER_KEYS = {"answer", "correct", "right", "solution", "value", "truth"}


class LessonError(ValueError):
    """A lesson file that cannot be used: ``lines`` has one line per problem, each naming the file and the place
    (raised as ``LessonError(lines)``)."""

    @property
    def lines(self) -> list[str]:
        return list(self.args[0])

    def __str__(self) -> str:
        return "\n".join(self.lines)


@dataclass(frozen=True)
class Question:
    kind: str  # "pick", "type", "estimate" or "direction"
    ask: str = ""  # the question as the learner reads it ("" : the kind's own wording)
    candidates: int = 4  # pick: the model's top candidates shown
    distractors: tuple[str, ...] = ()  # pick: words added to them (each shown as its first token)
    quantity: str = ""  # estimate: a key of ESTIMATES; direction: one of DIRECTIONS[setting]
    tolerance: float = 0.0  # estimate: how far off still counts as right (absolute, or a share when relative)
    relative: bool = False  # estimate: the tolerance is a share of the true value ("25%")
    token: str = ""  # estimate probability: the token asked about ("": the most probable)
    query: str = ""  # estimate attention: the word that attends ...
    key: str = ""  # ... and the word it attends to
    length: int = 0  # estimate kv_bytes: the tokens in the cache
    setting: str = ""  # direction: the setting that changes ...
    to: float = 0.0  # ... from the step's value to this one


@dataclass(frozen=True)
class Step:
    number: int  # 1-based, as the file's [[steps]] come
    chapter: str
    text: str
    state: dict[str, Any] = field(default_factory=dict)  # link parameter -> value, as written
    question: Question | None = None

    def query(self) -> dict[str, str]:
        """The step's state as a link's query (the same text a chapter's own link would carry)."""
        return {name: _link_text(value) for name, value in self.state.items()}

    def setting(self, name: str) -> Any:
        """A setting of this step: its own value, else the control's default."""
        return self.state.get(name, links.BY_NAME[name].default)


@dataclass(frozen=True)
class Lesson:
    name: str  # the file's stem: the lesson's name in a link
    title: str
    level: str
    about: str
    steps: tuple[Step, ...]

    @property
    def questions(self) -> list[Step]:
        return [step for step in self.steps if step.question is not None]


@dataclass(frozen=True)
class Limits:
    """What a model allows of the model-dependent parameters (``check_on_model``)."""

    model: str
    n_layers: int
    n_heads: int
    vocab_size: int


def _link_text(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


# -- reading ------------------------------------------------------------------------------------------
def parse(text: str, name: str, source: str | None = None) -> Lesson:
    """The lesson in ``text`` (a file's contents), or ``LessonError`` with every problem found, one line each."""
    source = source or f"{name}.toml"
    problems = _Problems(source)
    if len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        problems.add("", f"the file is over {MAX_FILE_BYTES:,} bytes: a lesson is a short text")
        problems.raise_any()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        problems.add("", f"not valid TOML: {error}")
        problems.raise_any()
    lesson = _lesson(data, name, problems)
    problems.raise_any()
    return lesson


class _Problems:
    """Problems found so far, each one line: ``<source>: <place>: <what is wrong>``."""

    def __init__(self, source: str) -> None:
        self.source, self.lines = source, []

    def add(self, place: str, message: str) -> None:
        self.lines.append(f"{self.source}: {place + ': ' if place else ''}{message}")

    def raise_any(self) -> None:
        if self.lines:
            raise LessonError(self.lines)


def _unknown(table: dict, allowed: set[str], place: str, problems: _Problems) -> None:
    for key in table:
        where = _at(place, key)
        if key in ANSWER_KEYS:
            problems.add(where, "a lesson never stores an answer: the app computes it from the model")
        elif key not in allowed:
            problems.add(where, f"unknown key (use {', '.join(sorted(allowed))})")


def _text(table: dict, key: str, place: str, problems: _Problems, limit: int, required: bool = True) -> str:
    value = table.get(key)
    where = _at(place, key) if place else key
    if value is None:
        if required:
            problems.add(where, "missing")
        return ""
    if not isinstance(value, str):
        problems.add(where, f"{_shown(value)} is not text (write it in quotes)")
        return ""
    if required and not value.strip():
        problems.add(where, "is empty")
    if len(value) > limit:
        problems.add(where, f"{len(value):,} characters: at most {limit:,}")
    return value


def _at(place: str, key: str) -> str:
    """A place in the file: ``step 3, question.tolerance`` (a step's number, then the key's path in it); a key that
    is not a plain name is shown quoted (a key may be any text in TOML, a line break too)."""
    if not PLAIN_KEY.fullmatch(key):
        key = _shown(key)
    if not place:
        return key
    return f"{place}, {key}" if place.startswith("step") and "," not in place else f"{place}.{key}"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "…"


def _lesson(data: dict, name: str, problems: _Problems) -> Lesson:
    _unknown(data, TOP_KEYS, "", problems)
    title = _text(data, "title", "", problems, MAX_TITLE_CHARS)
    level = _text(data, "level", "", problems, 40)
    if level and level not in LEVELS:
        problems.add("level", f"{_shown(level)} is not one of {', '.join(LEVELS)}")
    about = _text(data, "about", "", problems, MAX_TEXT_CHARS, required=False)
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        problems.add("steps", "missing: a lesson has at least one [[steps]] table")
        return Lesson(name, title, level, about, ())
    if len(raw_steps) > MAX_STEPS:
        problems.add("steps", f"{len(raw_steps)} steps: at most {MAX_STEPS}")
    steps = []
    for number, raw in enumerate(raw_steps[:MAX_STEPS], start=1):
        if not isinstance(raw, dict):
            problems.add(f"step {number}", "is not a table (write it as [[steps]])")
            continue
        steps.append(_step(raw, number, problems))
    return Lesson(name, title, level, about, tuple(steps))


def _step(raw: dict, number: int, problems: _Problems) -> Step:
    place = f"step {number}"
    _unknown(raw, STEP_KEYS, place, problems)
    chapter = _text(raw, "chapter", place, problems, 40)
    if chapter and chapter not in CHAPTERS:
        problems.add(_at(place, "chapter"), f"unknown chapter {_shown(chapter)} (use one of {', '.join(CHAPTERS)})")
        chapter = ""
    text = _text(raw, "text", place, problems, MAX_TEXT_CHARS)
    state = _state(raw.get("state", {}), place, problems)
    question = None
    if "question" in raw:
        question = _question(raw["question"], chapter, state, place, problems)
    return Step(number, chapter, text, state, question)


# -- the state a step opens ---------------------------------------------------------------------------
def _state(raw: Any, place: str, problems: _Problems) -> dict[str, Any]:
    if not isinstance(raw, dict):
        problems.add(_at(place, "state"), 'is not a table (write state = { prompt = "..." })')
        return {}
    state: dict[str, Any] = {}
    for name, value in raw.items():
        where = _at(place, f"state.{name}")
        if name not in STATE_PARAMS:
            why = {
                "model": "a lesson plays on the learner's model: it does not choose one",
                "query": "name words in the question instead (positions differ between models)",
            }.get(name, f"not a setting a lesson can open (use {', '.join(STATE_PARAMS)})")
            problems.add(where, why)
            continue
        checked = _setting(links.BY_NAME[name], value, where, problems)
        if checked is not None:
            state[name] = checked
    return state


def _setting(param: links.Param, value: Any, where: str, problems: _Problems) -> Any:
    """The value if it fits the parameter's control (its kind, its static range, its step), else None (noted)."""
    if param.kind == "text":
        if not isinstance(value, str):
            problems.add(where, f"{_shown(value)} is not text (write it in quotes)")
            return None
        if not value.strip():
            problems.add(where, "is empty")
            return None
        if len(value) > links.MAX_PROMPT_CHARS:
            problems.add(where, f"{len(value):,} characters: at most {links.MAX_PROMPT_CHARS:,}")
            return None
        return value
    if param.kind == "bool":
        if not isinstance(value, bool):
            problems.add(where, f"{_shown(value)} is not true or false")
            return None
        return value
    low = param.low if not callable(param.low) else None
    high = param.high if not callable(param.high) else None  # a model's own bound: ``check_on_model``
    try:
        if param.kind == "int":
            number: float = number_text.whole(value, "", _whole_bound(low), _whole_bound(high))
        else:
            number = number_text.real(value, "", low, high)
    except number_text.NumberError as error:
        problems.add(where, str(error))
        return None
    if param.step and abs(number / param.step - round(number / param.step)) > 1e-6:
        problems.add(where, f"{number:g} is not on the control's steps of {param.step:g}")
        return None
    return number


def _whole_bound(bound: float | None) -> int | None:
    return None if bound is None else int(bound)


# -- the question -------------------------------------------------------------------------------------
def _question(raw: Any, chapter: str, state: dict, place: str, problems: _Problems) -> Question | None:
    place = _at(place, "question")
    if not isinstance(raw, dict):
        problems.add(place, "is not a table (write [steps.question])")
        return None
    kind = _text(raw, "kind", place, problems, 20)
    if kind not in KINDS:
        if kind:
            problems.add(_at(place, "kind"), f"unknown kind {_shown(kind)} (use {', '.join(KINDS)})")
        return None
    chapters, keys = KINDS[kind]
    _unknown(raw, keys | {"kind", "ask"}, place, problems)
    ask = _text(raw, "ask", place, problems, MAX_TEXT_CHARS, required=False)
    if "prompt" not in state:
        problems.add(place, "a question needs the step's state.prompt: its answer is computed for that text")
    read = {"pick": _pick, "type": _nothing_more, "estimate": _estimate, "direction": _direction}[kind]
    fields = read(raw, place, state, problems)
    if fields is None:
        return None
    if kind == "estimate":
        chapters = ESTIMATES[fields["quantity"]].chapters
    if chapter and chapter not in chapters:
        what = f"{kind} ({fields['quantity']})" if kind == "estimate" else kind
        problems.add(
            _at(place, "kind"),
            f"this {what} question does not fit the {chapter} chapter (it fits {', '.join(sorted(chapters))})",
        )
    return Question(kind, ask, **fields)


def _nothing_more(raw: dict, place: str, state: dict, problems: _Problems) -> dict:
    return {}


def _pick(raw: dict, place: str, state: dict, problems: _Problems) -> dict | None:
    fields: dict[str, Any] = {}
    if "candidates" in raw:
        try:
            fields["candidates"] = number_text.whole(raw["candidates"], "", *CANDIDATES_RANGE)
        except number_text.NumberError as error:
            problems.add(_at(place, "candidates"), str(error))
    distractors = raw.get("distractors", [])
    if not isinstance(distractors, list) or not all(isinstance(d, str) and d.strip() for d in distractors):
        problems.add(_at(place, "distractors"), 'is not a list of words (write distractors = [" dog", " mat"])')
    elif len(distractors) > MAX_DISTRACTORS:
        problems.add(_at(place, "distractors"), f"{len(distractors)} words: at most {MAX_DISTRACTORS}")
    elif any(len(d) > 40 for d in distractors):
        problems.add(_at(place, "distractors"), "a word over 40 characters is not a distractor")
    else:
        fields["distractors"] = tuple(distractors)
    return fields


def _choice(raw: dict, key: str, place: str, problems: _Problems, choices: dict) -> str | None:
    """``raw[key]``, the name of one of ``choices``; None (and the problem said) when it names none."""
    value = _text(raw, key, place, problems, 40)
    if value not in choices:
        if value:
            problems.add(_at(place, key), f"unknown {key} {_shown(value)} (use {', '.join(choices)})")
        return None
    return value


def _estimate(raw: dict, place: str, state: dict, problems: _Problems) -> dict | None:
    quantity = _choice(raw, "quantity", place, problems, ESTIMATES)
    if quantity is None:
        return None
    spec = ESTIMATES[quantity]
    for key in ("token", "query", "key", "length"):
        if key in raw and key not in spec.needs + spec.allows:
            problems.add(_at(place, key), f"an estimate of {quantity} has no {key}")
    for key in spec.needs:
        if key not in raw:
            problems.add(_at(place, key), f"missing: an estimate of {quantity} needs it")
    fields: dict[str, Any] = {"quantity": quantity}
    for key in ("token", "query", "key"):
        if key in raw and key in spec.needs + spec.allows:
            fields[key] = _text(raw, key, place, problems, 40)
    if "length" in raw and "length" in spec.needs:
        try:
            fields["length"] = number_text.whole(raw["length"], "", 1, MAX_KV_LENGTH)
        except number_text.NumberError as error:
            problems.add(_at(place, "length"), str(error))
    tolerance = _tolerance(raw.get("tolerance"), _at(place, "tolerance"), problems)
    if tolerance is not None:
        fields["tolerance"], fields["relative"] = tolerance
        if quantity == "top_p_kept" and state.get(sampling_controls.TOP_P, 1.0) >= 1.0:
            problems.add(_at(place, "quantity"), "top_p_kept needs the step's state.top_p below 1 (at 1 it keeps all)")
    return fields


def _tolerance(value: Any, where: str, problems: _Problems) -> tuple[float, bool] | None:
    """(tolerance, relative): a number (in the quantity's unit) or a share written "25%"."""
    if value is None:
        problems.add(where, 'missing: how far off still counts as right (a number, or a share like "20%")')
        return None
    relative = isinstance(value, str) and value.strip().endswith("%")
    text = value.strip().removesuffix("%") if relative else value
    try:
        number = number_text.real(text, "", 0.0, 1000.0 if relative else None)
    except number_text.NumberError as error:
        problems.add(where, str(error) + (" (a share: a number then %)" if relative else ' (or a share like "20%")'))
        return None
    return (number / 100 if relative else number), relative


def _direction(raw: dict, place: str, state: dict, problems: _Problems) -> dict | None:
    setting = _choice(raw, "setting", place, problems, DIRECTIONS)
    if setting is None:
        return None
    quantity = _text(raw, "quantity", place, problems, 40)
    if quantity and quantity not in DIRECTIONS[setting]:
        problems.add(
            _at(place, "quantity"),
            f"{_shown(quantity)} is not a quantity {setting} moves here (use {', '.join(DIRECTIONS[setting])})",
        )
        return None
    if "to" not in raw:
        problems.add(_at(place, "to"), f"missing: the value {setting} goes to")
        return None
    to = _setting(links.BY_NAME[setting], raw["to"], _at(place, "to"), problems)
    if to is None:
        return None
    start = state.get(setting, sampling_controls.DEFAULTS[setting])
    if abs(to - start) < 1e-9:
        problems.add(_at(place, "to"), f"{to:g} is the step's own {setting}: nothing would change")
    if setting == sampling_controls.TEMPERATURE and min(to, start) == 0:
        problems.add(_at(place, "to"), "temperature 0 is greedy (no distribution to compare): use a value above 0")
    return {"setting": setting, "to": float(to), "quantity": quantity}


# -- what depends on the model ------------------------------------------------------------------------
def check_on_model(lesson: Lesson, limits: Limits, source: str | None = None) -> list[str]:
    """The problems of ``lesson`` on one model: a layer, head or top-k past what that model has (one line each)."""
    problems = _Problems(source or f"{lesson.name}.toml")
    highs = {"layer": limits.n_layers - 1, "block": limits.n_layers - 1, "head": limits.n_heads - 1}
    highs[sampling_controls.TOP_K] = limits.vocab_size
    for step in lesson.steps:
        for name, high in highs.items():
            value = step.state.get(name)
            if value is not None and value > high:
                problems.add(f"step {step.number}, state.{name}", f"{value:g} is past {limits.model}'s {high:,}")
    return problems.lines
