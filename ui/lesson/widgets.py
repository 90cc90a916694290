"""A lesson question's widgets: the form that asks it, and the reveal that shows the model's answer beside the
learner's (the chart with their answer marked, and the sentence computed from the numbers).

``ask`` draws the question in a form and returns the raw answer once it is submitted (a token id, a typed word, a
number or a direction word), else None. ``reveal`` draws the truth against a graded answer.
"""

from __future__ import annotations

import streamlit as st

from ui.common import charts
from ui.common import state as keys
from ui.common.token_text import visible_token
from ui.lesson import answers, claims, classmode
from ui.lesson import figures as figs
from ui.lesson.answers import Direction, Graded, NextToken, Number, Truth
from ui.lesson.claims import QUANTITY_LABELS, question_text
from ui.lesson.format import DIRECTION_WORDS, Step

MIB = 2**20  # a KV cache estimate is typed in MiB


def ask(model: str, lesson: str, step: Step, found: Truth, given: dict, class_round: str | None = None) -> None:
    """The question in a form; its Answer button grades the answer into ``given`` (``answer_key``) before the
    page reruns (a callback: a rerun of the app before the page would drop a plain submit's True). ``class_round``:
    the answer also goes to the class's room (``ui.lesson.classmode``), and counts only when the room takes it."""
    question = step.question
    assert question is not None
    widget = keys.answer_widget(lesson, step.number)
    with st.form(key=keys.submit_button(lesson, step.number) + "_form", border=True):
        st.markdown(f"**{question_text(step)}**")
        if isinstance(found, NextToken) and question.kind == "pick":
            texts = dict(zip(found.token_ids, found.texts))
            st.radio(
                "Your pick",
                found.options,
                index=None,
                format_func=lambda token_id: visible_token(texts[token_id]),
                horizontal=True,
                key=widget,
            )
        elif isinstance(found, NextToken):
            st.text_input("Your word", max_chars=40, key=widget)
        elif isinstance(found, Number):
            _number_input(found, widget)
        else:
            st.radio("Your prediction", DIRECTION_WORDS, index=None, horizontal=True, key=widget)
        st.form_submit_button(
            "Answer",
            key=keys.submit_button(lesson, step.number),
            type="primary",
            on_click=_submitted,
            args=(model, lesson, step, found, given, class_round),
        )
    if st.session_state.pop(keys.LESSON_EMPTY, None) == (lesson, step.number):
        st.warning("Answer first: the model's own answer is shown after yours.")


def answer_key(lesson: str, step: Step, model: str, class_round: str | None = None) -> tuple:
    """Where an answer is kept: per lesson, step and model (another model asks again: its answer differs); in a
    class also per round (an answer given alone before the class asked is not the class's)."""
    return (lesson, step.number, model) if class_round is None else (lesson, step.number, model, class_round)


def _submitted(model: str, lesson: str, step: Step, found: Truth, given: dict, class_round: str | None) -> None:
    value = st.session_state.get(keys.answer_widget(lesson, step.number))
    if value is None or (isinstance(value, str) and not value.strip()):
        st.session_state[keys.LESSON_EMPTY] = (lesson, step.number)
        return
    if class_round is not None and not classmode.send(model, step, found, value):
        return
    if isinstance(found, Number) and found.quantity == "kv_bytes":
        value = float(value) * MIB
    graded = answers.grade(model, step, found, value)
    given[answer_key(lesson, step, model)] = graded  # the learner's own score counts it
    if class_round is not None:
        given[answer_key(lesson, step, model, class_round)] = graded


def _number_input(found: Number, widget: str) -> float | None:
    label = f"Your estimate of {QUANTITY_LABELS[found.quantity]}"
    if found.quantity in ("tokens", "top_p_kept"):
        return st.number_input(label, min_value=0, max_value=10_000_000, value=None, step=1, key=widget)
    if found.high is not None:
        return st.number_input(
            label, min_value=0.0, max_value=found.high, value=None, step=0.01, format="%.3f", key=widget
        )
    return st.number_input(label, min_value=0.0, max_value=1e9, value=None, step=0.1, format="%.2f", key=widget)


# -- the reveal ---------------------------------------------------------------------------------------
def reveal(model: str, step: Step, found: Truth, graded: Graded) -> None:
    """The model's answer on its chart with the learner's marked, the sentence, and right or not."""
    key = f"lesson_reveal_{step.number}"  # a chart's key names the chart (and its files), not a value
    if isinstance(found, NextToken):
        _reveal_token(model, step, found, graded, key)
    elif isinstance(found, Number):
        _reveal_number(found, graded, key)
    else:
        _reveal_direction(found, graded, key)


def _reveal_token(model: str, step: Step, found: NextToken, graded: Graded, key: str) -> None:
    ids, texts, probs = list(found.token_ids), list(found.texts), list(found.probs)
    rank = probability = None
    if graded.token_id is not None:
        rank, probability = answers.rank_of(model, step, graded.token_id)
        if graded.token_id not in ids:  # the learner's token, past the top: drawn at the end with its own bar
            ids.append(graded.token_id)
            texts.append(answers.token_texts(model, [graded.token_id])[0])
            probs.append(probability)
    if found.options:  # a pick: only the offered tokens, most probable first
        order = sorted(found.options, key=lambda token_id: -probs[ids.index(token_id)])
        texts = [texts[ids.index(i)] for i in order]
        probs = [probs[ids.index(i)] for i in order]
        ids = order
    yours = ids.index(graded.token_id) if graded.token_id in ids else None
    title = f"The model's next-token probabilities (T = {found.temperature:g}), yours outlined"
    charts.show(figs.token_reveal(texts, probs, ids.index(found.right_id), yours, title), key=key)
    st.markdown(claims.next_token_sentence(found, graded, rank, probability))


def _reveal_number(found: Number, graded: Graded, key: str) -> None:
    assert graded.value is not None
    scale = MIB if found.unit == "bytes" else 1.0  # bytes drawn in MiB
    estimate = graded.value / scale
    title = charts.wrap_title(f"{found.about[:1].upper()}{found.about[1:]}")
    if found.chart == "bars":
        charts.show(figs.bars_reveal(found.xs, found.ys, found.marked, estimate, title, found.y_title), key=key)
    elif found.chart == "curve":
        on_x = found.quantity == "top_p_kept"  # a count of tokens is an x value on the cumulative curve
        x, y = found.point if found.point is not None else (found.xs[-1], found.ys[-1])
        charts.show(
            figs.curve_reveal(
                found.xs,
                [value / scale for value in found.ys],
                x,
                y / scale,
                estimate,
                on_x,
                title,
                found.x_title,
                found.y_title.replace("bytes", "MiB") if scale != 1.0 else found.y_title,
                found.guide,
            ),
            key=key,
        )
    else:
        charts.show(figs.number_line(found.value, found.tolerance, estimate, title, found.unit), key=key)
    st.markdown(claims.number_sentence(found, graded))


def _reveal_direction(found: Direction, graded: Graded, key: str) -> None:
    label = QUANTITY_LABELS[found.quantity]
    charts.show(
        figs.direction_reveal(
            found.xs,
            found.ys,
            found.start,
            found.to,
            found.before,
            found.after,
            f"{label[:1].upper()}{label[1:]} as {found.setting} goes from {found.start:g} to {found.to:g}",
            found.setting,
            label,
        ),
        key=key,
    )
    st.markdown(claims.direction_sentence(found, graded, label.split(" (")[0]))
