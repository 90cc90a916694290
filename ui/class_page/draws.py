"""The class experiments' numbers: each student's own seeded draws, the pooled histogram with χ², the guesses.

Owns the arithmetic behind ``pages/class.py`` and the Sampling page's "Draw for the class":

- a student's draws in a round come from its own seed (``student_seed``: the round id and the
  student's id hashed, so two students never share a stream and a new round draws new numbers),
  through the engine's seeded sampler, on the experiment the teacher fixed when starting the round
  (``ui.classroom.room.Experiment``) and on the logits the room keeps with the round (``start_draw_round``,
  ``kept_logits``): draw k of a student is always the same token, whichever engine path (eager, compiled,
  batched; their last bits differ) would compute the prompt's logits at the time of a press or a recount;
- the pooled histogram puts every counted draw of the room against the sampler's exact final
  probabilities, and tests the fit with the same Pearson χ² as the thousand draws; ``pooled_bins`` says
  which tokens that test counts on their own and which it pools (for the sentence under the chart);
- a guess is read as the model's token for the guessed word (a leading space when the prompt's last
  token ends without one, the first token when the word is several) and set against the model's
  probability of that token at T = 1.
Results are plain numpy/Python.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections import Counter
from dataclasses import dataclass

import numpy as np

from inference.api import draw_ids, recorded_draw
from ui.classroom.room import ANY, Experiment, RoomError, RoomStore
from ui.common.resources import client_for
from ui.common.stats import chi_square_gof
from ui.logits.compute import prompt_logits, softmax_at, token_texts
from ui.sampling.compute import Histogram

DRAWS_PER_PRESS = 10  # one press of "Draw for the class"
MIN_EXPECTED = 5.0  # chi_square_gof's rule: a bin must be expected this often (tests check the two agree)
TOP_GUESS_TOKENS = 8  # the model's most probable tokens shown beside the class's guesses


def student_seed(round_id: str, student: str) -> int:
    """The seed of ``student``'s draws in round ``round_id`` (0 … 2³¹ − 1)."""
    digest = hashlib.sha256(f"{round_id}:{student}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFF_FFFF


def start_draw_round(room: RoomStore, experiment: Experiment, replacing: str | None | object = ANY) -> str:
    """Start a draw round on ``experiment`` with the prompt's logits kept in the room beside it (float32 bytes): every
    press and every recount of the round draws from these, never from a forward run again."""
    logits = prompt_logits(experiment.model, experiment.prompt, experiment.chat).logits  # (V,)
    blob = np.ascontiguousarray(logits, dtype="<f4").tobytes()
    return room.new_draw_round(experiment, replacing=replacing, logits=blob)


@functools.lru_cache(maxsize=8)  # a round's logits never change: read once per round and process, not per press
def kept_logits(room: RoomStore, round_id: str) -> np.ndarray:
    """The logits (V,) the room keeps for draw round ``round_id`` (read-only); ``RoomError`` when it keeps none."""
    blob = room.round_logits(round_id)
    if blob is None:
        raise RoomError("this draw round keeps no logits to draw from: nothing was counted; start a new round")
    return np.frombuffer(blob, dtype="<f4").copy()  # (V,); a copy: torch.from_numpy wants a writable array


def student_draws(
    logits: np.ndarray, experiment: Experiment, round_id: str, student: str, first: int, count: int
) -> list[int]:
    """Token ids of ``student``'s draws ``first`` … ``first + count − 1`` in the round (its own seeded stream), drawn
    from the round's kept ``logits`` (V,)."""
    params = dataclasses.replace(experiment.params, seed=student_seed(round_id, student)).canonical()
    previous = client_for(experiment.model).encode_prompt(experiment.prompt, chat=experiment.chat)  # the penalty's
    return draw_ids(logits, params, first + count, previous)[first:]


@functools.lru_cache(maxsize=16)
def _distribution(room: RoomStore, round_id: str, experiment: Experiment) -> tuple[list[int], np.ndarray]:
    """The sampler's range order and final probabilities on the round's kept logits (the same for every seed)."""
    previous = client_for(experiment.model).encode_prompt(experiment.prompt, chat=experiment.chat)
    result = recorded_draw(kept_logits(room, round_id), experiment.params, previous)
    if experiment.params.greedy:
        return [result.token_id], np.array([1.0])
    order = result.range_token_ids  # (K,)
    return order.tolist(), result.stage_probs["final"][order].astype(np.float64)


def pooled_histogram(
    room: RoomStore, round_id: str, experiment: Experiment, counts: Counter, top_n: int = 10
) -> Histogram:
    """Every counted draw of the class against the exact probabilities of the round's kept logits, with Pearson's χ²."""
    order, probs = _distribution(room, round_id, experiment)
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


@dataclass(frozen=True)
class BinPlan:
    """How Pearson's χ² groups the survivors for ``n_draws`` draws (the rule of ``chi_square_gof``)."""

    alone: int  # tokens expected at least MIN_EXPECTED times: a bin each
    pooled: int  # the other survivors, counted together
    pooled_bin: (
        bool  # they make a bin of their own (False: together still under MIN_EXPECTED, so they join the smallest)
    )

    @property
    def n_bins(self) -> int:
        return self.alone + (1 if self.pooled and self.pooled_bin else 0)


def bin_plan(n_draws: int, probs: np.ndarray, min_expected: float = MIN_EXPECTED) -> BinPlan:
    """Which survivors χ² tests alone and which together, for ``n_draws`` draws from ``probs`` (K,)."""
    expected = n_draws * np.asarray(probs, dtype=np.float64) / float(np.sum(probs))  # (K,)
    big = expected >= min_expected
    pooled_expected = float(expected[~big].sum())
    return BinPlan(int(big.sum()), int((~big).sum()), pooled_expected >= min_expected or not big.any())


def pooled_bins(room: RoomStore, round_id: str, experiment: Experiment, n_draws: int) -> BinPlan:
    """``bin_plan`` of the round's exact distribution: the bins behind the pooled histogram's χ²."""
    _, probs = _distribution(room, round_id, experiment)
    return bin_plan(n_draws, probs)


# -- guess the next token ---------------------------------------------------------------------------
def guess_token(model: str, prompt: str, text: str, chat: bool = False) -> tuple[int, bool]:
    """The model's token for a guessed word, and whether the word is that one token (not only its first).

    The word gets a leading space when the prompt as the model reads it (its last token; with ``chat`` the
    template's reply header) does not end in whitespace: after "sat on the" the next word is " mat".
    """
    tokenizer = client_for(model).tokenizer
    word = text.strip()
    last = prompt_logits(model, prompt, chat).token_strings[-1] if prompt else ""
    spaced = word if (not last or last[-1].isspace()) else " " + word
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
    read = [guess_token(experiment.model, experiment.prompt, g, experiment.chat) for g in guesses]
    tally = Counter(token for token, _ in read)
    top = [int(t) for t in np.argsort(-probs)[:TOP_GUESS_TOKENS]]
    ids = [token for token, _ in tally.most_common()] + [t for t in top if t not in tally]
    n = len(guesses)
    share = np.array([tally.get(t, 0) / max(n, 1) for t in ids])
    most = tally.most_common(1)[0] if tally else None
    texts = token_texts(experiment.model, ids)
    return GuessView(
        n_guesses=n,
        labels=texts,
        class_share=share,
        model_prob=probs[ids].astype(np.float64),
        top_token=token_texts(experiment.model, [top[0]])[0],
        top_prob=float(probs[top[0]]),
        top_guessed=tally.get(top[0], 0),
        most_guessed=texts[0] if most else None,
        most_guessed_count=most[1] if most else 0,
        most_guessed_prob=float(probs[most[0]]) if most else 0.0,
        several_tokens=sum(not single for _, single in read),
    )
