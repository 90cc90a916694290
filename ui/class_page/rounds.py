"""The class experiments on screen: the teacher's round controls, "Draw for the class", "Guess the next token",
and the live class views.

Used by the Class page (``pages/class.py``) and the Sampling page's "Draw for the class". The numbers
come from ``ui.class_page.draws``; a student acts only on its own draws and its own guess (``broadcast.student_id``),
and only the teacher's session starts a round or reveals the answer.

A page draws one round's text, controls and chart together, and tells the tab's heartbeat which rounds it drew
(``broadcast.show_rounds``): when the teacher starts a round or reveals the answer, every open page reruns within
``broadcast.POLL_S`` seconds and draws the new state whole. The counts in between come from small fragments that
reread the room every ``REFRESH_S`` seconds; such a fragment that finds another round than its page drew reruns
the page instead of drawing it under the old text.

While the room cannot answer (``RoomUnavailable``: a shared room's Redis out of reach), each class panel says it is
paused in its place (``_class_panel``), a press is refused with a message and counts nothing, and the tab's
heartbeat reruns the page when the room answers again.

The teacher does not draw or guess: the pooled bars and the guesses are the students' only, so "by N students"
is always true, and the teacher's presses cannot tilt what the class is asked to read.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

import streamlit as st

from inference.api import PromptError, TokenizerError
from ui.class_page import broadcast, claims
from ui.class_page import figures as figs
from ui.class_page.draws import (
    DRAWS_PER_PRESS,
    guess_view,
    kept_logits,
    pooled_bins,
    pooled_histogram,
    start_draw_round,
    student_draws,
)
from ui.classroom.room import Experiment, RoomError, RoomUnavailable
from ui.common import charts, models, state
from ui.common import format as fmt
from ui.common.resources import client_for
from ui.logits.compute import prompt_logits
from ui.sampling import controls as sampling_controls
from ui.sampling import figures as sampling_figs
from ui.sampling.claims import histogram_sentence

REFRESH_S = 2.0  # the live counts reread the room this often (each reread is one small fragment run)
PROMPT_END_CHARS = 40  # the sentences quote the prompt's end, at most this long
NO_DRAW_ROUND = "No class draw yet: the teacher starts one on their prompt and settings."
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$])")


def _class_panel(draw: Callable[..., None]) -> Callable[..., None]:
    """A class panel that, while the room cannot answer, says the class is paused in its place (with the message of
    a press the room refused meanwhile), and has the tab's heartbeat rerun the page when the room is back."""

    @functools.wraps(draw)
    def guarded(*args, **kwargs) -> None:
        try:
            draw(*args, **kwargs)
        except RoomUnavailable as error:
            st.session_state[state.CLASS_PAUSED] = True
            if st.session_state.get(state.CLASS_PAUSED_SHOWN):  # said in full above on this page: once is enough
                st.caption(":material/cloud_off: Paused, as the class panel above says.")
            else:
                st.session_state[state.CLASS_PAUSED_SHOWN] = True
                st.warning(broadcast.paused(error), icon=":material/cloud_off:")
            message = st.session_state.pop(state.CLASS_TEACHER_MESSAGE, None)
            if message:
                st.error(message)
            for key in (state.CLASS_DRAW_MESSAGE, state.CLASS_GUESS_MESSAGE):
                _held_notice(key)

    return guarded


def _held_notice(key: str) -> None:
    """A student's message about their own press, kept in the session until their next press of that kind replaces
    it: a rerun (the heartbeat's when the room answers again, a new round) never wipes it before it is read."""
    message = st.session_state.get(key)
    if not message:
        return
    kind, text = message if isinstance(message, tuple) else ("warning", message)
    getattr(st, kind)(text, icon=":material/error:" if kind == "error" else None)


def _refused(what: str, error: RoomUnavailable) -> str:
    return f"{what}: the class room cannot answer now ({error}). Nothing was counted; try again when it is back."


