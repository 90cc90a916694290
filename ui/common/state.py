"""The registry of session keys: every name a browser session's state is kept under, defined once, here.

Pages, controls and helpers use these names, never a string: a test (``tests/test_state_keys.py``)
fails on a literal key anywhere else in ``ui/``, ``pages/`` and ``app.py``. Each group below is one
part of the app; a name's comment says what its value holds. Widgets' keys are session keys too
(Streamlit keeps a widget's value under its key), so they live here as well; a chart's key names
the chart and its files (``ui.common.charts.show``), not a value, and is written where it is drawn.

The prompt, the seed and the chat-template toggle live under plain (non-widget) keys, so they
survive page switches. Streamlit drops a widget's own key when that widget is not rendered on the
current page; a widget bound with ``bind`` therefore gets a shadow key (``_w_<key>``) that is refilled
from the plain key before the widget is drawn and copied back by ``on_change``:

    st.text_area("Prompt", **state.bind(state.PROMPT))
"""

from __future__ import annotations

from typing import Any

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

# -- what every page shares (the sidebar) ---------------------------------------------------
PROMPT = "prompt"  # str: the text every page runs through the model
SEED = "seed"  # int: seed for anything random (sampling, projections)
CHAT = "chat"  # bool: wrap the prompt in the model's chat template
PRESENTER = "presenter"  # bool: projector layout (bigger text and charts, fewer controls, Previous/Next)
MODEL = "model"  # str: the chosen model's name (one of ``ui.common.models.allowlist()``)
PAGE = "_page"  # str: url path of the page being run (``ui.common.navigation.current_url_path``)
SLIDERS_ON = "_sliders_on"  # dict[str, str]: a bound slider's widget key -> the page (script hash) it was last drawn on

# -- the shareable link (ui/session/links.py) --------------------------------------------------
LINK_RESTORED = "_url_restored"  # bool: this session's link was read
LINK_NOTES = "_url_notes"  # list[str]: what was not used of the link as given
LINK_NOTES_DISMISS = "url_notes_dismiss"  # button


# -- every chart's CSV download (ui/common/charts.py) ---------------------------------------------------------
def csv_button(chart_key: str) -> str:
    """The "Download CSV" button under the chart drawn with ``chart_key``."""
    return f"{chart_key}_csv"


# -- the sampling controls (ui/sampling/controls.py; the Logits, Sampling and Generation pages) ------------
TEMPERATURE, TOP_K, TOP_P, MIN_P, REPETITION_PENALTY = "temperature", "top_k", "top_p", "min_p", "repetition_penalty"

# -- the example prompt button (ui/common/example_prompt.py) ---------------------------------------------
EXAMPLE_PREVIOUS = "_example_previous"  # (prompt, chat) from before the example was put in


def use_example_button(page: str) -> str:
    return f"use_example_prompt_{page}"


def restore_prompt_button(page: str) -> str:
    return f"restore_prompt_{page}"


# -- Tokenization -----------------------------------------------------------------------------
TOK_ID_WORD = "tok_id_word"  # str: the word whose id neighbours are shown
TOK_COMPARE = "tok_compare"  # str: the text through the three tokenizers
TOK_CORPUS = "tok_corpus"  # str: the paragraph the word vocabulary and the tiny BPE learn from
TOK_BPE_WORD = "tok_bpe_word"  # str: the word built merge by merge
TOK_VOCAB = "tok_vocab"  # int: the tiny BPE's vocabulary size

# -- Embeddings -------------------------------------------------------------------------------
EMB_TOKEN = "emb_token"  # int: the position whose vector and neighbours are shown
EMB_WORDS = "emb_words"  # str: the words added to the map, comma-separated
EMB_ROPE_KIND = "emb_rope_kind"  # str: "local layers" or "global layers" (models with two RoPE bases)

# -- Attention --------------------------------------------------------------------------------
ATT_LAYER = "att_layer"  # int
ATT_HEAD = "att_head"  # int
ATT_QUERY = "att_query"  # int: the query of the step-by-step section (default: the page's own per prompt)
ATT_WINDOW_LOCAL = "att_window_local"  # int: the local layer drawn past the window
ATT_WINDOW_GLOBAL = "att_window_global"  # int: the global layer drawn past the window
ATT_LONG_PROMPT = "att_long_prompt"  # button: a prompt longer than the window
ATT_HEAD_ON, ATT_HEAD_OFF = "att_head_on", "att_head_off"  # buttons: the head on screen back on / off
ATT_HEADS_IT_CAT = "att_heads_it_cat"  # button: every head that sends the pronoun to its word off
ATT_HEADS_RESET = "att_heads_reset"  # button: every head back on
ATT_USE_TWO_NOUNS = "att_use_two_nouns"  # button: the example with a pronoun and two candidate nouns


