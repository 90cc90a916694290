"""A lesson with a class: the teacher steps, students answer on their own devices, the teacher reveals.

Stepping needs nothing here: the lesson and its step are link parameters, so the teacher's broadcast carries them
and every follower's page opens the same step (``ui.class_page.broadcast``). A question step is one of the room's
guess rounds (``RoomStore.new_guess_round``: one answer per student, counted once whichever replica gets it, a late
answer after the reveal refused with the room's message). The teacher's page starts the round when it opens the
step, sees a count of answers (never names) and reveals; a student's Answer goes to the room, and the student sees
the reveal when the teacher gives it. After the reveal everyone sees the class's answers beside the model's: the
vote against the model's softmax for a next token, a histogram around the true value for an estimate. After a
next-token vote, "be the model" (``ui.lesson.be_the_model``): a token drawn from the class's votes and one from the
model's probabilities, and both continued by the model side by side, the same on every page (seeded).

Answers are kept in the room as short text (a token's text, a number, a direction word): the room's guesses.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections import Counter
from dataclasses import dataclass

import streamlit as st

from inference.api import SamplingParams
from ui.class_page import broadcast
from ui.class_page import figures as class_figs
from ui.class_page.draws import TOP_GUESS_TOKENS, guess_token
from ui.classroom.room import Experiment, RoomError, RoomUnavailable
from ui.common import charts
from ui.common import format as fmt
from ui.common import state as keys
from ui.common.resources import client_for
from ui.lesson import claims
from ui.lesson import figures as figs
from ui.lesson.answers import Direction, NextToken, Number, Truth, grade, sampling_controls_params
from ui.lesson.be_the_model import GROWN_TOKENS, SideBySide, continue_from, first_tokens
from ui.lesson.format import Step
from ui.logits.compute import prompt_logits, softmax_at, token_texts, top_indices

REFRESH_S = 2.0  # the teacher's count rereads the room this often


@dataclass(frozen=True)
class ClassResult:
    """One question's answers from the class, as the teacher's results keep them: counts only, no names."""

    step: int
    question: str
    answers: dict[str, int]  # answer text -> students who gave it
    right: int  # students whose answer counts as right

    @property
    def n(self) -> int:
        return sum(self.answers.values())


def active(lesson: str, step: Step) -> bool:
    """This tab is in a class on this step: the teacher's, or a student following a teacher who shows it now (a
    student on a class server doing another lesson, or this one on their own, answers for themselves)."""
    if broadcast.teacher_key() is None:
        return False
    if broadcast.is_teacher():
        return True
    if not broadcast.following():
        return False
    try:
        now = broadcast.room().current()
    except RoomUnavailable:
        return False
    return (
        now.live
        and now.page == "lesson"
        and now.query.get("lesson") == lesson
        and now.query.get("at") == str(step.number)
    )


def teacher_in_class() -> bool:
    """This tab is the teacher's: it opens questions to the class and reveals them, and answers none itself."""
    return broadcast.teacher_key() is not None and broadcast.is_teacher()


def experiment(model: str, step: Step) -> Experiment:
    """The round's experiment: the step's model, prompt and settings (the room keys its guesses by round)."""
    return Experiment(model, step.state["prompt"], bool(step.state.get("chat", False)), sampling_controls_params(step))


def answer_text(found: Truth, value: object) -> str:
    """An answer as the room keeps it: a token's text, a number, or a direction word."""
    if isinstance(found, NextToken):
        text = dict(zip(found.token_ids, found.texts)).get(value) if isinstance(value, int) else str(value)
        return (text or "").strip() or "?"
    if isinstance(found, Number):
        return f"{float(value):g}"
    return str(value)


def current_round(model: str, step: Step):
    """The room's guess round when it is this step's (its experiment), else None."""
    found = broadcast.room().guess_round()
    return found if found is not None and found.experiment == experiment(model, step) else None


