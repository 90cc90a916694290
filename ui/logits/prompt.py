"""The shared prompt's next-token logits for the predicting pages: ``current_prompt_logits()`` makes the same checks as ``prompt_tokens_or_stop`` and returns the prompt's logits, or ``None`` after a clear message."""

from __future__ import annotations

import streamlit as st

from inference.api import PromptError, TokenizerError
from ui.common import format as fmt
from ui.common import models, state
from ui.logits.compute import PromptLogits, prompt_logits


def current_prompt_logits() -> tuple[str, bool, PromptLogits] | None:
    """The sidebar's prompt and chat flag with their cached logits, or None after an ``st.error`` saying why."""
    prompt, chat = str(state.get(state.PROMPT) or ""), bool(state.get(state.CHAT))
    try:
        return prompt, chat, prompt_logits(models.current(), prompt, chat)
    except (PromptError, TokenizerError) as error:
        st.error(
            f"Cannot run this prompt: {fmt.clause(error)}. Edit the prompt in the sidebar.", icon=":material/block:"
        )
        return None
