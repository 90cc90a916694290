"""AppTest for the Lessons page: answer, reveal, score; the step in the link; a bad file refused with its lines.

The right answers the test gives are computed the way the page computes them (``ui.lesson.answers``, the same cached
helpers in this process), so the test knows which answers must count and checks the score the page shows.
"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.apptest_utils import APP, assert_clean, chart, open_link
from ui.common import state as keys
from ui.lesson import answers, classmode, files
from ui.lesson.answers import NextToken, Number
from ui.lesson.be_the_model import grow
from ui.lesson.format import LessonError
from ui.logits.compute import token_texts

pytestmark = pytest.mark.real_model

SMOLLM2, GEMMA = "SmolLM2-135M-Instruct", "gemma-3-270m"
TIMEOUT = 300
MIB = 2**20


def open_lesson(query: dict[str, str]) -> AppTest:
    return open_link("pages/lesson.py", query, TIMEOUT)


def answer(at: AppTest, lesson: str, number: int, value) -> None:
    """Give ``value`` to step ``number``'s question and press Answer."""
    key = keys.answer_widget(lesson, number)
    for kind in ("number_input", "radio", "text_input"):
        found = [w for w in getattr(at, kind) if w.key == key]
        if found:
            widget = found[0]
            widget.input(value) if kind == "text_input" else widget.set_value(value)
            break
    else:
        raise AssertionError(f"no question widget {key}")
    at.button(key=keys.submit_button(lesson, number)).click().run()
    assert_clean(at)


def right_answer(model: str, found, lesson, step):
    if isinstance(found, NextToken):
        return found.right_id if step.question.kind == "pick" else found.texts[0].strip()
    if isinstance(found, Number):
        return found.value / MIB if found.quantity == "kv_bytes" else found.value
    return found.answer


def wrong_answer(found):
    if isinstance(found, NextToken):
        return next(i for i in found.options if i != found.right_id) if found.options else "xylophone"
    if isinstance(found, Number):
        return found.value + 10 * found.tolerance + 1
    return "falls" if found.answer == "rises" else "rises"


def play(at: AppTest, model: str, name: str, wrong_steps: set[int]) -> int:
    """Walk the lesson from its first page to its score, answering wrong at ``wrong_steps``; the right count."""
    lesson = files.load(name)
    at.button(key=keys.LESSON_NEXT).click().run()  # Start
    right = 0
    for step in lesson.steps:
        assert at.query_params["lesson"] == name and at.query_params["at"] == str(step.number)
        assert f"step {step.number} of {len(lesson.steps)}" in at.get("progress")[0].proto.text
        if step.question is not None:
            found = answers.truth(model, lesson, step)
            wrong = step.number in wrong_steps
            given = wrong_answer(found) if wrong else right_answer(model, found, lesson, step)
            answer(at, name, step.number, given)
            figure = chart(at, f"lesson_reveal_{step.number}")  # the reveal: the model's answer with the learner's
            marked = [a.get("text", "") for a in figure["layout"].get("annotations", [])]
            shapes = figure["layout"].get("shapes", [])
            if isinstance(found, NextToken):
                assert "the model's pick" in marked and (("yours" in marked) == wrong)
            elif isinstance(found, Number):
                assert any(f"your estimate {float(given):g}" in text for text in marked) and shapes  # the line
            feedback = (at.success if not wrong else at.info)[0].value
            assert feedback.endswith("right.") if not wrong else feedback.endswith("not quite.")
            right += not wrong
        at.button(key=keys.LESSON_NEXT).click().run()
        assert_clean(at)
    return right


def test_self_study_run_answer_reveal_score(both_models):
    at = open_lesson({"lesson": "text-to-next-token"})
    right = play(at, SMOLLM2, "text-to-next-token", wrong_steps={5, 7})
    assert right == 7
    assert at.metric[0].value == "7 / 9"
    assert "You answered 7 of 9 questions right." in [m.value for m in at.markdown]
    links = [link.proto.label for link in at.main.get("page_link")]
    assert links == ["Logits & temperature"]  # the one chapter of the two missed questions (steps 5 and 7)
    at.button(key=keys.LESSON_RESTART).click().run()
    assert (
        at.query_params["at"] == "1" and at.number_input(key=keys.answer_widget("text-to-next-token", 1)).value is None
    )


