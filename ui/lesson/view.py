"""The Lesson page's flow: the list of lessons, a lesson's first page, its steps, and the score.

Owns where the learner is (``keys.LESSON`` and ``keys.LESSON_AT``, both in the URL through ``ui.session.links``, so a
link reopens the lesson at its step), putting a step's state into the session (the same parser a shared link goes
through, ``links.apply_query``; so "Open the full chapter" shows exactly that state), and the answers given (per
lesson, step and model; never a name). A file with problems is refused with its lines, as ``python -m ui.lesson
check`` prints them.
"""

from __future__ import annotations

import streamlit as st

from ui.common import models, navigation
from ui.common import state as keys
from ui.common.resources import client_for
from ui.lesson import answers, claims, classmode, files, widgets
from ui.lesson.format import CHAPTERS, Lesson, LessonError, Limits, Step, check_on_model
from ui.session import links

NOT_OPENED = frozenset({"model", "present", "lesson", "at"})  # a step's state leaves these as the learner has them


def render() -> None:
    name = st.session_state.get(keys.LESSON) or ""
    if not name:
        _choose()
        return
    try:
        lesson = files.load(name)
    except LessonError as error:
        _refuse(error.lines)
        return
    model = models.current()
    config = client_for(model).info.config
    problems = check_on_model(lesson, Limits(model, config.n_layers, config.n_heads, config.vocab_size))
    if problems:
        _refuse(problems)
        return
    at = _position(len(lesson.steps))
    if at == 0:
        _first_page(lesson)
    elif at <= len(lesson.steps):
        _step(lesson, lesson.steps[at - 1], model)
    else:
        _score(lesson, model)


def _go(name: str, at: int) -> None:
    st.session_state[keys.LESSON] = name
    st.session_state[keys.LESSON_AT] = at


def _move(name: str, by: int, total: int) -> None:
    """Start, Back and Next: ``by`` steps from the step the session is on at the press, not from the one the button
    was drawn on (while a step's run draws, the last step's button is still on screen, with the same key: a press
    on it moves on from the step the page now shows). A press left from another lesson does nothing."""
    if st.session_state.get(keys.LESSON) == name:
        _go(name, min(max(_position(total) + by, 0), total + 1))


def _position(total: int) -> int:
    """The step the session is on: 0 is the lesson's first page, ``total + 1`` its score."""
    return min(max(int(st.session_state.get(keys.LESSON_AT) or 0), 0), total + 1)


def code(line: str) -> str:
    """One problem line as a Markdown code span (a backtick in it cannot end the span early)."""
    return "`" + line.replace("`", "'") + "`"


def _refuse(lines: list[str]) -> None:
    st.error("**This lesson cannot be used:**\n\n" + "\n".join(f"- {code(line)}" for line in lines))
    st.button("Choose another lesson", key=keys.LESSON_CLOSE, on_click=_go, args=("", 0))


# -- the list and a lesson's first page ---------------------------------------------------------------
def _choose() -> None:
    offered, broken = {}, []
    for name in files.names():
        try:
            offered[name] = files.load(name)
        except LessonError as error:
            broken += error.lines
    st.markdown(
        "A lesson walks you through the chapters. At each question **you predict first**; then the model's own "
        "answer is computed, live, for that step's text and settings, and drawn with yours on it."
    )
    if offered:
        pick = st.selectbox(
            "Lesson",
            list(offered),
            format_func=lambda name: f"{offered[name].title} ({offered[name].level}, {len(offered[name].steps)} steps)",
            key=keys.LESSON_PICK,
        )
        st.button("Open this lesson", key=keys.LESSON_START, type="primary", on_click=_go, args=(pick, 0))
    else:
        st.info(f"No lessons in `{files.LESSONS_DIR.name}/`: docs/lessons.md says how to write one.")
    if broken:
        st.warning(
            "**These lesson files have problems and are not offered:**\n\n" + "\n".join(f"- {code(b)}" for b in broken)
        )


def _first_page(lesson: Lesson) -> None:
    st.header(lesson.title)
    asked = len(lesson.questions)
    st.caption(f"{lesson.level.capitalize()} · {len(lesson.steps)} steps · {asked} questions")
    if lesson.about:
        st.markdown(lesson.about)
    chapters = list(dict.fromkeys(CHAPTERS[step.chapter] for step in lesson.steps))
    st.markdown("It visits: " + " → ".join(chapters) + ".")
    left, right = st.columns(2)
    left.button("Start", key=keys.LESSON_NEXT, type="primary", on_click=_move, args=(lesson.name, 1, len(lesson.steps)))
    right.button("Choose another lesson", key=keys.LESSON_CLOSE, on_click=_go, args=("", 0))


# -- a step -------------------------------------------------------------------------------------------
def _open_state(lesson: Lesson, step: Step) -> None:
    """Put the step's state into the session once per step (a rerun, so the sidebar shows it too); a step with no
    state leaves the learner's view as it is."""
    where = (lesson.name, step.number)
    if st.session_state.get(keys.LESSON_APPLIED) == where or not step.state:
        return
    st.session_state[keys.LESSON_APPLIED] = where
    st.session_state[keys.LESSON_NOTES] = links.apply_query(step.query(), reset_missing=True, skip=NOT_OPENED)
    st.rerun()