# -- the teacher -----------------------------------------------------------------------------------------
def teacher_panel(lesson: str, model: str, step: Step, found: Truth) -> None:
    """Start this step's round once, show the count, the Reveal button, and after it the class's answers."""
    where = (lesson, step.number, model)
    try:
        opened = st.session_state.get(keys.LESSON_ROUND)
        if opened is None or opened[0] != where:
            st.session_state[keys.LESSON_ROUND] = (where, broadcast.room().new_guess_round(experiment(model, step)))
        rnd = current_round(model, step)
    except RoomUnavailable as error:
        st.warning(broadcast.paused(error))
        return
    if rnd is None:
        st.warning("Another round replaced this question's in the room: step back and forward to ask it again.")
        return
    broadcast.show_rounds(guess_id=rnd.round_id, revealed=rnd.revealed)
    if not rnd.revealed:
        if isinstance(found, NextToken):
            prepare_be_the_model(model, step)
        _count(rnd.round_id, model, step, isinstance(found, NextToken))
        st.button("Reveal the answer to the class", key=keys.LESSON_REVEAL, type="primary", on_click=_reveal)
        return
    given = list(rnd.guesses.values())
    _record(lesson, model, step, found, given)
    class_view(model, step, found, given)


def _record(lesson: str, model: str, step: Step, found: Truth, given: list[str]) -> None:
    """Keep the revealed question's tally for the teacher's results (per lesson and model; counts only)."""
    right = sum(_right(model, step, found, text) for text in given)
    results = st.session_state.setdefault(keys.LESSON_CLASS_RESULTS, {}).setdefault((lesson, model), {})
    results[step.number] = ClassResult(step.number, claims.question_text(step), dict(Counter(given)), right)


def _right(model: str, step: Step, found: Truth, text: str) -> bool:
    """Whether one class answer (as the room keeps it) counts as right, graded as a learner's own answer is."""
    if isinstance(found, Number):
        try:
            value = float(text)
        except ValueError:
            return False
        return grade(model, step, found, value).right
    return grade(model, step, found, text).right


def results(lesson: str, model: str) -> list[ClassResult]:
    """The teacher's tallies of this lesson's revealed questions, in step order."""
    kept = st.session_state.get(keys.LESSON_CLASS_RESULTS, {}).get((lesson, model), {})
    return [kept[number] for number in sorted(kept)]


def results_csv(found: list[ClassResult]) -> str:
    """One row per question and answer: the answer's count and share, and the question's share right."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["step", "question", "answer", "students", "share", "question_share_right"])
    for result in found:
        for text, count in sorted(result.answers.items(), key=lambda item: (-item[1], item[0])):
            writer.writerow(
                [result.step, result.question, text, count, f"{count / result.n:.4f}", f"{result.right / result.n:.4f}"]
            )
    return out.getvalue()


@st.fragment(run_every=REFRESH_S)
def _count(round_id: str, model: str, step: Step, next_token: bool) -> None:
    """The count of answers in; on a next-token question, each newly voted token's continuation computed as the
    votes arrive (cached), so the reveal's "be the model" finds them ready."""
    try:
        rnd = broadcast.room().guess_round()
    except RoomUnavailable as error:
        st.warning(broadcast.paused(error))
        return
    ours = rnd is not None and rnd.round_id == round_id
    n = len(rnd.guesses) if ours else 0
    st.metric("Answers in", f"{n:,}", help="How many students answered (a count: no names are kept)")
    if ours and next_token:
        prepare_be_the_model(model, step, [token for token, _ in vote_tally(model, step, list(rnd.guesses.values()))])


def _reveal() -> None:
    """Reveal the question this teacher's session opened last: the step its page is on at the press. Not a round
    bound to the button when it was drawn: while a step's run draws (seconds on a busy server), the button still on
    screen is the last step's, with the same key, and a press on it belongs to the step the page now shows."""
    opened = st.session_state.get(keys.LESSON_ROUND)
    if broadcast.is_teacher() and opened is not None:
        try:
            broadcast.room().reveal(opened[1])
        except RoomUnavailable as error:
            st.session_state[keys.LESSON_CLASS_MESSAGE] = f"Not revealed: {error}"


