"""Be the model (``ui.lesson.be_the_model``): the class's votes sampled as a distribution by the engine's own seeded
sampler, beside the model's draw, and both continued by the model. On made-up logits rows: no model is loaded."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from inference.api import SamplingParams, recorded_draw
from ui.lesson.be_the_model import GROWN_TOKENS, grow, vote_logits

VOCAB = 50


def row(ids: list[int]) -> np.ndarray:
    """A made-up model: its logits depend on the text so far (its length and last token)."""
    rng = np.random.default_rng(len(ids) * 1000 + ids[-1])
    return rng.normal(size=VOCAB).astype(np.float32)  # (V,)


def test_the_vote_logits_softmax_is_the_vote_share():
    logits = vote_logits({3: 6, 7: 3, 11: 1}, VOCAB)
    probs = np.exp(logits.astype(np.float64) - logits.max())
    probs /= probs.sum()
    expected = np.zeros(VOCAB)
    expected[[3, 7, 11]] = [0.6, 0.3, 0.1]
    np.testing.assert_allclose(probs, expected, atol=1e-7)  # no one voted for the rest: probability 0


@pytest.mark.parametrize("votes", [{}, {3: 0}, {VOCAB: 2}, {-1: 1}])
def test_votes_that_are_no_distribution_are_refused(votes):
    with pytest.raises(ValueError, match="vot"):
        vote_logits(votes, VOCAB)


def test_the_class_draw_follows_its_votes():
    """Over 600 seeds the class's first token comes out as often as its share of the votes (Pearson's χ²), and
    only voted tokens come out."""
    votes = {3: 6, 7: 3, 11: 1}
    drawn = [grow(row, [1, 2], votes, SamplingParams(seed=seed), 1).class_ids[0] for seed in range(600)]
    assert set(drawn) <= set(votes)
    observed = [drawn.count(token) for token in votes]
    expected = [600 * count / 10 for count in votes.values()]
    assert stats.chisquare(observed, expected).pvalue > 0.001


def test_both_continuations_are_the_engines_seeded_draws():
    params = SamplingParams(temperature=0.8, top_p=0.9, seed=5)
    prompt = [1, 2, 3]
    side = grow(row, prompt, {4: 2, 9: 1}, params)
    assert len(side.class_ids) == len(side.model_ids) == GROWN_TOKENS
    # the model's first token: draw 0 of the step's stream from the prompt's logits, and its probability
    first = recorded_draw(row(prompt), params, prompt, 0)
    assert side.model_ids[0] == first.token_id and side.model_first_prob == pytest.approx(first.probability)
    # the class's: draw 0 of the same seed from its vote shares (at T = 1, no filter), and that token's share
    plain = SamplingParams(seed=5)
    assert side.class_ids[0] == recorded_draw(vote_logits({4: 2, 9: 1}, VOCAB), plain, None, 0).token_id
    assert side.class_first_share == {4: 2 / 3, 9: 1 / 3}[side.class_ids[0]]
    # token k of either continuation: draw k of the model on the prompt and the tokens before it
    for ids in (side.class_ids, side.model_ids):
        for k in range(1, GROWN_TOKENS):
            text = prompt + ids[:k]
            assert ids[k] == recorded_draw(row(text), params, text, k).token_id


def test_a_greedy_step_continues_with_the_argmax():
    prompt = [1, 2]
    side = grow(row, prompt, {5: 1}, SamplingParams(temperature=0.0, seed=0))
    assert side.class_ids[0] == 5 and side.class_first_share == 1.0  # one token voted: the class's draw is it
    expected = [int(np.argmax(row(prompt)))]
    for _ in range(GROWN_TOKENS - 1):
        expected.append(int(np.argmax(row(prompt + expected))))
    assert side.model_ids == expected
