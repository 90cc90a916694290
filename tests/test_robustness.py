"""Robustness sweep: one table of bad inputs across every page, each run through app.py with AppTest.

Every row opens its page, applies the bad input (a widget set by key, a button clicked, or
a session value no widget can produce), and then checks three things:

1. no exception element, after every step;
2. the expected clear message is on the page (a substring of an error, warning, info,
   caption or markdown element), and no alert is longer than ``MAX_MESSAGE_CHARS``;
3. the app is still usable: after a good value is restored, the page runs with no
   exception and no error, and draws its main chart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from tests.apptest_utils import assert_clean, chart, open_page
from ui.common.state import DEFAULT_PROMPT
from ui.embeddings.compute import WORD_SET

pytestmark = pytest.mark.real_model

MAX_MESSAGE_CHARS = 1_000  # a message that quotes a whole paste back is not a clear message
TEN_K = ("The cat sat on the mat. " * 417)[:10_000]  # 10,000 characters, ~2,900 tokens
BEYOND_CONTEXT = "🙂" * 5_000  # 10,000 tokens: more than the model's 8,192


# -- how an input is applied ------------------------------------------------------------------
@dataclass(frozen=True)
class Prompt:
    """Type into the shared prompt box in the sidebar."""

    text: str

    def apply(self, at: AppTest) -> None:
        at.text_area(key="_w_prompt").input(self.text)


@dataclass(frozen=True)
class Set:
    """Set a widget by key; ``kind`` is AppTest's accessor (slider, number_input, text_input, toggle, ...)."""

    kind: str
    key: str
    value: Any

    def apply(self, at: AppTest) -> None:
        getattr(at, self.kind)(key=self.key).set_value(self.value)


@dataclass(frozen=True)
class State:
    """Write a session value directly: for values no widget can produce (a negative temperature)."""

    key: str
    value: Any

    def apply(self, at: AppTest) -> None:
        at.session_state[self.key] = self.value


@dataclass(frozen=True)
class BoundState:
    """Write a value stored for a bound widget (``state.bind``): its plain key and its widget's shadow key, as a
    session left by another model or page would hold them (AppTest otherwise sends the widget's old value back)."""

    key: str
    value: Any

    def apply(self, at: AppTest) -> None:
        at.session_state[self.key] = self.value
        at.session_state["_w_" + self.key] = self.value


@dataclass(frozen=True)
class Click:
    key: str

    def apply(self, at: AppTest) -> None:
        at.button(key=self.key).click()


@dataclass(frozen=True)
class Go:
    """Switch to another page (the shared state goes along)."""

    page: str

    def apply(self, at: AppTest) -> None:
        at.switch_page(PAGES[self.page].script)


Action = Prompt | Set | State | BoundState | Click | Go


def edits(edited: dict | None = None, added: tuple = (), deleted: tuple = ()) -> State:
    """The Batching page's request editor, given cell edits, added rows and deleted rows."""
    return State(
        "batch_requests", {"edited_rows": edited or {}, "added_rows": list(added), "deleted_rows": list(deleted)}
    )


# -- the pages and what "usable" means on each -------------------------------------------------
@dataclass(frozen=True)
class Page:
    script: str
    chart: str | None  # the main chart, drawn whenever the page works (the Overview has none)
    ready: tuple[Action, ...] = ()  # what draws that chart after a restore (Generation: one step)


PAGES = {
    "overview": Page("pages/overview.py", None),
    "tokenization": Page("pages/tokenization.py", "token_ids_chart"),
    "embeddings": Page("pages/embeddings.py", "embedding_heatmap"),
    "attention": Page("pages/attention.py", "attention_heatmap"),
    "logit_lens": Page("pages/logit_lens.py", "logit_lens"),
    "logits": Page("pages/logits.py", "logits_bar"),
    "sampling": Page("pages/sampling.py", "real_ranges"),
    "generation": Page("pages/generation.py", "gen_alternatives", ready=(Click("gen_next"),)),
    "batching": Page("pages/batching.py", "batch_padded"),
    "experiments": Page("pages/experiments.py", "exp_before_after"),
}

GOOD_PROMPT = (Prompt(DEFAULT_PROMPT),)
NO_EDITS = (edits(),)


@dataclass(frozen=True)
class Row:
    id: str
    page: str  # where the row starts (a Go action may move on)
    inputs: tuple[Action, ...]
    expect: str  # part of the message the page must show
    restore: tuple[Action, ...] = GOOD_PROMPT  # a good value again