# -- a student ------------------------------------------------------------------------------------------
def send(model: str, step: Step, found: Truth, value: object) -> bool:
    """A student's answer to the room (True when counted); a refusal is kept for the page to say."""
    try:
        rnd = current_round(model, step)
        if rnd is None:
            st.session_state[keys.LESSON_CLASS_MESSAGE] = "The teacher has not opened this question to the class yet."
            return False
        broadcast.room().guess(rnd.round_id, broadcast.student_id(), answer_text(found, value))
    except (RoomError, RoomUnavailable) as error:
        st.session_state[keys.LESSON_CLASS_MESSAGE] = f"Your answer was not counted: {fmt.clause(error)}."
        return False
    return True


def round_id(model: str, step: Step) -> str:
    """This step's round in the room ("" when the teacher has not opened it, or the room cannot answer)."""
    try:
        rnd = current_round(model, step)
    except RoomUnavailable:
        return ""
    return rnd.round_id if rnd is not None else ""


def revealed(model: str, step: Step) -> bool:
    """Whether the teacher revealed this step's answer (watched: the page reruns when it happens)."""
    try:
        rnd = current_round(model, step)
    except RoomUnavailable as error:
        st.warning(broadcast.paused(error))
        return False
    broadcast.show_rounds(guess_id=rnd.round_id if rnd else None, revealed=bool(rnd and rnd.revealed))
    return rnd is not None and rnd.revealed


def class_answers(model: str, step: Step) -> list[str]:
    try:
        rnd = current_round(model, step)
    except RoomUnavailable:
        return []
    return list(rnd.guesses.values()) if rnd is not None and rnd.revealed else []


def show_message() -> None:
    message = st.session_state.pop(keys.LESSON_CLASS_MESSAGE, None)
    if message:
        st.error(message)


# -- the class's answers beside the model's ------------------------------------------------------------
@dataclass(frozen=True)
class ClassVotes:
    """The class's next-token answers as tokens, beside the model's distribution at the step's temperature."""

    labels: list[str]  # the voted tokens (most voted first), then the model's most probable
    class_share: list[float]
    model_prob: list[float]
    overlap: float  # sum over every token of min(class share, model probability): 1 for the same distribution
    chose_top: int  # students whose answer is the model's most probable token


def class_votes(model: str, step: Step, given: list[str], temperature: float) -> ClassVotes:
    """Each answer read as the token the model would write for it (``guess_token``), counted, and set beside
    softmax(logits / T) of the step's prompt."""
    prompt, chat = step.state["prompt"], bool(step.state.get("chat", False))
    probs = softmax_at(prompt_logits(model, prompt, chat).logits, temperature)  # (V,)
    tally = Counter(guess_token(model, prompt, text, chat)[0] for text in given)
    top = [int(i) for i in top_indices(probs, TOP_GUESS_TOKENS)]
    ids = [token for token, _ in tally.most_common()] + [t for t in top if t not in tally]
    n = max(len(given), 1)
    share = [tally.get(t, 0) / n for t in ids]
    return ClassVotes(
        token_texts(model, ids),
        share,
        [float(probs[t]) for t in ids],
        float(sum(min(count / n, float(probs[t])) for t, count in tally.items())),
        tally.get(top[0], 0),
    )


def class_view(model: str, step: Step, found: Truth, given: list[str]) -> None:
    """After the reveal: the class's answers with the model's (vote vs softmax; a histogram around the value)."""
    n = len(given)
    st.markdown(f"**The class: {n:,} answer{'s' * (n != 1)}.**")
    if not given:
        return
    key = f"lesson_class_{step.number}"  # a chart's key names the chart
    if isinstance(found, NextToken):
        votes = class_votes(model, step, given, found.temperature)
        charts.show(
            class_figs.guesses(votes.labels, votes.class_share, votes.model_prob, n, found.temperature), key=key
        )
        st.markdown(
            f"The class's votes and the model's probabilities at T = {found.temperature:g} overlap by "
            f"**{votes.overlap:.0%}** (the sum over tokens of the smaller of the two shares; 100 % would be the same "
            f"distribution). {votes.chose_top:,} of {n:,} chose the model's own pick."
        )
        be_the_model(model, step, given)
    elif isinstance(found, Number):
        values = [float(v) for v in given]
        right = sum(abs(v - found.value) <= found.tolerance + 1e-9 for v in values)
        charts.show(figs.estimates_histogram(values, found.value, found.tolerance, found.unit), key=key)
        st.markdown(f"{right:,} of {n:,} estimates are within ±{found.tolerance:g} of the model's {found.value:g}.")
    else:
        assert isinstance(found, Direction)
        counts = Counter(given)
        st.markdown(
            " · ".join(f"{word}: **{counts.get(word, 0):,}**" for word in ("rises", "falls", "stays the same"))
            + f". The model's answer: it {found.answer}."
        )


