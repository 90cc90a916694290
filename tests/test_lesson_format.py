"""The lesson file format (``ui.lesson.format``, ``ui.lesson.files``, ``python -m ui.lesson check``), no model needed.

Every shipped lesson parses; each kind of broken file gets its one line naming the place (step number and key);
no key can hold an answer; malformed files of any shape (hypothesis) get a ``LessonError`` of clear lines, never
another exception.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ui.lesson import files
from ui.lesson.__main__ import main
from ui.lesson.format import STATE_PARAMS, LessonError, Limits, check_on_model, parse

GOOD = """
title = "T"
level = "beginner"

[[steps]]
chapter = "logits"
text = "Read this."
state = { prompt = "The cat sat", temperature = 1.0 }

[steps.question]
kind = "estimate"
quantity = "probability"
tolerance = 0.1
"""


def _errors(text: str) -> list[str]:
    with pytest.raises(LessonError) as raised:
        parse(text, "bad")
    return raised.value.lines


def _one(text: str) -> str:
    lines = _errors(text)
    assert len(lines) == 1, lines
    return lines[0]


def test_every_shipped_lesson_parses_and_has_questions():
    assert len(files.names()) >= 2
    for name in files.names():
        lesson = files.load(name)
        assert lesson.title and lesson.steps and lesson.questions, name


def test_a_good_file_reads_into_steps():
    lesson = parse(GOOD, "good")
    (step,) = lesson.steps
    assert (step.number, step.chapter, step.state) == (1, "logits", {"prompt": "The cat sat", "temperature": 1.0})
    assert step.question.kind == "estimate" and step.question.tolerance == 0.1 and not step.question.relative
    assert step.query() == {"prompt": "The cat sat", "temperature": "1"}  # the text a chapter's link carries


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (('chapter = "logits"', 'chapter = "logitz"'), "bad.toml: step 1, chapter: unknown chapter 'logitz'"),
        (("temperature = 1.0", "temperature = 3.5"), "bad.toml: step 1, state.temperature: 3.5: use a number from 0"),
        (
            ("temperature = 1.0", "temperature = 0.73"),
            "bad.toml: step 1, state.temperature: 0.73 is not on the control",
        ),
        (("temperature = 1.0", 'temperature = "hot"'), "bad.toml: step 1, state.temperature: 'hot': use a number"),
        (("temperature = 1.0", 'model = "x"'), "bad.toml: step 1, state.model: a lesson plays on the learner's model"),
        (("temperature = 1.0", "seed = -1"), "bad.toml: step 1, state.seed: -1: use a whole number from 0"),
        (
            ('chapter = "logits"', 'chapter = "attention"'),
            "bad.toml: step 1, question.kind: this estimate (probability)",
        ),
        (("tolerance = 0.1", "tolerance = -0.1"), "bad.toml: step 1, question.tolerance: -0.1: use a number"),
        (("tolerance = 0.1", 'tolerance = "x%"'), "bad.toml: step 1, question.tolerance: 'x': use a number"),
        (("tolerance = 0.1", ""), "bad.toml: step 1, question.tolerance: missing"),
        (("tolerance = 0.1", "tolerance = 0.1\nanswer = 0.33"), "bad.toml: step 1, question.answer: a lesson never"),
        (('quantity = "probability"', 'quantity = "speed"'), "bad.toml: step 1, question.quantity: unknown quantity"),
        (('kind = "estimate"', 'kind = "essay"'), "bad.toml: step 1, question.kind: unknown kind 'essay'"),
        (('level = "beginner"', 'level = "expert"'), "bad.toml: level: 'expert' is not one of"),
        (('text = "Read this."', 'txt = "Read this."\ntext = "x"'), "bad.toml: step 1, txt: unknown key"),
        (('title = "T"', "title = 3"), "bad.toml: title: 3 is not text"),
        (
            ('state = { prompt = "The cat sat", temperature = 1.0 }', "state = { temperature = 1.0 }"),
            "needs the step's",
        ),
        (("[steps.question]", "[steps.question\n"), "bad.toml: not valid TOML: "),
    ],
)
def test_each_broken_file_gets_one_line_naming_its_place(change, expected):
    line = _one(GOOD.replace(*change))
    assert line.startswith(expected) or expected in line, line
    assert "\n" not in line


def test_a_question_that_does_not_fit_its_chapter():
    pick_on_attention = GOOD.replace('chapter = "logits"', 'chapter = "attention"').replace(
        'kind = "estimate"\nquantity = "probability"\ntolerance = 0.1', 'kind = "pick"'
    )
    assert "question.kind: this pick question does not fit the attention chapter" in _one(pick_on_attention)
    direction_same = GOOD.replace(
        'kind = "estimate"\nquantity = "probability"\ntolerance = 0.1',
        'kind = "direction"\nsetting = "temperature"\nto = 1.0\nquantity = "entropy"',
    )
    assert "question.to: 1 is the step's own temperature" in _one(direction_same)
    wrong_quantity = direction_same.replace("to = 1.0", "to = 1.5").replace('"entropy"', '"top_p_kept"')
    assert "question.quantity: 'top_p_kept' is not a quantity temperature moves" in _one(wrong_quantity)


def test_every_problem_is_listed_each_on_its_own_line():
    text = GOOD.replace('level = "beginner"', 'level = "x"').replace("temperature = 1.0", "temperature = 9")
    text += '\n[[steps]]\nchapter = "nowhere"\ntext = "x"\n'
    lines = _errors(text)
    assert [line.split(": ")[1] for line in lines] == ["level", "step 1, state.temperature", "step 2, chapter"]


def test_a_models_own_ranges_are_checked_per_model():
    lesson = parse(GOOD.replace("temperature = 1.0", "layer = 25, head = 3"), "deep")
    assert check_on_model(lesson, Limits("big", 30, 9, 49152)) == []
    assert check_on_model(lesson, Limits("small", 18, 4, 262144)) == [
        "deep.toml: step 1, state.layer: 25 is past small's 17"
    ]


def test_the_file_cannot_be_read(tmp_path):
    (tmp_path / "latin.toml").write_bytes(b'title = "caf\xe9"')
    with pytest.raises(LessonError) as raised:
        files.load("latin", tmp_path)
    assert raised.value.lines == ["latin.toml: not UTF-8 text (byte 12)"]
    with pytest.raises(LessonError) as raised:
        files.load("../etc/passwd", tmp_path)
    assert raised.value.lines[0].startswith("no lesson called '../etc/passwd'")


def test_check_command(tmp_path, capsys):
    good, bad = tmp_path / "good.toml", tmp_path / "bad.toml"
    good.write_text(GOOD)
    bad.write_text(GOOD.replace("tolerance = 0.1", "tolerance = -1"))
    assert main(["check", "--format-only", str(good)]) == 0
    assert capsys.readouterr().out == "good.toml: OK, 1 steps, 1 question\n"
    assert main(["check", "--format-only", str(good), str(bad)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[1] == 'bad.toml: step 1, question.tolerance: -1: use a number of at least 0 (or a share like "20%")'


# -- malformed files of any shape: a LessonError of clear lines, never a traceback ----------------------------------
def _string(text: str) -> str:
    """A TOML basic string: JSON's escapes, and DEL escaped too (JSON leaves it, TOML refuses it raw)."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml(value) -> str:
    """A TOML literal for ``value`` (inline tables and arrays; NaN and infinities as TOML spells them)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return _string(value)  # a lone surrogate stays: TOML refuses it, a clear line all the same
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return "{" + ", ".join(f"{_string(k)} = {_toml(v)}" for k, v in value.items()) + "}"


KEYS = sorted(
    {"title", "level", "about", "steps", "chapter", "text", "state", "question", "kind", "ask", "quantity"}
    | {"tolerance", "token", "query", "key", "length", "setting", "to", "candidates", "distractors", "answer"}
    | set(STATE_PARAMS)
)
scalars = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["logits", "attention", "pick", "estimate", "direction", "type", "temperature", "top_p", "20%"]),
    st.sampled_from(["probability", "entropy", "top_p_kept", "attention", "kv_bytes", "tokens", "beginner", "-5%"]),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
)
keys = st.one_of(st.sampled_from(KEYS), st.text(min_size=1, max_size=8))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=4))
steps = st.lists(st.dictionaries(keys, values, max_size=6), max_size=3)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(top=st.dictionaries(keys, values, max_size=5), step_tables=steps)
def test_any_malformed_structure_gets_clear_lines(top, step_tables):
    text = "\n".join(f"{_string(k)} = {_toml(v)}" for k, v in top.items() if k != "steps")
    text += "".join(
        "\n[[steps]]\n" + "\n".join(f"{_string(k)} = {_toml(v)}" for k, v in t.items()) for t in step_tables
    )
    try:
        parse(text, "fuzz")
    except LessonError as error:
        assert error.lines and all(line.startswith("fuzz.toml: ") and "\n" not in line for line in error.lines)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_get_clear_lines(tmp_path_factory, data):
    path = Path(tmp_path_factory.mktemp("fuzz")) / "fuzz.toml"
    path.write_bytes(data)
    try:
        files.load_path(path)
    except LessonError as error:
        assert error.lines and all(line.startswith("fuzz.toml: ") for line in error.lines)


@settings(max_examples=300, deadline=None)
@given(
    key=st.sampled_from(["temperature", "top_p", "seed", "layer", "tolerance", "to", "length", "candidates"]),
    value=scalars,
)
def test_any_value_in_a_numbers_place_is_checked(key, value):
    """A number's place with any value: a clear line naming that key, or a value the controls can hold."""
    text = GOOD.split("[steps.question]")[0]
    question = {
        "tolerance": 'kind = "estimate"\nquantity = "probability"\ntolerance = {}',
        "to": 'kind = "direction"\nsetting = "temperature"\nquantity = "entropy"\nto = {}',
        "length": 'kind = "estimate"\nquantity = "kv_bytes"\ntolerance = 1\nlength = {}',
        "candidates": 'kind = "pick"\ncandidates = {}',
    }
    if key in question:
        text = text.replace(
            'state = { prompt = "The cat sat", temperature = 1.0 }', 'state = { prompt = "The cat sat" }'
        )
        text = text.replace('chapter = "logits"', 'chapter = "generation"' if key == "length" else 'chapter = "logits"')
        text += "[steps.question]\n" + question[key].replace("{}", _toml(value))
    else:
        text = text.replace("temperature = 1.0", f"{key} = {_toml(value)}")
    try:
        parse(text, "num")
    except LessonError as error:
        assert all(line.startswith("num.toml: ") and "\n" not in line for line in error.lines)
        assert any(key in line for line in error.lines), error.lines


