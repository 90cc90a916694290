"""What the two predicting pages (Logits & temperature, Sampling) read first: the shared prompt with its cached
next-token logits, the current model, and the sampling controls resolved against its vocabulary. One function, so
the two pages check and stop in the same order."""

from __future__ import annotations

import streamlit as st

from ui.common import models
from ui.common.resources import client_for
from ui.logits.compute import PromptLogits
from ui.logits.prompt import current_prompt_logits
from ui.sampling.controls import Settings, settings_or_stop


def prompt_logits_and_settings() -> tuple[str, bool, PromptLogits, str, Settings]:
    """The prompt, its chat flag, its cached logits, the model's name and the drawn sampling controls; stops the
    page run (after a clear message) where the prompt cannot run or the controls do not hold."""
    loaded = current_prompt_logits()
    if loaded is None:
        st.stop()
    prompt, chat, cached = loaded
    model = models.current()
    return prompt, chat, cached, model, settings_or_stop(client_for(model).info.config.vocab_size)