def current_experiment() -> Experiment | str:
    """This session's model, prompt and sampling settings as a round's experiment, or why they cannot be one."""
    model = models.current()
    prompt, chat = str(state.get(state.PROMPT) or ""), bool(state.get(state.CHAT))
    try:
        prompt_logits(model, prompt, chat)
    except (PromptError, TokenizerError) as error:
        return f"this prompt cannot run: {error}"
    settings = sampling_controls.stored_settings(client_for(model).info.config.vocab_size)
    if settings.params is None:
        return settings.error or "the sampling settings are not valid"
    return Experiment(model, prompt, chat, settings.params.canonical())


def prompt_end(prompt: str, limit: int = PROMPT_END_CHARS) -> str:
    """The prompt's last words as Markdown-safe text ("…sat on the"), whitespace runs as one space."""
    text = " ".join(prompt.split())
    if len(text) > limit:
        cut = text[-limit:]
        text = "…" + (cut.split(" ", 1)[1] if " " in cut[1:] else cut)
    return _MARKDOWN.sub(r"\\\1", text)


def next_token_phrase(experiment: Experiment) -> str:
    """What a round asks about, in words: "the next token after “…sat on the”" (the reply's first with chat)."""
    if experiment.chat:
        return f"the first token of the model's reply to “{prompt_end(experiment.prompt)}” (chat template)"
    return f"the next token after “{prompt_end(experiment.prompt)}”"


def describe(experiment: Experiment) -> str:
    """The round's question with its model and sampling settings (the seed is each student's own)."""
    settings = sampling_controls.summary(experiment.params).rsplit(", seed", 1)[0]
    return f"{next_token_phrase(experiment)} ({experiment.model}, {settings})"


# -- the teacher ----------------------------------------------------------------------------------
def _start(kind: str, shown: str | None) -> None:
    """The teacher's press: a new round of ``kind`` replacing ``shown``, the round the page showed (a press that
    Streamlit delivers twice, under load, then starts one round, not two)."""
    if not broadcast.is_teacher():  # only a teacher session draws this button; checked again here
        return
    experiment = current_experiment()
    if isinstance(experiment, str):
        st.session_state[state.CLASS_TEACHER_MESSAGE] = f"No round started: {experiment}."
        return
    room = broadcast.room()
    try:
        if kind == "draw":
            start_draw_round(room, experiment, replacing=shown)
        else:
            room.new_guess_round(experiment, replacing=shown)
    except RoomUnavailable as error:
        st.session_state[state.CLASS_TEACHER_MESSAGE] = _refused("No round started", error)


def _reveal() -> None:
    try:
        rnd = broadcast.room().guess_round()
        if broadcast.is_teacher() and rnd is not None:
            broadcast.room().reveal(rnd.round_id)
    except RoomUnavailable as error:
        st.session_state[state.CLASS_TEACHER_MESSAGE] = _refused("The answer was not revealed", error)


def watch(kinds: tuple[str, ...]) -> None:
    """Every tab on a page that shows these kinds of round: its heartbeat reruns the page when the room's differ
    from these. Recorded before anything is drawn, so a page run cut short still watches every kind it shows
    (the panels record what they drew again, which can only be newer)."""
    now = broadcast.room().rounds()
    fields = (("draw_id",) if "draw" in kinds else ()) + (("guess_id", "revealed") if "guess" in kinds else ())
    broadcast.show_rounds(**{name: getattr(now, name) for name in fields})


def _new_round_button(row, kind: str, shown: str | None, label: str, key: str, dropped: str, **button: Any) -> None:
    """The teacher's button that starts a new round of ``kind`` in place of ``shown`` (``_start``); ``dropped``
    says what of the old round is lost."""
    row.button(label, key=key, on_click=_start, args=(kind, shown), help=f"Starts afresh: {dropped}", **button)