def _step(lesson: Lesson, step: Step, model: str) -> None:
    _open_state(lesson, step)
    total = len(lesson.steps)
    st.progress(step.number / total, text=f"{lesson.title} · step {step.number} of {total}")
    st.subheader(CHAPTERS[step.chapter])
    for note in st.session_state.get(keys.LESSON_NOTES) or []:
        st.warning(note)
    st.markdown(step.text)
    if step.question is not None:
        _question(lesson, step, model)
    st.page_link(
        navigation.script_of(step.chapter),
        label=f"Open the full chapter: {CHAPTERS[step.chapter]} (come back with Lessons in the page list)",
        icon=":material/open_in_new:",
    )
    left, middle, right = st.columns(3)
    left.button("Back", key=keys.LESSON_BACK, on_click=_move, args=(lesson.name, -1, total))
    last = step.number == total
    middle.button(
        "See your score" if last else "Next step",
        key=keys.LESSON_NEXT,
        type="primary",
        on_click=_move,
        args=(lesson.name, 1, total),
    )
    right.button("Choose another lesson", key=keys.LESSON_CLOSE, on_click=_go, args=("", 0))


def _question(lesson: Lesson, step: Step, model: str) -> None:
    try:
        found = answers.truth(model, lesson, step)
    except LessonError as error:
        st.error(
            "**This question cannot be asked on this model:**\n\n" + "\n".join(f"- {code(x)}" for x in error.lines)
        )
        return
    in_class = classmode.active(lesson.name, step)
    classmode.show_message()  # why the last answer was not counted (or the reveal not made)
    if classmode.teacher_in_class():  # the teacher does not answer: the class does
        classmode.teacher_panel(lesson.name, model, step, found)
        return
    given = st.session_state.setdefault(keys.LESSON_ANSWERS, {})
    class_round = classmode.round_id(model, step) if in_class else None
    graded = given.get(widgets.answer_key(lesson.name, step, model, class_round))
    is_out = in_class and classmode.revealed(model, step)  # watched: the page reruns at the teacher's reveal
    if graded is None:
        if is_out:
            st.info("The teacher has revealed this answer: you did not answer this one.")
            classmode.class_view(model, step, found, classmode.class_answers(model, step))
            return
        widgets.ask(model, lesson.name, step, found, given, class_round)
        return
    if in_class and not is_out:
        st.info(f"Your answer, **{graded.answer}**, is in. The model's answer appears when the teacher reveals it.")
        return
    (st.success if graded.right else st.info)(
        f"Your answer: **{graded.answer}** — {'right' if graded.right else 'not quite'}."
    )
    widgets.reveal(model, step, found, graded)
    if in_class:
        classmode.class_view(model, step, found, classmode.class_answers(model, step))


# -- the score ----------------------------------------------------------------------------------------
def _score(lesson: Lesson, model: str) -> None:
    if classmode.teacher_in_class():  # the teacher did not answer: the class did
        st.header(f"{lesson.title}: the class's results")
        _class_results(lesson, model)
    else:
        st.header(f"{lesson.title}: your score")
        _own_score(lesson, model)
    left, right_column = st.columns(2)
    left.button("Start again", key=keys.LESSON_RESTART, on_click=_restart, args=(lesson, model))
    right_column.button("Choose another lesson", key=keys.LESSON_CLOSE, on_click=_go, args=("", 0))


def _own_score(lesson: Lesson, model: str) -> None:
    given = st.session_state.get(keys.LESSON_ANSWERS, {})
    asked = lesson.questions
    graded = {step.number: given.get(widgets.answer_key(lesson.name, step, model)) for step in asked}
    right = sum(1 for g in graded.values() if g is not None and g.right)
    answered = sum(1 for g in graded.values() if g is not None)
    st.metric("Score", f"{right} / {len(asked)}")
    st.markdown(claims.score_sentence(right, len(asked), answered))
    rows = [
        {
            "step": step.number,
            "chapter": CHAPTERS[step.chapter],
            "question": claims.question_text(step),
            "your answer": graded[step.number].answer if graded[step.number] else "—",
            "right": bool(graded[step.number] and graded[step.number].right),
        }
        for step in asked
    ]
    if rows:
        st.dataframe(rows, hide_index=True)
    missed = [step.chapter for step in asked if not (graded[step.number] and graded[step.number].right)]
    if missed:
        st.markdown("**What explains the ones you missed:**")
        for chapter in dict.fromkeys(missed):
            st.page_link(navigation.script_of(chapter), label=CHAPTERS[chapter], icon=":material/menu_book:")


def _class_results(lesson: Lesson, model: str) -> None:
    """The teacher's view of the class: each revealed question's answers and share right, and their CSV."""
    found = classmode.results(lesson.name, model)
    if not found:
        st.caption("No question of this lesson was revealed to the class yet.")
        return
    st.dataframe(
        [
            {"step": r.step, "question": r.question, "answers": r.n, "right": f"{r.right / r.n:.0%}" if r.n else "—"}
            for r in found
        ],
        hide_index=True,
    )
    st.download_button(
        "Download the class's results (CSV)",
        data=classmode.results_csv(found),
        file_name=f"{lesson.name}_class_results.csv",
        mime="text/csv",
        key=keys.LESSON_CLASS_CSV,
        on_click="ignore",
        help="Per question: each answer's count and share, and the share right. No names: only counts are kept.",
    )


def _restart(lesson: Lesson, model: str) -> None:
    given = st.session_state.get(keys.LESSON_ANSWERS, {})
    for step in lesson.steps:
        given.pop(widgets.answer_key(lesson.name, step, model), None)
    _go(lesson.name, 1)
