"""The class experiments' numbers: each student's own seeded draws, the pooled histogram with χ², the guesses.

Owns the arithmetic behind ``pages/85_class.py`` and the Sampling page's "Draw for the class":

- a student's draws in a round come from its own seed (``student_seed``: the round id and the
  student's id hashed, so two students never share a stream and a new round draws new numbers),
  through the same ``draw_token_ids`` the thousand draws use, on the experiment the teacher fixed
  when starting the round (``ui.room.Experiment``): draw k of a student is always the same token;
- the pooled histogram puts every counted draw of the room against the sampler's exact final
  probabilities, and tests the fit with the same Pearson χ² as the thousand draws;
- a guess is read as the model's token for the guessed word (a leading space when the prompt ends
  without one, the first token when the word is several) and set against the model's probability
  of that token at T = 1.
Results are plain numpy/Python.
"""
from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter
from dataclasses import dataclass

import numpy as np
import streamlit as st

from ui.compute_logits import params_from_key, params_key, prompt_logits, softmax_at, token_texts
from ui.compute_sampling import Histogram, chi_square_gof, draw_token_ids
from ui.resources import engine_for
from ui.room import Experiment

DRAWS_PER_PRESS = 10  # one press of "Draw for the class"
TOP_GUESS_TOKENS = 8  # the model's most probable tokens shown beside the class's guesses


def student_seed(round_id: str, student: str) -> int:
    """The seed of ``student``'s draws in round ``round_id`` (0 … 2³¹ − 1)."""
    digest = hashlib.sha256(f"{round_id}:{student}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFF_FFFF


def student_draws(experiment: Experiment, round_id: str, student: str, first: int, count: int) -> list[int]:
    """Token ids of ``student``'s draws ``first`` … ``first + count − 1`` in the round (its own seeded stream)."""
    params = dataclasses.replace(params_from_key(experiment.key), seed=student_seed(round_id, student))
    drawn, _, _ = draw_token_ids(experiment.model, experiment.prompt, experiment.chat, params_key(params), first + count)
    return drawn[first:]


@st.cache_data(max_entries=16, show_spinner=False)
def _distribution(model: str, prompt: str, chat: bool, key: tuple) -> tuple[list[int], np.ndarray]:
    """The sampler's range order and final probabilities (the same for every seed)."""
    _, order, probs = draw_token_ids(model, prompt, chat, key, 0)
    return order, probs


def pooled_histogram(experiment: Experiment, counts: Counter, top_n: int = 10) -> Histogram:
    """Every counted draw of the class against the exact probabilities, with Pearson's χ²."""
    order, probs = _distribution(experiment.model, experiment.prompt, experiment.chat, experiment.key)
    slot_of = {token: slot for slot, token in enumerate(order)}
    vector = np.zeros(len(order))  # (K,) draws per survivor
    for token, count in counts.items():
        vector[slot_of[token]] += count  # every draw is a survivor: the sampler draws nothing else
    n = int(vector.sum())
    shown = min(top_n, len(order))
    rest = len(order) - shown
    observed = vector[:shown] / max(n, 1)
    expected, labels = probs[:shown], token_texts(experiment.model, order[:shown])
    if rest:
        observed = np.append(observed, vector[shown:].sum() / max(n, 1))
        expected = np.append(expected, probs[shown:].sum())
        labels = labels + [f"other ({rest:,} tokens)"]
    return Histogram(n, labels, order[:shown], observed, expected, chi_square_gof(vector, probs), [])


# -- guess the next token ---------------------------------------------------------------------------
def guess_token(model: str, prompt: str, text: str) -> tuple[int, bool]:
    """The model's token for a guessed word, and whether the word is that one token (not only its first)."""
    tokenizer = engine_for(model).tokenizer
    word = text.strip()
    spaced = word if (not prompt or prompt[-1].isspace()) else " " + word
    ids = tokenizer.encode(spaced, special_tokens=False)
    return ids[0], len(ids) == 1


@dataclass(frozen=True)
class GuessView:
    n_guesses: int
    labels: list[str]  # (N,) the guessed tokens first (most guessed first), then the model's top tokens
    class_share: np.ndarray  # (N,) share of the class's guesses
    model_prob: np.ndarray  # (N,) the model's probability at T = 1
    top_token: str  # the model's most probable token
    top_prob: float
    top_guessed: int  # students whose guess is the model's top token
    most_guessed: str | None  # the class's most common guess (as a token)
    most_guessed_count: int
    most_guessed_prob: float
    several_tokens: int  # guesses longer than one token (counted by their first token)


def guess_view(experiment: Experiment, guesses: list[str]) -> GuessView:
    """The class's guesses as tokens, against the model's next-token distribution (T = 1)."""
    logits = prompt_logits(experiment.model, experiment.prompt, experiment.chat).logits
    probs = softmax_at(logits, 1.0)  # (V,)
    read = [guess_token(experiment.model, experiment.prompt, g) for g in guesses]
    tally = Counter(token for token, _ in read)
    top = [int(t) for t in np.argsort(-probs)[:TOP_GUESS_TOKENS]]
    ids = [token for token, _ in tally.most_common()] + [t for t in top if t not in tally]
    n = len(guesses)
    share = np.array([tally.get(t, 0) / max(n, 1) for t in ids])
    most = tally.most_common(1)[0] if tally else None
    texts = token_texts(experiment.model, ids)
    return GuessView(
        n_guesses=n, labels=texts, class_share=share, model_prob=probs[ids].astype(np.float64),
        top_token=token_texts(experiment.model, [top[0]])[0], top_prob=float(probs[top[0]]),
        top_guessed=tally.get(top[0], 0),
        most_guessed=texts[0] if most else None, most_guessed_count=most[1] if most else 0,
        most_guessed_prob=float(probs[most[0]]) if most else 0.0,
        several_tokens=sum(not single for _, single in read),
    )
