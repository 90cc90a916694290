"""The class experiments on screen: the teacher's round controls, "Draw for the class", "Guess the next token",
and the live class views (fragments that reread the room every ``REFRESH_S`` seconds).

Used by the Class page (``pages/85_class.py``) and the Sampling page's "Draw for the class". The numbers
come from ``ui.compute_class``; a student acts only on its own draws and its own guess (``classroom.student_id``),
and only the teacher's session starts a round or reveals the answer.
"""
from __future__ import annotations

import streamlit as st

from inference import PromptError, TokenizerError
from ui import charts, classroom, models, sampling_controls, state
from ui.claims import classroom as claims
from ui.claims.predicting import histogram_sentence
from ui.compute_class import DRAWS_PER_PRESS, guess_view, pooled_histogram, student_draws
from ui.compute_logits import params_from_key, params_key, prompt_logits
from ui.figures import classroom as figs
from ui.figures import sampling as sampling_figs
from ui.figures.logits import visible_token
from ui.resources import engine_for
from ui.room import Experiment, RoomError

REFRESH_S = 2.0  # the class views reread the room this often (each reread is one small fragment run)
DRAW_MESSAGE, GUESS_MESSAGE, TEACHER_MESSAGE = "_class_draw_message", "_class_guess_message", "_class_teacher_message"


def current_experiment() -> Experiment | str:
    """This session's model, prompt and sampling settings as a round's experiment, or why they cannot be one."""
    model = models.current()
    prompt, chat = str(state.get(state.PROMPT) or ""), bool(state.get(state.CHAT))
    try:
        prompt_logits(model, prompt, chat)
    except (PromptError, TokenizerError) as error:
        return f"this prompt cannot run: {error}"
    settings = sampling_controls.stored_settings(engine_for(model).config.vocab_size)
    if settings.params is None:
        return settings.error or "the sampling settings are not valid"
    return Experiment(model, prompt, chat, params_key(settings.params))


def _describe(experiment: Experiment) -> str:
    pieces = prompt_logits(experiment.model, experiment.prompt, experiment.chat).token_strings
    return (f"the next token after “…{visible_token(pieces[-1])}” ({experiment.model}, "
            f"{sampling_controls.summary(params_from_key(experiment.key)).rsplit(', seed', 1)[0]})")


# -- the teacher ----------------------------------------------------------------------------------
def _start(kind: str) -> None:
    if not classroom.is_teacher():  # only a teacher session draws this button; checked again here
        return
    experiment = current_experiment()
    if isinstance(experiment, str):
        st.session_state[TEACHER_MESSAGE] = f"No round started: {experiment}."
        return
    room = classroom.room()
    room.new_draw_round(experiment) if kind == "draw" else room.new_guess_round(experiment)


def _reveal() -> None:
    rnd = classroom.room().guess_round()
    if classroom.is_teacher() and rnd is not None:
        classroom.room().reveal(rnd.round_id)


def teacher_controls(kinds: tuple[str, ...] = ("draw", "guess")) -> None:
    """The teacher's buttons: a new round on the teacher's own prompt and settings (the old one is reset)."""
    if not classroom.is_teacher():
        return
    row = st.container(horizontal=True)
    if "draw" in kinds:
        row.button("New draw round on my prompt and settings", key="class_new_draws", on_click=_start, args=("draw",),
                   type="primary")
    if "guess" in kinds:
        row.button("New guess round on my prompt", key="class_new_guesses", on_click=_start, args=("guess",))
        rnd = classroom.room().guess_round()
        row.button("Reveal the model's answer", key="class_reveal", on_click=_reveal,
                   disabled=rnd is None or rnd.revealed)
    message = st.session_state.pop(TEACHER_MESSAGE, None)
    if message:
        st.error(message)


# -- draw for the class ---------------------------------------------------------------------------
def _draw(round_id: str) -> None:
    room, student = classroom.room(), classroom.student_id()
    rnd = room.draw_round()
    if rnd is None or rnd.round_id != round_id:
        st.session_state[DRAW_MESSAGE] = "That round is over: the teacher started a new one."
        return
    first = room.draws_of(round_id, student)  # this student's next draw number: counted draws are never redone
    try:
        room.add_draws(round_id, student, first, student_draws(rnd.experiment, round_id, student, first, DRAWS_PER_PRESS))
    except RoomError as error:
        st.session_state[DRAW_MESSAGE] = str(error)


