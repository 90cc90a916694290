"""Sentences of the side-by-side page (Two models side by side), each computed from the two models' numbers."""

from __future__ import annotations

from collections.abc import Sequence

from ui.common import format as fmt
from ui.common.token_text import visible


def _code(text: str) -> str:
    return "`" + (visible(text) or "∅").replace("`", "ˋ") + "`"


def token_count_sentence(n_text_tokens: int, n_chars: int, specials: Sequence[str], shown: int | None = None) -> str:
    """How many tokens the text itself takes (special tokens the tokenizer adds are named apart, never counted as
    text), and characters per token of the text alone; ``shown``: how many chips the page draws, when fewer."""
    text = f"**{fmt.count(n_text_tokens, 'token')}** for the text's {fmt.count(n_chars, 'character')}" + (
        f" ({fmt.fixed(n_chars / n_text_tokens, 2)} characters per token)" if n_text_tokens else ""
    )
    if specials:
        added = ", ".join(_code(s) for s in specials)
        text += f", plus {fmt.count(len(specials), 'special token')} the tokenizer adds ({added}), which is not text"
    if shown is not None:
        text += f"; the first {shown} shown"
    return text + "."


def first_choice_sentence(left: str, left_p: float, right: str, right_p: float) -> str:
    """Whether the two models put the same token first (compared as text), with both probabilities."""
    if left == right:
        return f"Both put {fmt.bold_token(left)} first ({fmt.pct(left_p)} and {fmt.pct(right_p)})."
    return (
        f"They disagree on the first choice: {fmt.bold_token(left)} ({fmt.pct(left_p)}) against "
        f"{fmt.bold_token(right)} ({fmt.pct(right_p)})."
    )


def divergence_sentence(common: str, left_name: str, left_rest: str, right_name: str, right_rest: str) -> str:
    """Where two greedy continuations part, by characters (their tokens do not line up)."""
    if not left_rest and not right_rest:
        return "The two continuations are **identical**."

    def going_on(name: str, rest: str) -> str:
        return f"{name} goes on {_code(rest[:40])}" if rest else f"{name}'s ends there"

    parts = f"{going_on(left_name, left_rest)}, {going_on(right_name, right_rest)}"
    if not common:
        return f"They differ from the very first character: {parts}."
    return f"They agree on the first **{fmt.count(len(common), 'character')}** ({_code(common)}), then part: {parts}."
