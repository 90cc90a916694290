"""The Lesson page's session keys, defined once (to join ``ui/session/state.py``'s registry when the chapter folders
land: ``ui.session.links`` reads the first two for the URL, before any page runs)."""

from __future__ import annotations

MAX_STEPS = 40  # steps a lesson can have (a link's step past them is clamped)

LESSON = "lesson"  # str: the lesson's name (its file's stem in ``lessons/``); "" for the list of lessons
LESSON_AT = "lesson_at"  # int: 0 the lesson's first page, 1…n its steps, n + 1 the score
LESSON_ANSWERS = "_lesson_answers"  # dict[(lesson, step), Graded]: what the learner answered, and whether it was right
LESSON_APPLIED = "_lesson_applied"  # (lesson, step): the step whose state was last put into the session
LESSON_EMPTY = "_lesson_empty"  # (lesson, step): its Answer was pressed with nothing answered
LESSON_NOTES = "_lesson_notes"  # list[str]: what of the step's state could not be used as given
LESSON_PICK = "lesson_pick"  # selectbox: the lesson chosen on the list
LESSON_START = "lesson_start"  # button
LESSON_NEXT, LESSON_BACK, LESSON_RESTART = "lesson_next", "lesson_back", "lesson_restart"  # buttons
LESSON_CLOSE = "lesson_close"  # button: back to the list of lessons
LESSON_ROUND = "_lesson_round"  # (lesson, step, model): the question the teacher's session last opened to the class
LESSON_REVEAL = "lesson_reveal"  # button: the teacher reveals the answer to the class
LESSON_CLASS_RESULTS = "_lesson_class_results"  # dict[(lesson, model), dict[step, ClassResult]]: the teacher's tallies
LESSON_CLASS_CSV = "lesson_class_csv"  # download button: the class's results
LESSON_CLASS_MESSAGE = "_lesson_class_message"  # str: why an answer was not counted (or a reveal not made)


def answer_widget(lesson: str, step: int) -> str:
    """The question widget of one step (a key per step, so an answer never carries over to the next question)."""
    return f"lesson_answer_{lesson}_{step}"


def submit_button(lesson: str, step: int) -> str:
    return f"lesson_submit_{lesson}_{step}"
