"""The pronoun section's candidates and verdicts, on prompts of other shapes than the example: pure numpy, no model.

The classes of issue 38's item 10: a verb ("thanked") or a previous-token head's target counted as a candidate
referent, and a one-head margin (19 against 18) called a verdict.
"""

from __future__ import annotations

import numpy as np
import pytest

from ui.attention import claims
from ui.attention import reference as ref
from ui.tokenization.own_text import Word


def _words(text: str) -> list[Word]:
    """One token per word (punctuation apart), positions from 1: position 0 is a start token, as after <bos>."""
    out, position = [], 1
    for token in text.replace(",", " ,").replace(".", " .").split():
        out.append(Word(position, position + 1, token))
        position += 1
    return out


@pytest.mark.parametrize(
    ("text", "nouns"),
    [
        ("The cat sat on the mat because it", ["cat", "mat"]),
        ("Anna thanked Maria because she", ["Anna", "Maria"]),
        ("The teacher thanked the student because she", ["teacher", "student"]),
        ("The old man helped the young boy because he", ["man", "boy"]),
        ("Tell the dog that it", ["dog"]),
        ("Yesterday the trophy did not fit in the suitcase because it", ["trophy", "suitcase"]),
        ("Die Katze jagte die Maus, weil sie", ["Katze", "Maus"]),
        ("Le chat regarde l'oiseau parce qu'il", ["chat", "l'oiseau"]),
        ("x = compute(a, b) and then it", []),
    ],
)
def test_candidates_are_the_nouns_before_the_pronoun_never_a_verb_or_function_word(text, nouns):
    words = _words(text)
    pronoun = ref.find_pronoun(words)
    assert pronoun is not None
    assert [w.text for w in ref.candidates(words, pronoun)] == nouns


def _probs(n_layers: int, n_heads: int, n_tokens: int) -> np.ndarray:
    probs = np.zeros((n_layers, n_heads, n_tokens, n_tokens))  # (L, H, T, T)
    probs[..., 0] = 1.0
    return probs


def test_previous_token_heads_are_left_out_of_the_count():
    """ "Anna told Maria she": a previous-token head puts its weight on "Maria" because it comes right before
    "she", whatever "she" means; it is not a vote for Maria, and the sentence says how many such heads there were."""
    words = _words("Anna told Maria she")
    pronoun = ref.find_pronoun(words)
    query = words[pronoun].start
    probs = _probs(1, 4, query + 1)
    anna, maria = words[0].start, words[2].start
    probs[0, 0, query, [0, maria]] = [0.3, 0.7]  # previous-token heads
    probs[0, 1, query, [0, maria, anna]] = [0.3, 0.5, 0.2]
    probs[0, 2, query, [0, anna]] = [0.5, 0.5]  # reading heads
    probs[0, 3, query, [0, anna, maria]] = [0.4, 0.35, 0.25]
    found = ref.resolve(probs, words, pronoun)
    assert {a.word.text: a.n_heads for a in found.antecedents} == {"Anna": 2, "Maria": 0}
    assert found.n_previous_token == 2
    text = claims.pronoun_sentence(
        found.pronoun.text,
        [(a.word.text, a.n_heads, a.best, a.only_first_token) for a in found.antecedents],
        found.n_heads,
        ref.MIN_SHARE,
        found.n_previous_token,
    )
    assert "2 heads whose strongest key is the token right before `she` are not counted" in text
    assert "`Maria` in 0" in text


def _sentence(counts: dict[str, int]) -> str:
    antecedents = [(word, n, [(0, i, 0.5)] if n else [], False) for i, (word, n) in enumerate(counts.items())]
    return claims.pronoun_sentence("it", antecedents, 270, 0.1)


@pytest.mark.parametrize(
    ("counts", "verdict"),
    [
        ({"trophy": 19, "suitcase": 18}, False),  # the held-out prompt's one-head margin
        ({"trophy": 18, "suitcase": 18}, False),
        ({"trophy": 24, "suitcase": 13}, False),  # p = 0.10
        ({"trophy": 25, "suitcase": 12}, True),  # p = 0.047
        ({"trophy": 30, "suitcase": 2, "box": 1}, True),
        ({"trophy": 4, "suitcase": 0}, False),  # four heads cannot settle anything: p = 0.125
    ],
)
def test_a_margin_inside_chance_is_a_tie_never_a_verdict(counts, verdict):
    text = _sentence(counts)
    leader = max(counts, key=counts.get)
    assert (f"leans to *{leader}*" in text) is verdict
    if not verdict:
        assert "do not settle it" in text


def test_the_sign_test_is_the_binomial_tail():
    assert claims.sign_test(19, 18) == 1.0
    assert claims.sign_test(5, 5) == 1.0
    assert claims.sign_test(6, 0) == pytest.approx(2 / 64)
    assert claims.sign_test(25, 12) == pytest.approx(0.04703, abs=1e-5)
    assert claims.sign_test(12, 25) == claims.sign_test(25, 12)