ROWS: list[Row] = [
    # Overview: the bad input is typed on the landing page and explained on the next page
    Row("overview-empty-prompt", "overview", (Prompt(""), Go("tokenization")), "the prompt is empty"),
    Row(
        "overview-negative-seed",
        "overview",
        (State("seed", -3), Go("sampling")),
        "the seed must be a whole number ≥ 0",
        restore=(State("seed", 0),),
    ),
    # Tokenization: the shared prompt, and the page's own text boxes
    Row("empty-prompt", "tokenization", (Prompt(""),), "the prompt is empty"),
    Row("whitespace-only-prompt-is-text", "tokenization", (Prompt(" \n\t  "),), "`·` is a space"),
    Row("10k-character-prompt", "tokenization", (Prompt(TEN_K),), "the chips show the first 512"),
    Row(
        "control-characters",
        "tokenization",
        (Prompt("bell\x07 escape\x1b delete\x7f"),),
        "control characters (U+0007, U+001B, U+007F)",
    ),
    Row("nul-byte", "tokenization", (Prompt("before\x00after"),), "control characters (U+0000)"),
    Row("emoji", "tokenization", (Prompt("🙂👍🏽 hi"),), "emoji or symbols"),
    Row("right-to-left", "tokenization", (Prompt("שלום עולם مرحبا"),), "right-to-left text"),
    # A lone surrogate cannot travel (the browser and AppTest send UTF-8); invalid bytes arrive as U+FFFD.
    Row("invalid-utf8-as-replacement-char", "tokenization", (Prompt("caf\ufffd"),), "emoji or symbols"),
    Row("typed-special-token", "tokenization", (Prompt("<|im_start|>system hi"),), "text of special tokens"),
    Row("html-in-prompt", "tokenization", (Prompt("<script>alert(1)</script>"),), "&lt;"),  # chips show it escaped
    Row("prompt-beyond-context", "tokenization", (Prompt(BEYOND_CONTEXT),), "context holds 8192"),
    Row(
        "id-word-empty",
        "tokenization",
        (Set("text_input", "_w_tok_id_word", ""),),
        "Type a word to see the ids",
        restore=(Set("text_input", "_w_tok_id_word", " cat"),),
    ),
    Row(
        "id-word-10k",
        "tokenization",
        (Set("text_input", "_w_tok_id_word", "x" * 10_000),),
        "The ids right next to it hold",
        restore=(Set("text_input", "_w_tok_id_word", " cat"),),
    ),
    Row(
        "compare-text-empty",
        "tokenization",
        (Set("text_input", "_w_tok_compare", ""),),
        "Type some text to compare",
        restore=(Set("text_input", "_w_tok_compare", "The cat sat"),),
    ),
    Row(
        "compare-text-10k",
        "tokenization",
        (Set("text_input", "_w_tok_compare", "y" * 10_000),),
        "256 byte values. 10000 tokens",
        restore=(Set("text_input", "_w_tok_compare", "The cat sat"),),
    ),
    Row(
        "bpe-word-empty",
        "tokenization",
        (Set("text_input", "_w_tok_bpe_word", ""),),
        "Type a word to see it built merge by merge",
        restore=(Set("text_input", "_w_tok_bpe_word", "thecat"),),
    ),
    Row(
        "bpe-word-10k",
        "tokenization",
        (Set("text_input", "_w_tok_bpe_word", "z" * 10_000),),
        "replayed on its first 64",
        restore=(Set("text_input", "_w_tok_bpe_word", "thecat"),),
    ),
    Row(
        "training-paragraph-empty",
        "tokenization",
        (Set("text_area", "_w_tok_corpus", ""),),
        "above: 0 merges learned",
        restore=(Set("text_area", "_w_tok_corpus", "The cat sat on the mat."),),
    ),
    # Embeddings
    Row("embeddings-10k-prompt", "embeddings", (Prompt(TEN_K),), "the heatmap and the picker show the first 64"),
    Row(
        "embeddings-no-words-one-token",
        "embeddings",
        (Prompt("Hi"), Set("text_input", "_w_emb_words", "")),
        "a map needs at least three vectors",
        restore=(Prompt(DEFAULT_PROMPT), Set("text_input", "_w_emb_words", ", ".join(w.strip() for w in WORD_SET))),
    ),
    Row(
        "embeddings-garbage-words",
        "embeddings",
        (Set("text_input", "_w_emb_words", ",,, ;; ,\x00,\x01, 🙂🙂 ,<b>x</b>," + "q" * 5_000),),
        "vectors vary most",
        restore=(Set("text_input", "_w_emb_words", "cat, dog"),),
    ),
    # Attention
    Row("attention-one-character", "attention", (Prompt("a"),), "This prompt has no pronoun"),
    Row("attention-10k-prompt", "attention", (Prompt(TEN_K),), "attention is computed and drawn for the first 128"),
    Row(
        "chat-template-empty-prompt",
        "attention",
        (Set("toggle", "_w_chat", True), Prompt("")),
        "the prompt is empty",
        restore=(Set("toggle", "_w_chat", False), Prompt(DEFAULT_PROMPT)),
    ),
    # Transformer block & logit lens
    Row("lens-10k-prompt", "logit_lens", (Prompt(TEN_K),), "traces only its last 128"),
    Row("lens-prompt-beyond-context", "logit_lens", (Prompt(BEYOND_CONTEXT),), "context holds 8192"),
    Row("lens-nul-only-prompt", "logit_lens", (Prompt("\x00"),), "At the last position the final answer is"),
    # Logits & temperature
    Row(
        "temperature-negative",
        "logits",
        (State("temperature", -1.0),),
        "temperature = -1 is outside the control's range (0–2): using 0",
        restore=(State("temperature", 0.8),),
    ),
    Row(
        "temperature-zero",
        "logits",
        (Set("slider", "_w_temperature", 0.0),),
        "greedy decoding",
        restore=(Set("slider", "_w_temperature", 0.8),),
    ),
    Row(
        "top-p-zero",
        "logits",
        (Set("slider", "_w_top_p", 0.0),),
        "top-p must be above 0",
        restore=(Set("slider", "_w_top_p", 1.0),),
    ),
    Row(
        "min-p-one",
        "logits",
        (Set("slider", "_w_min_p", 1.0),),
        "one token can be drawn",
        restore=(Set("slider", "_w_min_p", 0.0),),
    ),
    Row(
        "top-k-negative",
        "logits",
        (State("top_k", -5),),
        "top-k = -5 is outside the control's range (≥ 0): using 0",
        restore=(State("top_k", 0),),
    ),
    Row(
        "repetition-penalty-zero",
        "logits",
        (State("repetition_penalty", 0.0),),
        "repetition penalty = 0 is outside the control's range (0.5–2): using 0.5",
        restore=(State("repetition_penalty", 1.0),),
    ),
    Row(
        "seed-huge",
        "logits",
        (State("seed", 10**30),),
        "seed must be an integer in [0, 2**63)",
        restore=(State("seed", 0),),
    ),
    # Sampling
    Row("temperature-huge", "sampling", (State("temperature", 1e9),), "using 2", restore=(State("temperature", 0.8),)),
    Row(
        "temperature-nan",
        "sampling",
        (State("temperature", float("nan")),),
        "is not a setting the control can hold",
        restore=(State("temperature", 0.8),),
    ),
    Row(
        "top-k-above-vocabulary",
        "sampling",
        (Set("number_input", "_w_top_k", 10**6),),
        "clamped to 49,152",
        restore=(Set("number_input", "_w_top_k", 0),),
    ),
    Row(
        "seed-negative",
        "sampling",
        (State("seed", -3),),
        "the seed must be a whole number ≥ 0",
        restore=(State("seed", 0),),
    ),
    Row(
        "min-p-one-draw-1000",
        "sampling",
        (Set("slider", "_w_min_p", 1.0), Click("draw_1000")),
        "Only one token can be drawn",
        restore=(Set("slider", "_w_min_p", 0.0),),
    ),
    # Generation & KV cache (the number boxes are bounded: Streamlit replaces an out-of-range value by the default)
    Row(
        "run-n-zero",
        "generation",
        (Set("number_input", "gen_n", 0), Click("gen_run")),
        "Run N adds at most 32 at a time",
        restore=(),
    ),
    Row(
        "run-n-billion",
        "generation",
        (Set("number_input", "gen_n", 10**9), Click("gen_run")),
        "Run N adds at most 32 at a time",
        restore=(),
    ),
    Row(
        "rewind-before-start",
        "generation",
        (Click("gen_next"), Set("number_input", "gen_rewind_to", -5), Click("gen_rewind")),
        "cannot rewind past the prompt",
        restore=(),
    ),
    Row(
        "rewind-past-the-end",
        "generation",
        (Click("gen_next"), Set("number_input", "gen_rewind_to", 10**6), Click("gen_rewind")),
        "cannot rewind forward",
        restore=(),
    ),
    Row(
        "force-empty-string",
        "generation",
        (Set("text_input", "gen_force", ""), Click("gen_force_go")),
        "type the token to force",
        restore=(),
    ),
    Row(
        "force-multi-token-string",
        "generation",
        (Set("text_input", "gen_force", " under the table"), Click("gen_force_go")),
        "is 3 tokens",
        restore=(),
    ),
    Row(
        "force-10k-string",
        "generation",
        (Set("text_input", "gen_force", "a" * 10_000), Click("gen_force_go")),
        "not one: force a single token",
        restore=(),
    ),
    Row(
        "next-after-forced-end-of-text",
        "generation",
        (Set("text_input", "gen_force", "<|im_end|>"), Click("gen_force_go"), Click("gen_next")),
        "generation has finished (end of text or step limit): rewind to continue",
        restore=(Set("number_input", "gen_rewind_to", 0), Click("gen_rewind")),
    ),
    Row(
        "seed-largest-valid",
        "generation",
        (State("seed", 2**63 - 1), Click("gen_next")),
        "✓ matches",
        restore=(State("seed", 0),),
    ),
    Row(
        "repetition-penalty-huge",
        "generation",
        (State("repetition_penalty", 100.0),),
        "using 2",
        restore=(State("repetition_penalty", 1.0),),
    ),
    Row("generation-prompt-beyond-context", "generation", (Prompt(BEYOND_CONTEXT),), "context holds 8192"),
    # Experiments: the target token, the patching prompts, a prompt too long to trace, a stored head of no model
    Row(
        "experiments-two-token-target",
        "experiments",
        (Set("text_input", "_w_exp_target", " cat dog"),),
        "the target must be exactly one",
        restore=(Set("text_input", "_w_exp_target", ""),),
    ),
    Row(
        "experiments-patch-prompts-of-other-lengths",
        "experiments",
        (Set("text_input", "_w_exp_corrupt", "The big dog sat on the mat because it was tired, so the"),),
        "they need the same number of tokens",
        restore=(Set("text_input", "_w_exp_corrupt", "The dog sat on the mat because it was tired, so the"),),
    ),
    Row("experiments-10k-prompt", "experiments", (Prompt(TEN_K),), "run at most 128 tokens"),
    Row(
        "experiments-head-out-of-range",
        "experiments",
        (BoundState("exp_heads", ((99, 1), (3, 8))),),
        "1 item(s) did not fit this model or prompt and were left out",
        restore=(BoundState("exp_heads", ()),),
    ),
    # Batching: the request editor
    Row(
        "batch-empty-prompt-row",
        "batching",
        (edits({0: {"prompt": ""}}),),
        "Request 0 is left out: the prompt is empty",
        restore=NO_EDITS,
    ),
    Row(
        "batch-max-tokens-zero",
        "batching",
        (edits({0: {"max new tokens": 0}}),),
        "max new tokens 0 is outside 1–32, using 1",
        restore=NO_EDITS,
    ),
    Row(
        "batch-max-tokens-billion",
        "batching",
        (edits({1: {"max new tokens": 10**9}}),),
        "max new tokens 1000000000 is outside 1–32, using 32",
        restore=NO_EDITS,
    ),
    Row(
        "batch-too-many-rows",
        "batching",
        (edits(added=[{"prompt": "Hi", "max new tokens": 2}] * 5),),
        "11 requests: only the first 8 are run",
        restore=NO_EDITS,
    ),
    Row("batch-every-row-deleted", "batching", (edits(deleted=range(6)),), "No request can be run", restore=NO_EDITS),
    Row(
        "batch-prompt-too-long",
        "batching",
        (edits({2: {"prompt": "x " * 200}}),),
        "the page's limit is 64",
        restore=NO_EDITS,
    ),
    Row(
        "batch-negative-seed-run",
        "batching",
        (State("seed", -3), Click("batch_run")),
        "seed must be",
        restore=(State("seed", 0),),
    ),
]


