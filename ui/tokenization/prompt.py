"""The shared prompt, tokenized once per (prompt, chat) and checked, for every page.

``prompt_tokens_or_stop()`` shows a clear ``st.error`` for a prompt the model cannot run (empty, too long) and notes for text worth knowing about (emoji, right-to-left scripts, control characters, typed special tokens), then returns the tokens or stops the page run.
"""

from __future__ import annotations

import unicodedata

import streamlit as st

from inference.api import PromptError, TokenizerError
from ui.common import format as fmt
from ui.common import models, state
from ui.common.resources import client_for
from ui.tokenization.compute import TokenView, tokenize


def prompt_notes(
    text: str, special_texts: list[str] | tuple[str, ...] = (), partial: list[bool] | tuple[bool, ...] = ()
) -> list[str]:
    """Plain-words notes about characters that tokenize in surprising ways. ``partial``: per token, whether it holds
    only part of a character's bytes (``TokenView.partial``); the note on emoji says what the tokenizer did."""
    notes = []
    if any(unicodedata.category(ch) == "So" or ord(ch) > 0xFFFF for ch in text):
        n_partial = sum(partial)
        notes.append(
            "The prompt contains emoji or symbols: each is several UTF-8 bytes. "
            + (
                f"Here {n_partial:,} of the tokens hold only part of a character's bytes (shown as <0xNN>)."
                if n_partial
                else "This tokenizer has whole tokens for the ones here: no character is split over tokens."
            )
        )
    if any(unicodedata.bidirectional(ch) in ("R", "AL") for ch in text):
        notes.append(
            "The prompt contains right-to-left text: tokens are always shown in reading order of "
            "the model, position 0 first, left to right."
        )
    controls = sorted({ch for ch in text if unicodedata.category(ch) == "Cc" and ch not in "\n\t"})
    if controls:
        names = ", ".join(f"U+{ord(ch):04X}" for ch in controls[:5])
        notes.append(
            f"The prompt contains control characters ({names}); they are tokens too, shown as ␀-style symbols."
        )
    typed = [special for special in special_texts if special in text]
    if typed:
        names = ", ".join(f"`{special}`" for special in typed[:3])
        notes.append(
            f"The prompt contains the text of special tokens ({names}): the tokenizer reads each as "
            "that one special token, not as characters, so the model sees a real marker (say, the start "
            "of a chat turn)."
        )
    return notes


def prompt_tokens_or_stop() -> TokenView:
    """The shared prompt's tokens; stops the page run after showing why where the prompt cannot be run."""
    model, prompt, chat = models.current(), state.get(state.PROMPT), state.get(state.CHAT)
    try:
        view = tokenize(model, prompt, chat)
    except (PromptError, TokenizerError) as err:
        st.error(f"Cannot run this prompt: {fmt.clause(err)}. Edit the prompt in the sidebar.")
        st.stop()
    for note in prompt_notes(prompt, client_for(model).tokenizer.added_texts, view.partial):
        st.info(note)
    return view
