"""Sentences of the class view (``pages/class.py``): what the pooled draws and the guesses show.

Each helper takes the numbers its chart draws and returns the sentence that holds for them.
"""

from __future__ import annotations

from collections.abc import Sequence

from ui.class_page.draws import MIN_EXPECTED, BinPlan
from ui.common import format as fmt
from ui.common.token_text import visible

OTHER_PREFIX = "other ("  # the histogram's last bar, "other (49,142 tokens)": a label, not a token


def _label(label: str) -> str:
    """A bar's label in bold: a token with its whitespace made visible, the "other (…)" bar as it reads."""
    return f"**{label}**" if label.startswith(OTHER_PREFIX) else fmt.bold_token(label)


def own_draws_sentence(mine: int) -> str:
    """The student's own draws in the round (each counted once, by its number in the student's seeded stream)."""
    if not mine:
        return "You have no draws in this round yet; each one you make counts once, also after a reload."
    return (
        f"Your draws in this round: {mine:,} (draw numbers 0…{mine - 1} of your seed; each counts once, "
        "also after a reload)."
    )


def pooled_sentence(n_draws: int, n_students: int, largest_gap: float, gap_token: str) -> str:
    """How many draws the class made, and how far the pooled frequencies still are from the probabilities."""
    if n_draws == 0:
        return "No draws yet: students press **Draw for the class** and the bars fill."
    return (
        f"{fmt.count(n_draws, 'draw')} by {fmt.count(n_students, 'student')}, each from their own seed. "
        f"The biggest gap between a bar and its probability is {largest_gap:.3f} ({_label(gap_token)}): "
        "it shrinks roughly as 1/√n, so every draw the room adds brings the bars closer."
    )


def bins_sentence(n_bars: int, plan: BinPlan) -> str:
    """Why the χ² test counts fewer bins than the chart has bars (or more: every survivor, not only those shown)."""
    need = f"The χ² test needs every bin expected at least {MIN_EXPECTED:g} times"
    counted = f"so it counts {fmt.count(plan.n_bins, 'bin')} where the chart shows {fmt.count(n_bars, 'bar')}."
    if not plan.pooled:
        return f"{need}; here each of the {fmt.count(plan.alone, 'possible token')} is, {counted}"
    alone = fmt.count(plan.alone, "token")
    others = fmt.count(plan.pooled, "other possible token")
    if plan.pooled_bin:
        return (
            f"{need}: it keeps the {alone} expected that often as bins of their own and pools the {others} "
            f"(each expected fewer times) into one, {counted}"
        )
    return (
        f"{need}: it keeps the {alone} expected that often as bins of their own; the {others} together are "
        f"expected fewer than {MIN_EXPECTED:g} times, so they join the smallest of those, {counted}"
    )


def guesses_sentence(
    n: int,
    top_token: str,
    top_prob: float,
    top_guessed: int,
    most_guessed: str | None,
    most_count: int,
    most_prob: float,
    several: int,
) -> str:
    """The class's guesses against the model's top token."""
    if n == 0:
        return "No guesses were sent in this round."
    text = (
        f"The model's most probable next token is {fmt.bold_token(top_token)} (p = {top_prob:.3f}); "
        f"{fmt.count(top_guessed, 'student')} of {n:,} guessed it. "
    )
    if most_guessed is not None and most_guessed != top_token:
        text += (
            f"The class's favourite, {fmt.bold_token(most_guessed)} ({most_count:,} of {n:,}), has p = {most_prob:.3f} "
            "for the model."
        )
    elif most_guessed is not None:
        text += "The class's favourite is the model's favourite too."
    if several:
        text += (
            f" ({fmt.count(several, 'guess', 'guesses')} of more than one token counted by "
            f"{'its' if several == 1 else 'their'} first token.)"
        )
    return text


def too_few_sentence(n_draws: int) -> str:
    """Why there is no χ² verdict yet (Pearson's test needs bins expected at least 5 times; see chi_square_gof)."""
    return (
        f"{fmt.count(n_draws, 'draw')} so far: too few for a χ² test, which needs at least two bins each expected "
        f"at least {MIN_EXPECTED:g} times. Keep drawing."
    )


def space_note(labels: Sequence[str]) -> str:
    """' (In the labels, · is a space.)' when a token label shows one (the chart's and the sentence's notation)."""
    shown = [visible(label) for label in labels if not label.startswith(OTHER_PREFIX)]
    marks = [
        (mark, name)
        for mark, name in (("·", "a space"), ("↵", "a new line"), ("→", "a tab"))
        if any(mark in text for text in shown)
    ]
    if not marks:
        return ""
    return " (In the token labels, " + ", ".join(f"{mark} is {name}" for mark, name in marks) + ".)"
