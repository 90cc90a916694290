"""Sentences that must carry the same verdict as their numbers, tested as classes on made-up numbers (no model).

Issue 38's items 11, 12 and 14: a distance split that counts the attention sink as far-back text, a range printed
with fewer digits than its width needs, a headline that drops its own sentence's "within noise", a top-5 without
its temperature, an opening sentence about a prompt the learner did not type.
"""

from __future__ import annotations

import re

import pytest

from ui.claims import reading, speculative
from ui.figures import format as fmt


def test_the_window_sentence_shows_the_sink_apart_from_far_back_text():
    """Gemma's held-out case: 40% beyond the window of which 32% is <bos>: the text's share is 8%, not 40%."""
    text = reading.window_sentence(
        512,
        15,
        0.0,
        1000,
        [5, 11],
        [0.0] * 5 + [0.40] + [0.0] * 5 + [0.76],
        [0.0] * 5 + [0.32] + [0.0] * 5 + [0.70],
        "<bos>",
    )
    assert "**8.0%** on text and 32.0% on the sink (layer 5)" in text
    assert "**6.0%** on text and 70.0% on the sink (layer 11)" in text
    assert "40.0%" not in text and "76.0%" not in text
    assert "`<bos>`" in text
    shares = [float(x) for x in re.findall(r"\*\*([\d.]+)%\*\* on text", text)]
    assert shares == [8.0, 6.0]


@pytest.mark.parametrize("spread", [0.0, 0.03, 0.3])
@pytest.mark.parametrize("tokens_per_forward", [1.0, 1.6, 3.5])
@pytest.mark.parametrize("speedup", [0.5, 0.97, 1.04, 1.2, 1.38, 2.0])
def test_the_speed_up_headline_carries_the_sentences_verdict(speedup, tokens_per_forward, spread):
    """The held-out case: "Speed-up 1.38×" above a sentence calling it noise. The headline says noise exactly when
    the sentence does, and slower exactly when the sentence gives a reason for being slower."""
    headline = speculative.speedup_headline(speedup, tokens_per_forward, spread)
    sentence = speculative.speed_sentence(speedup, 0.6, tokens_per_forward, "lookup", None, 30, "12:00", None, spread)
    assert headline.startswith(f"{speedup:.2f}×")
    says_noise = "noise" in sentence
    assert ("noise" in headline) == says_noise
    assert ("slower" in headline) == (not says_noise and speedup < 1)
    if spread > speculative.TIE_BAND and abs(speedup - 1) <= spread:
        assert f"differed by {fmt.pct(spread)}" in sentence


def test_the_spread_is_measured_from_the_runs():
    assert speculative.run_spread([1.0, 1.12], [2.0, 2.0]) == pytest.approx(0.12)
    assert speculative.run_spread([1.0], [2.0]) == 0.0