@_class_panel
def teacher_controls(kinds: tuple[str, ...] = ("draw", "guess")) -> None:
    """The head of a page with class rounds: every tab watches the rounds of ``kinds`` (``watch``); the teacher
    also gets the buttons, a new round on the teacher's own prompt and settings (the old one is reset)."""
    watch(kinds)
    if not broadcast.is_teacher():
        return
    now = broadcast.room().rounds()
    row = st.container(horizontal=True)
    if "draw" in kinds:
        _new_round_button(
            row,
            "draw",
            now.draw_id,
            "New draw round on my prompt and settings",
            state.CLASS_NEW_DRAWS,
            "the current draw round's draws are dropped.",
            type="primary",
        )
    if "guess" in kinds:
        _new_round_button(
            row,
            "guess",
            now.guess_id,
            "New guess round on my prompt",
            state.CLASS_NEW_GUESSES,
            "the current guess round's guesses are dropped and the box opens again.",
        )
        rnd = broadcast.room().guess_round()
        row.button(
            "Reveal the model's answer", key=state.CLASS_REVEAL, on_click=_reveal, disabled=rnd is None or rnd.revealed
        )
    experiment = current_experiment()
    if isinstance(experiment, str):
        st.caption(f"A new round cannot start on your view now: {experiment}.")
    else:
        st.caption(
            f"A new round asks the class for {describe(experiment)}: your prompt and settings now. "
            "You do not draw or guess yourself: the bars and the guesses are the students' only."
        )
    message = st.session_state.pop(state.CLASS_TEACHER_MESSAGE, None)
    if message:
        st.error(message)


# -- draw for the class ---------------------------------------------------------------------------
def _draw(shown_round: str, shown_mine: int) -> None:
    """A student's press: ten more draws of its own seed, in the round the room holds now. ``shown_mine`` is the
    student's count the page showed: a press delivered twice (a double click, or Streamlit replaying a click
    under load) finds more by now and adds nothing."""
    if broadcast.is_teacher():
        return
    st.session_state.pop(state.CLASS_DRAW_MESSAGE, None)  # this press's own message replaces the last one
    try:
        _count_draws(shown_round, shown_mine)
    except RoomUnavailable as error:
        st.session_state[state.CLASS_DRAW_MESSAGE] = (
            "error",
            f"Your press was not counted: the class room could not answer ({str(error).rstrip('.')}). Press again when the class "
            "is back (this note stays until you press).",
        )


def _count_draws(shown_round: str, shown_mine: int) -> None:
    room, student = broadcast.room(), broadcast.student_id()
    rnd = room.draw_view(student)
    if rnd is None:
        st.session_state[state.CLASS_DRAW_MESSAGE] = (
            "warning",
            "Your press was not counted: the room holds no draw round now. Press again once the teacher starts one.",
        )
        return
    first = room.draws_of(rnd.round_id, student)  # this student's next draw number: counted draws are never redone
    if first != (shown_mine if rnd.round_id == shown_round else 0):
        return  # this press was counted already (in a round started after the page was drawn: it had none there)
    if rnd.round_id != shown_round:  # the teacher started a round just before this press: it counts in that one
        st.session_state[state.CLASS_DRAW_MESSAGE] = (
            "info",
            "The teacher had just started a new draw round: your press counts in it (the text above now describes it).",
        )
    try:
        logits = kept_logits(room, rnd.round_id)  # the round's own: a recount from the seed reads the same
        room.add_draws(
            rnd.round_id,
            student,
            first,
            student_draws(logits, rnd.experiment, rnd.round_id, student, first, DRAWS_PER_PRESS),
        )
    except RoomError as error:
        st.session_state[state.CLASS_DRAW_MESSAGE] = (
            "warning",
            f"Your press was not counted: {str(error).rstrip('.')}. Press again.",
        )