def att_show_button(noun: str) -> str:
    """The button that shows the head sending the pronoun to ``noun`` (a word, or its start offset) most."""
    return f"att_show_{noun}"


# -- Transformer block & logit lens ------------------------------------------------------------
BLOCK_LAYER = "block_layer"  # int: the block walked
LENS_USE_EXAMPLE = "lens_use_example"  # button: the model's own "where it takes over" example

# -- Experiments (the experiment itself: ui/experiments/settings.py; the Attention page's head switch too) --
EXP_HEADS = "exp_heads"  # tuple[(layer, head), ...]: the heads changed
EXP_HEAD_MODE = "exp_head_mode"  # "zero", "mean" or "scale"
EXP_HEAD_FACTOR = "exp_head_factor"  # the scale for "scale"
EXP_EDGES = "exp_edges"  # tuple[(query, key), ...]: attention edges cut in every layer and head
EXP_MLPS = "exp_mlps"  # tuple[layer, ...]: MLPs changed
EXP_MLP_FACTOR = "exp_mlp_factor"  # 0 = off
EXP_TARGET = "exp_target"  # text of the token the sweeps and the attribution follow ("" = the model's top guess)
EXP_CLEAN = "exp_clean"  # activation patching: the clean prompt
EXP_CORRUPT = "exp_corrupt"  # ... and the corrupted one
EXP_SWEEP = "exp_sweep"  # bool: the head-importance sweep was asked for
EXP_PATCHING = "exp_patching"  # bool: the patching sweep was asked for
EXP_CUT_QUERY, EXP_CUT_KEY = "exp_cut_query", "exp_cut_key"  # the edge being chosen (not part of the experiment yet)
EXP_CUT_ERROR = "_exp_cut_error"  # bool: the last edge chosen could not be cut (shown once)
EXP_CUT_ADD = "exp_cut_add"  # button
EXP_CLEAR = "exp_clear"  # button
EXP_USE_EXAMPLE = "exp_use_example"  # button
EXP_SWEEP_RUN, EXP_PATCH_RUN = "exp_sweep_run", "exp_patch_run"  # buttons

# -- Logits & temperature ---------------------------------------------------------------------
COMPARE_TEMPERATURE = "compare_temperature"  # float: the temperature the overlay compares with

# -- Sampling ---------------------------------------------------------------------------------
DRAW_INDEX = "sampling_draw_index"  # int: the draw shown ("Draw again" adds one)
SHOW_HISTOGRAM = "sampling_show_histogram"  # bool: the 1,000 draws were asked for
DRAW_AGAIN, DRAW_RESET, DRAW_1000 = "draw_again", "draw_reset", "draw_1000"  # buttons
COMPARE_T_A, COMPARE_T_B = "compare_t_a", "compare_t_b"  # float: the two temperatures of settings A and B

# -- Generation & KV cache (the walk's controller: ui/generation/walk.py) ----------------------------------
GEN_STEPPER = "gen_stepper"  # inference.Stepper: this session's walk (its own KV cache)
GEN_TIMING = "gen_timing"  # (prompt ids, CacheTiming): the last cached-vs-uncached measurement
GEN_ERROR = "gen_error"  # str: the last action's error message, shown once
GEN_PENDING = "gen_pending"  # "run" or "measure": a long action the page runs with a progress bar
# A walk restored from a shared link: its length, forced tokens and the (prompt, chat) it was for
GEN_REPLAY_STEPS, GEN_REPLAY_FORCED, GEN_REPLAY_PROMPT = "gen_replay_steps", "gen_replay_forced", "gen_replay_prompt"
GEN_N = "gen_n"  # int: how many tokens "Run N" adds
GEN_REWIND_TO = "gen_rewind_to"  # int: the step "Rewind" keeps
GEN_FORCE = "gen_force"  # str: the token "Force it" feeds
GEN_LAYER = "gen_layer"  # int: the layer whose cache is drawn
GEN_TIMING_N = "gen_timing_n"  # int: tokens the measurement generates
GEN_NEXT, GEN_RUN, GEN_RESTART, GEN_REWIND, GEN_FORCE_GO, GEN_MEASURE = (  # buttons
    "gen_next",
    "gen_run",
    "gen_restart",
    "gen_rewind",
    "gen_force_go",
    "gen_measure",
)