def test_the_class_results_csv_is_recounted_from_the_answers():
    from ui.lesson.classmode import ClassResult, results_csv

    given = ["on", "on", "at", "on", "mat"]  # five students' answers to one question; "on" is right
    result = ClassResult(2, "Which token?", dict(Counter(given)), right=given.count("on"))
    rows = list(csv.DictReader(io.StringIO(results_csv([result]))))
    assert [(r["answer"], int(r["students"])) for r in rows] == [("on", 3), ("at", 1), ("mat", 1)]
    assert sum(int(r["students"]) for r in rows) == len(given)
    assert {r["question_share_right"] for r in rows} == {"0.6000"} and rows[0]["share"] == "0.6000"


def test_the_reveal_sentences_say_what_their_numbers_say():
    from ui.lesson import claims
    from ui.lesson.answers import Direction, Graded, NextToken, Number

    kept = Number("top_p_kept", 7.0, "tokens", 3.5, "the tokens top-p = 0.9 keeps at T = 1", "curve", [], [], None)
    sentence = claims.number_sentence(kept, Graded("30", False, value=30.0))
    assert sentence == (
        "Not this time. The tokens top-p = 0.9 keeps at T = 1: **7 tokens**. Your estimate, 30 tokens, is 23 tokens "
        "off: outside the ±3.5 tokens that counts as right."
    )
    assert claims.number_sentence(kept, Graded("9", True, value=9.0)).startswith("Right.")
    rise = Direction("entropy", "temperature", 0.7, 1.5, 2.02, 5.93, "rises", [], [])
    assert claims.direction_sentence(rise, Graded("falls", False), "the entropy") == (
        "You said it falls; not this time: the entropy is 2.02 bits at temperature = 0.7 and 5.93 bits at 1.5: "
        "it rises by 3.91 bits."
    )
    token = NextToken([5, 6], [" on", " at"], [0.334, 0.301], 5, [5, 6], 1.0, 49152)
    assert claims.next_token_sentence(token, Graded("·at", False, token_id=6), 2, 0.301) == (
        "The model's most likely next token is **·on** at 33.4 % (T = 1). Yours, **·at**, gets 30.1 %: rank 2 of "
        "49,152 tokens, 1.11× less likely than the favourite."
    )
    assert claims.score_sentence(4, 6, 5) == "You answered 4 of 6 questions right (1 left unanswered)."