@_class_panel
def draw_panel() -> None:
    """The round's question, the student's button and the live pooled histogram."""
    rnd = broadcast.room().draw_view(broadcast.student_id())
    # No round readable: what ``watch`` recorded stays (a shared room's round whose data cannot be read is shown as
    # no round, while the room's ids still name it: recording None would have the heartbeat rerun on every tick).
    broadcast.show_rounds(keep=rnd is None, draw_id=rnd.round_id if rnd else None)
    if rnd is None:
        st.info(NO_DRAW_ROUND, icon=":material/groups:")
        return
    st.markdown(f"**Draw round {rnd.number}:** everyone draws {describe(rnd.experiment)}, each from their own seed.")
    _live_draws(rnd.round_id)


@st.fragment(run_every=REFRESH_S)
@_class_panel
def _live_draws(round_id: str) -> None:
    rnd = broadcast.room().draw_view(broadcast.student_id())
    if rnd is None or rnd.round_id != round_id:
        st.rerun()  # the page's text describes another round: redraw the page
    teacher = broadcast.is_teacher()
    mine = rnd.mine
    if teacher:
        st.caption(f"Your students press **Draw {DRAWS_PER_PRESS} for the class** on their own laptops.")
    else:
        st.button(
            f"Draw {DRAWS_PER_PRESS} for the class",
            key=state.CLASS_DRAW,
            on_click=_draw,
            args=(round_id, mine),
            type="primary",
        )
    _held_notice(state.CLASS_DRAW_MESSAGE)
    try:
        pooled = pooled_histogram(broadcast.room(), rnd.round_id, rnd.experiment, rnd.pooled)
    except (
        KeyError,
        RoomError,
    ):  # a shared room's counts name a token this experiment never draws: data that cannot be read
        st.info(NO_DRAW_ROUND, icon=":material/groups:")
        return
    n_students = rnd.students
    if not teacher:
        st.caption(claims.own_draws_sentence(mine))
    gof = pooled.gof
    charts.show(
        sampling_figs.histogram_chart(pooled, who=f"The class ({n_students} student{'s' * (n_students != 1)}): "),
        key="class_histogram",
    )
    gaps = abs(pooled.observed - pooled.expected)
    widest = int(gaps.argmax())
    text = claims.pooled_sentence(pooled.n_draws, n_students, float(gaps[widest]), pooled.labels[widest])
    if pooled.n_draws and not gof.dof and len(pooled.labels) > 1:
        text += " " + claims.too_few_sentence(pooled.n_draws)
    elif pooled.n_draws and gof.dof:
        plan = pooled_bins(broadcast.room(), rnd.round_id, rnd.experiment, pooled.n_draws)
        text += (
            "\n\n"
            + claims.bins_sentence(len(pooled.labels), plan)
            + " "
            + histogram_sentence(gof.n_bins, gof.statistic, gof.dof, gof.p_value)
        )
    st.markdown(text + claims.space_note(pooled.labels))


# -- guess the next token -------------------------------------------------------------------------
def _guess(shown_round: str) -> None:
    if broadcast.is_teacher():
        return
    st.session_state.pop(state.CLASS_GUESS_MESSAGE, None)  # this guess's own message replaces the last one
    text = st.session_state.get(state.class_guess_box(shown_round), "")
    try:
        rnd = broadcast.room().guess_round()
        if rnd is not None and rnd.round_id == shown_round:
            broadcast.room().guess(shown_round, broadcast.student_id(), text)
    except RoomUnavailable as error:
        st.session_state[state.CLASS_GUESS_MESSAGE] = (
            f"Your guess was not sent: the class room could not answer ({str(error).rstrip('.')}). It is still in the box: send it "
            "again when the class is back."
        )
        return
    except RoomError as error:
        st.session_state[state.CLASS_GUESS_MESSAGE] = str(error).capitalize() + "."
        return
    if rnd is None or rnd.round_id != shown_round:
        st.session_state[state.CLASS_GUESS_MESSAGE] = (
            "The teacher started a new guess round just before you sent your guess: "
            "read its prompt below and guess again."
        )