def test_a_link_reopens_the_step_with_its_state(both_models):
    at = open_lesson({"lesson": "text-to-next-token", "at": "7"})
    assert "step 7 of 11" in at.get("progress")[0].proto.text
    assert at.session_state["prompt"] == "The cat sat" and at.session_state["temperature"] == 0.7
    assert at.sidebar.text_area(key="_w_prompt").value == "The cat sat"  # the sidebar shows the step's prompt
    assert at.query_params["temperature"] == "0.7"  # the step's state is in the link too
    chapter = [link for link in at.main.get("page_link") if link.proto.label.startswith("Open the full chapter")]
    assert chapter and chapter[0].proto.page == "logits"
    assert [r.value for r in at.radio if r.key == keys.answer_widget("text-to-next-token", 7)] == [None]


def test_a_bad_file_is_refused_with_the_checks_lines(both_models, tmp_path, monkeypatch):
    (tmp_path / "bad.toml").write_text(
        'title = "Bad"\nlevel = "beginner"\n\n[[steps]]\nchapter = "logitz"\ntext = "x"\n'
        'state = { prompt = "The cat sat", temperature = 3.5 }\n'
    )
    (tmp_path / "text-to-next-token.toml").write_text((files.LESSONS_DIR / "text-to-next-token.toml").read_text())
    monkeypatch.setattr(files, "LESSONS_DIR", tmp_path)
    with pytest.raises(LessonError) as raised:
        files.load("bad", tmp_path)
    lines = raised.value.lines
    assert lines == [
        "bad.toml: step 1, chapter: unknown chapter 'logitz' (use one of tokenization, embeddings, attention, "
        "logit_lens, experiments, logits, sampling, generation, speculative, quantization, batching, paged_kv, compare)",
        "bad.toml: step 1, state.temperature: 3.5: use a number from 0 to 2",
    ]
    at = open_lesson({"lesson": "bad"})
    shown = at.error[0].value
    assert all(f"`{line}`" in shown for line in lines)
    at.button(
        key=keys.LESSON_CLOSE
    ).click().run()  # back to the list: the good lesson offered, the bad one listed apart
    assert at.selectbox(key=keys.LESSON_PICK).options == ["From your text to the next token (beginner, 11 steps)"]
    assert all(f"`{line}`" in at.warning[0].value for line in lines)
    assert "lesson" not in at.query_params


def test_the_attention_lesson_on_gemma(both_models):
    at = open_lesson({"lesson": "attention-and-the-kv-cache", "model": GEMMA})
    assert play(at, GEMMA, "attention-and-the-kv-cache", wrong_steps=set()) == 4
    assert at.metric[0].value == "4 / 4"
    assert not at.main.get("page_link")  # nothing missed: no chapter to reread


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("text-to-next-token", GEMMA),  # on SmolLM2: test_self_study_run_answer_reveal_score
        ("temperature-and-sampling", SMOLLM2),
        ("temperature-and-sampling", GEMMA),
        ("why-inference-is-fast", SMOLLM2),
        ("why-inference-is-fast", GEMMA),
    ],
)
def test_each_lesson_of_the_issue_plays_on_both_models(both_models, name, model):
    """Every step opens its chapter's state and every question reveals with the model's answer marked; answered
    right throughout, the score is full and no chapter is left to reread."""
    at = open_lesson({"lesson": name, "model": model})
    n = len(files.load(name).questions)
    assert play(at, model, name, wrong_steps=set()) == n
    assert at.metric[0].value == f"{n} / {n}"
    assert not at.main.get("page_link")


# -- with a class: the teacher steps, students follow and answer, the teacher reveals --------------------------------
KEY = "correct horse battery staple"