# -- be the model: the class's vote sampled as a distribution, beside the model's ---------------------------------
def vote_tally(model: str, step: Step, given: list[str]) -> tuple[tuple[int, int], ...]:
    """The class's answers as (token id, votes), most voted first: each read as ``class_votes`` reads it."""
    prompt, chat = step.state["prompt"], bool(step.state.get("chat", False))
    tally = Counter(guess_token(model, prompt, text, chat)[0] for text in given)
    return tuple(tally.most_common())


def be_the_model_params(step: Step) -> SamplingParams:
    """The step's settings with its seed: every page of the class draws the same tokens."""
    return dataclasses.replace(sampling_controls_params(step), seed=int(step.setting("seed")))


@st.cache_data(max_entries=64, show_spinner="The model writes on…")  # a few ids each
def continuation(model: str, prompt: str, chat: bool, first: int, params: SamplingParams) -> list[int]:
    """``first`` and the model's tokens after it (``continue_from``): one forward per token, so cached per first
    token: a class whose draw is the model's own reuses the model's continuation."""
    client = client_for(model)
    return continue_from(client.last_logits, client.encode_prompt(prompt, chat=chat), first, params)


def side_by_side(
    model: str, prompt: str, chat: bool, votes: tuple[tuple[int, int], ...], params: SamplingParams
) -> SideBySide:
    """``be_the_model.grow`` on the cached prompt logits and continuations."""
    cached = prompt_logits(model, prompt, chat)
    class_first, share, model_first, probability = first_tokens(cached.logits, cached.token_ids, dict(votes), params)
    return SideBySide(
        continuation(model, prompt, chat, class_first, params),
        continuation(model, prompt, chat, model_first, params),
        share,
        probability,
    )


def prepare_be_the_model(model: str, step: Step, voted: list[int] | None = None) -> None:
    """The model's continuation and those of the tokens voted so far, computed while the class answers (on the
    teacher's page), so the reveal finds them cached."""
    prompt, chat = step.state["prompt"], bool(step.state.get("chat", False))
    params = be_the_model_params(step)
    cached = prompt_logits(model, prompt, chat)
    model_first = first_tokens(cached.logits, cached.token_ids, {0: 1}, params)[2]  # the votes play no part in it
    for first in [model_first, *(voted or [])]:
        continuation(model, prompt, chat, first, params)


def be_the_model(model: str, step: Step, given: list[str]) -> None:
    """Both continuations side by side: the class's first token drawn from its votes, the model's from its
    probabilities (the same seeded u), then each continued by the model."""
    prompt, chat = step.state["prompt"], bool(step.state.get("chat", False))
    params = be_the_model_params(step)
    side = side_by_side(model, prompt, chat, vote_tally(model, step, given), params)
    st.markdown(f"**Be the model:** {GROWN_TOKENS} tokens on, from the class's vote and from the model's draw.")
    for column, label, ids, first in zip(
        st.columns(2),
        ("The class's continuation", "The model's continuation"),
        (side.class_ids, side.model_ids),
        (f"{side.class_first_share:.0%} of the votes", f"probability {side.model_first_prob:.0%}"),
        strict=True,
    ):
        texts = token_texts(model, ids)
        with column:
            st.markdown(f"*{label}*")
            st.code(prompt + "".join(texts), language=None, wrap_lines=True)
            st.caption(f"First token {fmt.quoted_text(texts[0])} ({first}); then the model, seed {params.seed}.")
