"""Sentences that must carry the same verdict as their numbers, tested as classes on made-up numbers (no model).

Issue 38's items 11, 12 and 14: a distance split that counts the attention sink as far-back text, a range printed
with fewer digits than its width needs, a headline that drops its own sentence's "within noise", a top-5 without
its temperature, an opening sentence about a prompt the learner did not type.
"""

from __future__ import annotations

import re

from ui.claims import reading


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