# -- Speculative decoding (pages/speculative.py) -------------------------------------------------------
SPEC_DRAFTER = "spec_drafter"  # str: "lookup" or "self"
SPEC_DRAFT_TOKENS = "spec_draft_tokens"  # int: tokens drafted per step
SPEC_NGRAM = "spec_ngram"  # int: prompt lookup's longest n-gram (0 is refused by the engine, with its message)
SPEC_DEPTH = "spec_depth"  # int: self-speculation's draft depth k (0 or the model's depth: refused, with a message)
SPEC_NEW_TOKENS = "spec_new_tokens"  # int: new tokens of the run on screen
SPEC_FOCUS = "spec_focus"  # (step, draft): the drafted token looked at closely
SPEC_SEEDS = "spec_seeds"  # int: seeds of the χ² test
SPEC_SWEEP_FOR = "spec_sweep_for"  # tuple: the inputs the sweep was asked for (shown while they hold)
SPEC_SEEDS_FOR = "spec_seeds_for"  # tuple: the inputs the χ² test was asked for
SPEC_SWEEP_RUN, SPEC_SEEDS_RUN = "spec_sweep_run", "spec_seeds_run"  # buttons

# -- Quantization -----------------------------------------------------------------------------
QUANT_COMPARE_ON = "quant_compare_on"  # bool: the visitor asked for the prompt in every mode
QUANT_SPEED = "quant_speed"  # (model, prompt ids, {mode: tok/s}): the last measurement
QUANT_PENDING = "quant_pending"  # bool: a measurement was asked for (the page runs it with a progress bar)
QUANT_COMPARE, QUANT_MEASURE = "quant_compare", "quant_measure"  # buttons
QUANT_BLOCK_TYPE, QUANT_BLOCK_TENSOR = "quant_block_type", "quant_block_tensor"  # the block type and tensor shown

# -- Batching (the request editor's rows: ui/batching/requests.py) -------------------------------------
BATCH_REQUESTS = "batch_requests"  # the data editor's widget key (its state: the edits since it was created)
BATCH_ROWS_ORIGIN = "_batch_rows_origin"  # list[dict]: the rows the editor was created with
BATCH_ROWS_LATEST = "_batch_rows_latest"  # list[dict]: the rows as the user left them
BATCH_RESULT = "batch_comparison"  # Comparison: the last static-vs-continuous run
BATCH_CURVE = "batch_curve"  # (model, ThroughputCurve): the last throughput measurement
BATCH_PENDING, BATCH_CURVE_PENDING = "batch_pending", "batch_curve_pending"  # bool: a run was asked for
BATCH_MASK_ROW = "batch_mask_row"  # int: the request whose attention mask is drawn
BATCH_TEMPERATURE, BATCH_SLOTS, BATCH_SHARE = "batch_temperature", "batch_slots", "batch_share"  # the run's settings
BATCH_RUN, BATCH_CURVE_RUN = "batch_run", "batch_curve_run"  # buttons
BATCH_CLASS_TABS, BATCH_CLASS_RUN = "batch_class_tabs", "batch_class_run"  # identical requests: how many, the button
BATCH_CLASS_PENDING = "batch_class_pending"  # bool: the identical requests were asked for
BATCH_CLASS_RESULT = "batch_class_result"  # (model, prompt, SameRequests): the last identical requests sent

# -- Paged KV cache (pages/paged_kv.py, ui/paged_kv/) --------------------------------------------
PAGED_SCENARIO = "paged_scenario"  # str: one of ui.paged_kv.compute.SCENARIOS
PAGED_BLOCK_SIZE = "paged_block_size"  # int: positions per block
PAGED_STEP = "paged_step"  # int: the scheduler step on screen

# -- Two models side by side ------------------------------------------------------------------
CMP_LEFT, CMP_RIGHT = "cmp_left", "cmp_right"  # str: the two models' names

