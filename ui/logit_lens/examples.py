"""Example prompts a page suggests, each chosen per model by a check computed on that model.

A suggestion that promises a result ("find the layer where ' Paris' takes over") must hold on the
loaded model: Gemma 3 270M answers "The capital of France is" with " the", not " Paris". So each
suggestion here has a short list of candidates, tried in order on the model itself, and the page
offers the first one whose promise holds (or says nothing it cannot keep).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from ui.logits.compute import prompt_logits, token_texts, traced_prompt

# (prompt, the answer it is meant to have): facts and sequences a small model may know
LENS_CANDIDATES: tuple[tuple[str, str], ...] = (
    ("The capital of France is", " Paris"),
    ("The capital of France is the city of", " Paris"),
    ("The Eiffel Tower is in the city of", " Paris"),
    ("Paris is the capital of", " France"),
    ("Monday, Tuesday, Wednesday,", " Thursday"),
    ("One, two, three, four,", " five"),
    ("The opposite of hot is", " cold"),
)


@dataclass(frozen=True)
class LensExample:
    prompt: str
    answer: str  # the model's own top answer, as the candidate meant it
    probability: float  # the model's probability for it (softmax at T = 1)
    first_readout: str  # the lens's readout from which it is the top guess through the output ("layer 21")


@st.cache_data(max_entries=4, show_spinner=False)
def lens_example(model: str) -> LensExample | None:
    """The first candidate whose answer ``model`` gives as its top next token, and which the lens shows taking over
    (not already the embeddings' own top guess): the logit-lens page's "find the layer where it takes over"."""
    for prompt, answer in LENS_CANDIDATES:
        logits = prompt_logits(model, prompt, False).logits.astype(np.float64)  # (V,) one plain forward
        top = int(np.argmax(logits))
        if token_texts(model, [top])[0] != answer:
            continue
        lens = traced_prompt(model, prompt, False).lens
        guesses = [layer[-1][0] for layer in lens.top_strings]  # each readout's top guess at the last position
        if guesses[0] == answer:
            continue  # the embeddings alone already say it: nothing takes over
        first = len(guesses) - 1
        while first > 0 and guesses[first - 1] == answer:
            first -= 1
        probs = np.exp(logits - logits.max())
        return LensExample(prompt, answer, float(probs[top] / probs.sum()), lens.layer_labels[first])
    return None
