"""Be the model: the class's vote as a next-token distribution, sampled beside the model's own.

After the class has voted the next token of a step's prompt, its votes are a distribution like the model's softmax
(each voted token's share of the votes). Both are sampled by the engine's own seeded sampler
(``inference.api.recorded_draw``): the class's by giving it logits log(share), whose softmax at T = 1 is the share
itself (tokens no one voted for get -inf: never drawn); the model's at the step's settings. Both are draw 0 of the
same seeded stream: one u, landing in the class's ranges and in the model's. From each first token
the two continuations then grow side by side, one token per draw of the model at the same settings, so the class
sees where its own pick leads next to where the model's leads.

Streamlit-free: the model is reached through ``last_logits`` (a backend's ``last_logits(ids) -> (V,)``), so the
page caches it and the tests can pass a tiny model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from inference.api import SamplingParams, recorded_draw

GROWN_TOKENS = 5  # each continuation's length: the class's (or the model's) first token and 4 more


@dataclass(frozen=True)
class SideBySide:
    """The two continuations of one prompt: the first token from the class's votes, or from the model."""

    class_ids: list[int]  # (GROWN_TOKENS,) the class's drawn token, then the model's continuation of it
    model_ids: list[int]  # (GROWN_TOKENS,) the model's drawn token, then its continuation
    class_first_share: float  # the share of the votes the class's drawn token had
    model_first_prob: float  # the model's probability of its drawn token (after the step's filters)


def vote_logits(votes: Mapping[int, int], vocab_size: int) -> np.ndarray:
    """Logits whose softmax at T = 1 is the class's vote share: log(count / n) on each voted token, -inf elsewhere."""
    if not votes or any(count <= 0 for count in votes.values()):
        raise ValueError("the class's votes need at least one token with a positive count")
    if any(not 0 <= token < vocab_size for token in votes):
        raise ValueError(f"a voted token is not in the model's vocabulary of {vocab_size:,}")
    n = sum(votes.values())
    logits = np.full(vocab_size, -np.inf, dtype=np.float32)  # (V,)
    for token, count in votes.items():
        logits[token] = np.log(count / n)
    return logits


def first_tokens(
    first_logits: np.ndarray, prompt_ids: list[int], votes: Mapping[int, int], params: SamplingParams
) -> tuple[int, float, int, float]:
    """The class's first token (draw 0 from its votes, at T = 1 with no filter) and its share of the votes; the
    model's (draw 0 from ``first_logits`` (V,) at ``params``) and its probability after the filters."""
    plain = dataclasses.replace(params, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.0)
    class_first = recorded_draw(vote_logits(votes, first_logits.size), plain, None, 0)
    model_first = recorded_draw(first_logits, params, prompt_ids, 0)
    share = votes[class_first.token_id] / sum(votes.values())
    return class_first.token_id, share, model_first.token_id, model_first.probability


def continue_from(
    last_logits: Callable[[list[int]], np.ndarray],
    prompt_ids: list[int],
    first: int,
    params: SamplingParams,
    n_tokens: int = GROWN_TOKENS,
) -> list[int]:
    """``first`` and the model's next ``n_tokens - 1`` tokens after it: token k is draw k of ``params``' seeded
    stream from the logits of the prompt and the k tokens before it (the same first token, the same text)."""
    if n_tokens < 1:
        raise ValueError("a continuation needs at least one token")
    ids = [first]
    for k in range(1, n_tokens):
        logits = last_logits(prompt_ids + ids)  # (V,) the next token after the prompt and the text so far
        ids.append(recorded_draw(logits, params, prompt_ids + ids, k).token_id)
    return ids


def grow(
    last_logits: Callable[[list[int]], np.ndarray],
    prompt_ids: list[int],
    votes: Mapping[int, int],
    params: SamplingParams,
    n_tokens: int = GROWN_TOKENS,
) -> SideBySide:
    """Both continuations: the class's first token from its votes, the model's from its logits, each continued by
    the model (``first_tokens``, then ``continue_from``)."""
    class_first, share, model_first, probability = first_tokens(last_logits(prompt_ids), prompt_ids, votes, params)
    return SideBySide(
        continue_from(last_logits, prompt_ids, class_first, params, n_tokens),
        continue_from(last_logits, prompt_ids, model_first, params, n_tokens),
        share,
        probability,
    )