# -- The class (ui/classroom/: a session's side of the room, and the rounds on screen) -----------------------
CLASS_TEACHER = "_class_teacher"  # bool: True once the key was proved
CLASS_BROADCASTING = "class_broadcast"  # bool: the teacher's "Broadcast my view" toggle (its widget: widget_key)
CLASS_FOLLOW = "class_follow"  # bool: the student's "Follow the teacher" toggle (its widget: widget_key)
CLASS_APPLIED = "_class_applied"  # int: the broadcast version this follower last applied (on its page)
CLASS_ARRIVING = "_class_arriving"  # int: the broadcast version whose settings were applied (page maybe not yet)
CLASS_MESSAGE = "_class_message"  # (kind, text): in the class panel; a success once, else until its OK is pressed
CLASS_KEY_MESSAGE = "_class_key_message"  # (kind, text): a key's refusal beside the key box, until OK or the next try
CLASS_MESSAGE_OK, CLASS_KEY_MESSAGE_OK = "class_message_ok", "class_key_message_ok"  # buttons: the message was read
CLASS_TRIES = "_class_key_tries"  # int: wrong keys given in this session
CLASS_REFUSED_KEYS = "_class_refused_keys"  # set[str]: the sha256 of each wrong key this session gave (counted once)
CLASS_TEACHING_ID = "_class_teaching_id"  # str: a teacher session's id in the room's count (when it holds no token)
CLASS_STUDENT = "_class_student"  # str: this browser's student id (32 hex digits)
CLASS_TOKEN = "_class_teacher_token"  # str | None: the room-issued token this teacher session holds
CLASS_LINK_KEY = "_class_link_key"  # str: the teacher-only link's key as read (so it is checked once)
CLASS_FORGET_LINK = "_class_forget_link"  # bool: until the script replacing the link's history entry was drawn
CLASS_ROUNDS_SHOWN = "_class_rounds_shown"  # {Rounds field: value}: the rounds this page run drew
CLASS_TEACHER_PANEL = "class_teacher_panel"  # the "I am the teacher" expander (keyed: the browser keeps it open)
CLASS_KEY_BOX = "_w_class_key"  # the teacher key's text box (emptied after each try: the key is not kept)
CLASS_UNLOCK, CLASS_LEAVE = "class_unlock", "class_leave"  # buttons
CLASS_DRAW_MESSAGE = "_class_draw_message"  # (kind, text): about the student's last press, shown once
CLASS_GUESS_MESSAGE = "_class_guess_message"  # str: about the student's last guess, shown once
CLASS_TEACHER_MESSAGE = "_class_teacher_message"  # str: why the teacher's round did not start, shown once
CLASS_PAUSED = "_class_paused"  # bool: this tab drew a class panel paused (the room out of reach): rerun when back
CLASS_PAUSED_SHOWN = "_class_paused_shown"  # bool: this page run has said in full that the class panel is paused
CLASS_PAUSE_OWED = "_class_pause_owed"  # bool: this tab left teacher mode while the room was out of reach
CLASS_RETRIED = "_class_retried"  # float: time.monotonic() of the heartbeat's last rerun for a paused panel
CLASS_NEW_DRAWS, CLASS_NEW_GUESSES, CLASS_REVEAL = "class_new_draws", "class_new_guesses", "class_reveal"  # buttons
CLASS_DRAW = "class_draw"  # button: a student's "Draw 10 for the class"
CLASS_GUESS_FORM, CLASS_GUESS = "class_guess_form", "class_guess"  # the guess box's form and its submit button


def class_guess_box(round_id: str) -> str:
    """A student's guess box in round ``round_id`` (one per round: a new round starts with an empty one)."""
    return f"_w_class_guess_{round_id}"


def class_guess_closed(round_id: str) -> str:
    """The closed guess box of round ``round_id``, after the reveal."""
    return f"_class_guess_closed_{round_id}"


# -- the shared keys' defaults and the binding --------------------------------------------------
DEFAULT_PROMPT = "The cat sat on the mat because it was tired."
DEFAULTS: dict[str, Any] = {PROMPT: DEFAULT_PROMPT, SEED: 0, CHAT: False, PRESENTER: False}

_WIDGET_PREFIX = "_w_"


