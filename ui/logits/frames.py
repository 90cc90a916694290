"""The temperature playground's frames: softmax(logits ÷ T) of the prompt's real logits at every step of the slider.

The Logits page's in-browser temperature control redraws its bars from these frames while the
user drags, with no server round trip; so every number a frame holds is computed here, on the
server, by the same functions the page's other charts use (``ui.logits.compute.softmax_at``,
``entropy_bits``, ``tokens_for_mass``) and written by the same rule (``ui.common.format``). A
frame is what the page would show after a release at that T: the browser test checks each one
against the page's own numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from ui.common import format as fmt
from ui.common.token_text import visible_token
from ui.logits.compute import (
    descending_order,
    entropy_bits,
    prompt_logits,
    softmax_at,
    token_texts,
    tokens_for_mass,
    top_indices,
)


@dataclass(frozen=True)
class Frames:
    temperatures: list[float]  # (S,) the slider's steps, 0 (greedy) first
    token_ids: list[int]  # (N,) the most likely tokens (the same at every T > 0: temperature keeps the order)
    token_strings: list[str]
    probs: np.ndarray  # (S, N) float64: softmax(logits ÷ T) of those tokens, over the whole vocabulary
    entropy: np.ndarray  # (S,) bits
    top_probability: np.ndarray  # (S,)
    for_90: list[int]  # (S,) how many of the most probable tokens hold 90 % of the probability

    def payload(self, current: float) -> dict:
        """What the browser draws: plain JSON, every label already written by the formatting rule."""
        return {
            "temperatures": self.temperatures,
            "current": current,
            "tokens": [visible_token(t) for t in self.token_strings],  # the charts' notation: ·The, ↵
            "probs": [[float(p) for p in row] for row in self.probs],
            "labels": [[fmt.prob(p, 2, 2) for p in row] for row in self.probs],
            "entropy": [float(h) for h in self.entropy],
            "top": [float(p) for p in self.top_probability],
            "summaries": [
                f"T = {t:g} · entropy {fmt.bits(h)} · top probability {fmt.prob(top)} · "
                f"{fmt.count(n, 'token')} {fmt.plural_of(n, 'holds', 'hold')} 90 %"
                for t, h, top, n in zip(self.temperatures, self.entropy, self.top_probability, self.for_90)
            ],
        }


def steps(low: float, high: float, step: float) -> list[float]:
    """The slider's values from ``low`` to ``high`` in ``step``s, rounded as the app's slider rounds them."""
    count = int(round((high - low) / step))
    return [round(low + i * step, 10) for i in range(count + 1)]


@st.cache_data(max_entries=32, show_spinner=False)
def temperature_frames(model: str, prompt: str, chat: bool, temperatures: tuple[float, ...], top_n: int = 12) -> Frames:
    """One frame per temperature of the prompt's next-token distribution (its logits computed once, cached)."""
    logits = prompt_logits(model, prompt, chat).logits
    top = top_indices(logits, top_n)
    dists = [softmax_at(logits, t) for t in temperatures]  # (V,) each, float64
    order = descending_order(logits)  # (V,) one sort for every temperature
    return Frames(
        temperatures=[float(t) for t in temperatures],
        token_ids=[int(i) for i in top],
        token_strings=token_texts(model, [int(i) for i in top]),
        probs=np.stack([d[top] for d in dists]),
        entropy=np.array([entropy_bits(d) for d in dists]),
        top_probability=np.array([d.max() for d in dists]),
        for_90=[tokens_for_mass(d, 0.9, order) for d in dists],
    )