@pytest.fixture(params=["memory", "redis"])
def class_server(request, monkeypatch):
    """A teacher key set by the operator and an empty room: in this server's memory, or in the Redis every replica
    of a school shares (the answers are the room's guesses, kept by either store)."""
    import secrets

    from inference import settings
    from ui.class_page import broadcast

    monkeypatch.setenv(broadcast.TEACHER_KEY_ENV, KEY)
    if request.param == "memory":
        monkeypatch.delenv(settings.PREFIX + "ROOM", raising=False)
    else:
        monkeypatch.setenv(settings.PREFIX + "ROOM", request.getfixturevalue("redis_server").url)
        monkeypatch.setenv(settings.PREFIX + "CLASS_ID", "t" + secrets.token_hex(6))
    broadcast.room.clear()
    yield broadcast
    broadcast.room.clear()


def student(student_id: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["_class_student"] = student_id  # its browser's id (the cookie's)
    at.run()
    assert_clean(at)
    return at


def teacher_on_lesson() -> AppTest:
    """The teacher's tab, the key proved, on the first page of the lesson text-to-next-token."""
    teacher = AppTest.from_file(APP, default_timeout=TIMEOUT)
    teacher.run()
    teacher.text_input(key="_w_class_key").input(KEY)
    teacher.button(key="class_unlock").click().run()
    teacher.switch_page("pages/lesson.py")
    teacher.run()
    teacher.selectbox(key=keys.LESSON_PICK).set_value("text-to-next-token").run()
    teacher.button(key=keys.LESSON_START).click().run()
    return teacher


def test_a_class_follows_the_steps_answers_once_and_sees_the_reveal(both_models, class_server, engine):
    teacher = teacher_on_lesson()
    teacher.button(key=keys.LESSON_NEXT).click().run()  # Start: step 1, its question opened to the class
    assert_clean(teacher)
    assert teacher.metric[0].label == "Answers in" and teacher.metric[0].value == "0"
    assert not [w for w in teacher.number_input if w.key == keys.answer_widget("text-to-next-token", 1)]  # no answering

    ana, ben = student("a" * 32), student("b" * 32)
    # Ana had answered step 1 alone before the class: that answer was never the class's, so she is asked again
    ana.session_state[keys.LESSON_ANSWERS] = {("text-to-next-token", 1, SMOLLM2): answers.Graded("9", False, value=9.0)}
    for tab in (ana, ben):
        tab.run()  # the heartbeat's rerun after the broadcast changed (AppTest reruns by hand)
        assert_clean(tab)
        assert "step 1 of 11" in tab.get("progress")[0].proto.text  # following the teacher's step
    lesson = files.load("text-to-next-token")
    tokens = answers.truth(SMOLLM2, lesson, lesson.steps[0]).value
    answer(ana, "text-to-next-token", 1, tokens)
    assert "is in" in ana.info[0].value and not ana.get("plotly_chart")  # no reveal before the teacher's
    teacher.run()
    assert teacher.metric[0].value == "1"

    ben.number_input(key=keys.answer_widget("text-to-next-token", 1)).set_value(tokens + 5)  # typed, not yet sent
    teacher.button(key=keys.LESSON_REVEAL).click().run()
    assert "**The class: 1 answer.**" in [m.value for m in teacher.markdown]
    ben.button(key=keys.submit_button("text-to-next-token", 1)).click().run()  # sent after the reveal: refused
    assert "Your answer was not counted: the answer is out" in ben.error[0].value
    ana.run()
    assert_clean(ana)
    assert chart(ana, "lesson_reveal_1") and chart(ana, "lesson_class_1")  # the model's answer, then the class's
    assert "1 of 1 estimates are within ±1 of the model's" in " ".join(m.value for m in ana.markdown)
    for _ in range(4):  # on through the ids, the embedding rows and the attention question to step 5: pick
        teacher.button(key=keys.LESSON_NEXT).click().run()
    pick = answers.truth(SMOLLM2, lesson, lesson.steps[4])
    other = next(i for i in pick.options if i != pick.right_id)
    for tab, token in ((ana, pick.right_id), (ben, other)):
        tab.run()
        assert "step 5 of 11" in tab.get("progress")[0].proto.text
        answer(tab, "text-to-next-token", 5, token)
    teacher.button(key=keys.LESSON_REVEAL).click().run()
    ana.run()
    assert_clean(ana)
    votes = chart(ana, "lesson_class_5")  # the class's votes beside the model's softmax at the step's T
    assert votes["data"] and "overlap by" in " ".join(m.value for m in ana.markdown)
    # be the model: a token drawn from the class's two votes and one from the model, each grown by the model, the
    # same on the teacher's page and the student's (seeded), and the engine's own draws
    params = classmode.be_the_model_params(lesson.steps[4])
    assert params.seed == lesson.steps[4].setting("seed") and params.temperature == 1.0
    ids = engine.encode_prompt("The cat sat")
    side = grow(lambda text: engine.recompute_last(text).numpy(), ids, {pick.right_id: 1, other: 1}, params)
    expected = ["The cat sat" + "".join(token_texts(SMOLLM2, grown)) for grown in (side.class_ids, side.model_ids)]
    assert side.class_ids[0] in (pick.right_id, other) and side.class_first_share == 0.5
    for tab in (ana, teacher):
        assert [c.value for c in tab.code] == expected
        assert "**Be the model:** 5 tokens on" in " ".join(m.value for m in tab.markdown)
    for _ in range(7):  # the teacher steps on to the end: the class's results, counts only
        teacher.button(key=keys.LESSON_NEXT).click().run()
        assert_clean(teacher)
    table = teacher.dataframe[0].value
    assert table.to_dict("records") == [
        {
            "step": 1,
            "question": 'How many tokens does the model read for "The cat sat"?',
            "answers": 1,
            "right": "100%",
        },
        {
            "step": 5,
            "question": 'Which token does the model find most likely after "The cat sat"?',
            "answers": 2,
            "right": "50%",
        },
    ]
    assert not teacher.metric  # no score of the teacher's own: the teacher answered nothing


def test_a_press_on_the_last_steps_button_still_on_screen_acts_on_the_step_the_page_shows(both_models, class_server):
    """While a step's run draws (seconds on a busy server), the browser still shows the last step's buttons, under
    the same keys; a press on one belongs to the step the page now shows. Seen in Chromium: a Reveal pressed as the
    count appeared revealed the last step's round, and the class never saw this one's; a Next pressed that early
    stayed on the step. Here the last step's buttons are pressed after the session has moved on, as in that run."""
    teacher = teacher_on_lesson()
    for _ in range(4):  # Start, then on to step 4: an estimate, opened to the class
        teacher.button(key=keys.LESSON_NEXT).click().run()
    assert_clean(teacher)
    assert "step 4 of 11" in teacher.get("progress")[0].proto.text
    step = files.load("text-to-next-token").steps[4]
    # Next went through, and step 5's run has opened its question; the page still shows step 4's buttons
    opened = class_server.room().new_guess_round(classmode.experiment(SMOLLM2, step))
    teacher.session_state[keys.LESSON_AT] = 5
    teacher.session_state[keys.LESSON_ROUND] = (("text-to-next-token", 5, SMOLLM2), opened)
    teacher.button(key=keys.LESSON_REVEAL).click().run()  # step 4's Reveal
    assert_clean(teacher)
    assert "step 5 of 11" in teacher.get("progress")[0].proto.text
    shown = class_server.room().guess_round()
    assert shown.round_id == opened and shown.revealed
    assert "**The class: 0 answers.**" in [m.value for m in teacher.markdown]
    teacher.session_state[keys.LESSON_AT] = 6  # Next went through; step 5's Next is still on screen
    teacher.button(key=keys.LESSON_NEXT).click().run()
    assert_clean(teacher)
    assert "step 7 of 11" in teacher.get("progress")[0].proto.text
