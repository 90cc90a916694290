"""Sentences of the class view (``pages/85_class.py``): what the pooled draws and the guesses show.

Each helper takes the numbers its chart draws and returns the sentence that holds for them.
"""
from __future__ import annotations

from ui.claims.predicting import _bold, _plural


def pooled_sentence(n_draws: int, n_students: int, largest_gap: float, gap_token: str) -> str:
    """How many draws the class made, and how far the pooled frequencies still are from the probabilities."""
    if n_draws == 0:
        return "No draws yet: press **Draw for the class** and watch the bars fill."
    return (f"{_plural(n_draws, 'draw')} by {_plural(n_students, 'student')}, each from their own seed. "
            f"The biggest gap between a bar and its probability is {largest_gap:.3f} ({_bold(gap_token)}): "
            "it shrinks roughly as 1/√n, so every draw the room adds brings the bars closer.")


def guesses_sentence(n: int, top_token: str, top_prob: float, top_guessed: int, most_guessed: str | None,
                     most_count: int, most_prob: float, several: int) -> str:
    """The class's guesses against the model's top token."""
    if n == 0:
        return "No guesses yet."
    text = (f"The model's most probable next token is {_bold(top_token)} (p = {top_prob:.3f}); "
            f"{_plural(top_guessed, 'student')} of {n:,} guessed it. ")
    if most_guessed is not None and most_guessed != top_token:
        text += (f"The class's favourite, {_bold(most_guessed)} ({most_count:,} of {n:,}), has p = {most_prob:.3f} "
                 "for the model.")
    elif most_guessed is not None:
        text += "The class's favourite is the model's favourite too."
    if several:
        text += f" ({_plural(several, 'guess', 'guesses')} of more than one token counted by their first token.)"
    return text


def too_few_sentence(n_draws: int) -> str:
    """Why there is no χ² verdict yet (Pearson's test needs bins expected at least 5 times; see chi_square_gof)."""
    return (f"{_plural(n_draws, 'draw')} so far: too few for a χ² test, which needs every bin expected at least "
            "5 times. Keep drawing.")