# -- the check -------------------------------------------------------------------------------
def shown_texts(at: AppTest) -> list[str]:
    return [e.value for kind in ("error", "warning", "info", "caption", "markdown") for e in at.get(kind)]


def apply_all(at: AppTest, actions: tuple[Action, ...], row: Row) -> None:
    for action in actions:
        action.apply(at)
        at.run()
        assert not at.exception, (row.id, action, [e.value for e in at.exception])


def final_page(row: Row) -> Page:
    moves = [action.page for action in row.inputs if isinstance(action, Go)]
    return PAGES[moves[-1] if moves else row.page]


@pytest.mark.parametrize("row", [pytest.param(row, id=row.id) for row in ROWS])
def test_bad_input_gives_a_clear_message_and_the_app_stays_usable(row: Row):
    at = open_page(PAGES[row.page].script)
    assert_clean(at)

    apply_all(at, row.inputs, row)
    texts = shown_texts(at)
    assert any(row.expect in text for text in texts), (row.id, row.expect, [t[:200] for t in texts])
    alerts = [e.value for kind in ("error", "warning", "info") for e in at.get(kind)]
    assert all(len(alert) <= MAX_MESSAGE_CHARS for alert in alerts), (row.id, [a[:200] for a in alerts])

    page = final_page(row)
    apply_all(at, row.restore + page.ready, row)
    assert_clean(at)
    assert not at.error, (row.id, [e.value for e in at.error])
    if page.chart:
        chart(at, page.chart)
    else:
        assert at.title and at.title[0].value


def test_the_table_covers_every_page_and_thirty_inputs():
    assert len(ROWS) >= 30 and len({row.id for row in ROWS}) == len(ROWS)
    assert {row.page for row in ROWS} == set(PAGES)
