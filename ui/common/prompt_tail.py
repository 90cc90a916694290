"""The part of a long prompt that a forward which cannot take all of it runs on: its last tokens, after its first one
where the tokenizer put it there itself (a BOS), and the words that say which part that was.

A model trained with a BOS at position 0 (Gemma) reads a text that starts elsewhere as nothing it was trained on:
its last position's distribution moves much further from the whole prompt's than a shorter context alone moves it.
"""

from __future__ import annotations


def prompt_tail(ids: list[int], limit: int, bos: tuple[int, str] | None) -> tuple[list[int], str]:
    """At most ``limit`` (>= 2) of ``ids``, and which ones in words: all of them when they fit ("all 12 of its
    tokens"), else their last ones ("its last 128"), after ``ids[0]`` where that is ``bos``, the token the tokenizer
    puts before every text (its ``bos_token``, (id, text); None: it puts none) ("its first token and its last 127")."""
    if limit < 2:
        raise ValueError(f"a prompt's tail needs room for at least 2 tokens, got {limit}")
    if len(ids) <= limit:
        return list(ids), f"all {len(ids):,} of its tokens"
    if bos is not None and ids[0] == bos[0]:
        return [ids[0], *ids[len(ids) - (limit - 1) :]], f"its first token and its last {limit - 1:,}"
    return list(ids[len(ids) - limit :]), f"its last {limit:,}"