def draw_panel() -> None:
    """The student's button and the live pooled histogram."""
    rnd = classroom.room().draw_round()
    if rnd is None:
        st.info("No class draw yet: the teacher starts one on their prompt and settings.", icon=":material/groups:")
        return
    st.markdown(f"Everyone draws {_describe(rnd.experiment)}, each from their own seed.")
    st.button(f"Draw {DRAWS_PER_PRESS} for the class", key="class_draw", on_click=_draw, args=(rnd.round_id,),
              type="primary")
    message = st.session_state.pop(DRAW_MESSAGE, None)
    if message:
        st.warning(message)
    _live_draws()


@st.fragment(run_every=REFRESH_S)
def _live_draws() -> None:
    rnd = classroom.room().draw_round()
    if rnd is None:
        return
    mine = len(rnd.draws.get(classroom.student_id(), ()))
    pooled = pooled_histogram(rnd.experiment, rnd.counts())
    n_students = sum(bool(tokens) for tokens in rnd.draws.values())
    st.caption(f"Your draws in this round: {mine:,} (draw numbers 0…{mine - 1} of your seed; each counts once, "
               "also after a reload)." if mine else
               "You have no draws in this round yet; each one you make counts once, also after a reload.")
    gof = pooled.gof
    charts.show(sampling_figs.make_draw_histogram(pooled.labels, pooled.observed.tolist(), pooled.expected.tolist(),
                                                  pooled.n_draws, gof.statistic, gof.dof, gof.p_value,
                                                  who=f"The class ({n_students} student{'s' * (n_students != 1)}): "),
                key="class_histogram",
                data=sampling_figs.histogram_table(pooled.labels, pooled.observed.tolist(), pooled.expected.tolist(),
                                                   pooled.n_draws))
    gaps = abs(pooled.observed - pooled.expected)
    widest = int(gaps.argmax())
    st.markdown(claims.pooled_sentence(pooled.n_draws, n_students, float(gaps[widest]), pooled.labels[widest]))
    if pooled.n_draws and not gof.dof and len(pooled.labels) > 1:
        st.markdown(claims.too_few_sentence(pooled.n_draws))
    elif pooled.n_draws:
        st.markdown(histogram_sentence(gof.n_bins, gof.statistic, gof.dof, gof.p_value))


# -- guess the next token -------------------------------------------------------------------------
def _guess(round_id: str) -> None:
    text = st.session_state.get("_w_class_guess", "")
    try:
        classroom.room().guess(round_id, classroom.student_id(), text)
    except RoomError as error:
        st.session_state[GUESS_MESSAGE] = str(error)


def guess_panel() -> None:
    """The student's guess box (until the reveal) and the live class view."""
    rnd = classroom.room().guess_round()
    if rnd is None:
        st.info("No guess round yet: the teacher starts one on their prompt.", icon=":material/groups:")
        return
    st.markdown(f"What is {_describe(rnd.experiment).split(' (', 1)[0]}? The prompt (its end) is below; guess before "
                "the teacher reveals the answer.")
    st.code(rnd.experiment.prompt[-300:], language=None, wrap_lines=True)  # the prompt as text, never markdown
    if not rnd.revealed:
        row = st.container(horizontal=True, vertical_alignment="bottom")
        row.text_input("Your guess (one word)", key="_w_class_guess", max_chars=40)
        row.button("Send my guess", key="class_guess", on_click=_guess, args=(rnd.round_id,))
    message = st.session_state.pop(GUESS_MESSAGE, None)
    if message:
        st.warning(message)
    mine = rnd.guesses.get(classroom.student_id())
    if mine is not None:
        st.caption(f"Your guess: `{mine!r}`" + ("" if rnd.revealed else " (you can change it until the reveal)."))
    _live_guesses()


@st.fragment(run_every=REFRESH_S)
def _live_guesses() -> None:
    rnd = classroom.room().guess_round()
    if rnd is None:
        return
    if not rnd.revealed:
        n = len(rnd.guesses)
        st.markdown(f"**{n:,} guess{'es' * (n != 1)} in.** The class view appears when the teacher reveals the answer.")
        return
    view = guess_view(rnd.experiment, list(rnd.guesses.values()))
    charts.show(figs.make_guesses(view.labels, view.class_share.tolist(), view.model_prob.tolist(), view.n_guesses),
                key="class_guesses",
                data=figs.guesses_table(view.labels, view.class_share.tolist(), view.model_prob.tolist()))
    st.markdown(claims.guesses_sentence(view.n_guesses, view.top_token, view.top_prob, view.top_guessed,
                                        view.most_guessed, view.most_guessed_count, view.most_guessed_prob,
                                        view.several_tokens))