@_class_panel
def guess_panel() -> None:
    """The round's question, the student's guess box (closed at the reveal) and the live class view."""
    rnd = broadcast.room().guess_round()
    broadcast.show_rounds(keep=rnd is None, guess_id=rnd.round_id if rnd else None, revealed=bool(rnd and rnd.revealed))
    if rnd is None:
        st.info("No guess round yet: the teacher starts one on their prompt.", icon=":material/groups:")
        return
    st.markdown(
        f"**Guess round {rnd.number}:** what is {next_token_phrase(rnd.experiment)} for "
        f"{rnd.experiment.model}? The prompt (its end) is below; "
        + ("the teacher has revealed the answer." if rnd.revealed else "guess before the teacher reveals it.")
    )
    # The prompt as plain text, never Markdown; st.text, not st.code: a code block loads the syntax highlighter's
    # scripts the first time a tab shows one, which delays the round reaching it (docs/classroom.md measures it).
    st.container(border=True).text(rnd.experiment.prompt[-300:])
    mine = rnd.guesses.get(broadcast.student_id())
    if broadcast.is_teacher():
        st.caption(
            "Your students type their guesses on their own laptops; you reveal the answer when the room is ready."
        )
    else:
        _guess_box(rnd.round_id, rnd.revealed, mine)
    _held_notice(state.CLASS_GUESS_MESSAGE)
    if mine is not None and not broadcast.is_teacher():
        st.caption(
            f"Your guess: {fmt.quoted_text(mine)}"
            + (" (guessing is closed)." if rnd.revealed else " (send another to change it, until the reveal).")
        )
    _live_guesses(rnd.round_id, rnd.revealed)


def _guess_box(round_id: str, revealed: bool, mine: str | None) -> None:
    """The student's guess box: the same widget open and closed, so the text typed but not sent when the teacher
    reveals stays in it (the browser keeps a widget's unsent text while its key is the same), and the page says
    it was not sent. A box never drawn open (a tab opened after the reveal) shows the guess sent, if any."""
    box = state.class_guess_box(round_id)
    saw_it_open = box in st.session_state
    if revealed and not saw_it_open:
        st.session_state[box] = mine or ""
    with st.form(state.CLASS_GUESS_FORM, border=False, enter_to_submit=True):
        row = st.container(horizontal=True, vertical_alignment="bottom")
        row.text_input(
            "Your guess (closed: the answer is out)" if revealed else "Your guess (one word; Enter sends it)",
            key=box,
            max_chars=40,
            disabled=revealed,
            placeholder="you sent no guess in this round" if revealed else None,
        )
        row.form_submit_button(
            "Closed" if revealed else "Send my guess",
            key=state.CLASS_GUESS,
            on_click=_guess,
            args=(round_id,),
            disabled=revealed,
        )
    if revealed and saw_it_open:
        st.caption(
            ":material/info: Guessing closed when the teacher revealed the answer: text still in the box that you "
            "had not sent was **not sent**"
            + (
                f" (your guess sent before was {fmt.quoted_text(mine)})."
                if mine is not None
                else "; you sent no guess this round."
            )
        )


@st.fragment(run_every=REFRESH_S)
@_class_panel
def _live_guesses(round_id: str, revealed: bool) -> None:
    rnd = broadcast.room().guess_round()
    if rnd is None or rnd.round_id != round_id or rnd.revealed != revealed:
        st.rerun()  # a new round or the reveal: redraw the page (the box closes, the question changes)
    if not revealed:
        n = len(rnd.guesses)
        st.markdown(f"**{n:,} guess{'es' * (n != 1)} in.** The class view appears when the teacher reveals the answer.")
        return
    view = guess_view(rnd.experiment, list(rnd.guesses.values()))
    charts.show(
        figs.guesses(view.labels, view.class_share.tolist(), view.model_prob.tolist(), view.n_guesses),
        key="class_guesses",
    )
    st.markdown(
        claims.guesses_sentence(
            view.n_guesses,
            view.top_token,
            view.top_prob,
            view.top_guessed,
            view.most_guessed,
            view.most_guessed_count,
            view.most_guessed_prob,
            view.several_tokens,
        )
        + claims.space_note(view.labels)
    )