def init(defaults: dict[str, Any] | None = None) -> None:
    """Set every shared key that is not yet in the session to its default."""
    for key, value in (defaults or DEFAULTS).items():
        st.session_state.setdefault(key, value)


def get(key: str) -> Any:
    """The current value of a shared key (its default if never set)."""
    if key not in st.session_state:
        st.session_state[key] = DEFAULTS.get(key)
    return st.session_state[key]


def widget_key(key: str) -> str:
    return _WIDGET_PREFIX + key


def _store(key: str) -> None:
    st.session_state[key] = st.session_state[widget_key(key)]


def bind(key: str, default: Any = None, options: list | range | None = None) -> dict[str, Any]:
    """Keyword arguments (``key``, ``on_change``, ``args``) that tie a widget to ``key``.

    The widget shows the stored value and writes changes back, so the value outlives
    pages where the widget is not drawn. ``default`` is used the first time only, and
    again whenever the stored value is no longer among ``options`` (say, a token
    position after the prompt got shorter).
    """
    _keep_stored(key, default, options)
    st.session_state[widget_key(key)] = st.session_state[key]
    return {"key": widget_key(key), "on_change": _store, "args": (key,)}


def bind_slider(key: str, default: Any = None, options: list | range | None = None) -> dict[str, Any]:
    """``bind`` for a slider, which a learner moves with the arrow keys several times a second.

    Streamlit sends a widget whose key a run wrote with ``set_value``, and the browser then takes the run's value over
    its own, undoing the key presses made while that run was on its way (four presses from T = 0.8 ended at 0.85). So
    a slider's key is written only when the slider would not show the stored value otherwise: it is new, holds
    another value (a link, a button, the teacher changed it), was drawn on another page last time (Streamlit drops a
    widget's value on a page switch), or has ``options`` (its range follows the data: a new range is a new widget).
    """
    _keep_stored(key, default, options)
    widget, page = widget_key(key), _page()
    drawn_on = st.session_state.setdefault(SLIDERS_ON, {})
    if (
        options is not None
        or widget not in st.session_state
        or st.session_state[widget] != st.session_state[key]
        or drawn_on.get(widget) != page
    ):
        st.session_state[widget] = st.session_state[key]
    drawn_on[widget] = page
    return {"key": widget, "on_change": _store, "args": (key,)}


def _keep_stored(key: str, default: Any, options: list | range | None) -> None:
    """Store ``key``'s default the first time, and again when the stored value left ``options``."""
    if key not in st.session_state or (options is not None and st.session_state[key] not in options):
        st.session_state[key] = DEFAULTS.get(key, default)


def _page() -> str:
    """The page this run draws (its script's hash; '' outside a Streamlit run)."""
    ctx = get_script_run_ctx()
    return ctx.page_script_hash if ctx is not None else ""


def set_values(values: dict[str, Any]) -> None:
    """Set shared keys from a callback (e.g. a button's ``on_click``); bound widgets show them on the rerun."""
    for key, value in values.items():
        st.session_state[key] = value


def put(key: str, value: Any) -> None:
    """Set one key from a callback (a button's, through ``sets``)."""
    st.session_state[key] = value


def sets(key: str, value: Any) -> dict[str, Any]:
    """A button's ``on_click`` and ``args`` that set ``key`` to ``value`` when it is pressed:
    ``st.button(..., **state.sets(state.X, True))``."""
    return {"on_click": put, "args": (key, value)}


# -- the Lesson page (ui/lesson/); ``ui.session.links`` reads LESSON and LESSON_AT for the URL ------------------------
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
LESSON_ROUND = "_lesson_round"  # ((lesson, step, model), round id): the question the teacher's session last opened
LESSON_REVEAL = "lesson_reveal"  # button: the teacher reveals the answer to the class
LESSON_CLASS_RESULTS = "_lesson_class_results"  # dict[(lesson, model), dict[step, ClassResult]]: the teacher's tallies
LESSON_CLASS_CSV = "lesson_class_csv"  # download button: the class's results
LESSON_CLASS_MESSAGE = "_lesson_class_message"  # str: why an answer was not counted (or a reveal not made)


def answer_widget(lesson: str, step: int) -> str:
    """The question widget of one step (a key per step, so an answer never carries over to the next question)."""
    return f"lesson_answer_{lesson}_{step}"


def submit_button(lesson: str, step: int) -> str:
    return f"lesson_submit_{lesson}_{step}"
