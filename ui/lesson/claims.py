"""The sentence under a lesson's reveal, computed from the model's numbers and the learner's answer.

Each function takes the truth (``ui.lesson.answers``) and the graded answer, and says what the model gave, what the
learner said, and how far apart they are, in numbers; plus the score's sentence at the end, and each question's
wording (the file's own, or its kind's).
"""

from __future__ import annotations

from ui.common import format as fmt
from ui.lesson.answers import Direction, Graded, NextToken, Number
from ui.lesson.format import Step

QUANTITY_LABELS = {
    "probability": "the probability",
    "entropy": "the entropy (bits)",
    "top_p_kept": "the tokens kept",
    "top_probability": "the top token's probability",
    "attention": "the share of attention",
    "kv_bytes": "the KV cache (MiB)",
    "tokens": "the number of tokens",
}
DIRECTION_UNITS = {"entropy": " bits", "top_p_kept": " tokens"}
DEFAULT_ASK = {
    "pick": "Which token does the model find most likely next?",
    "type": "Type the word you think the model finds most likely next.",
    "direction": "Which way does it go?",
}


def question_text(step: Step) -> str:
    question = step.question
    assert question is not None
    if question.ask:
        return question.ask
    if question.kind == "estimate":
        return f"Estimate {QUANTITY_LABELS[question.quantity]}."
    return DEFAULT_ASK[question.kind]


def _pct(p: float) -> str:
    return f"{100 * p:.1f} %" if p >= 0.001 else f"{100 * p:.2g} %"


def _value(number: float, unit: str) -> str:
    if unit == "bytes":
        return f"{number:,.0f} bytes ({number / 2**20:.1f} MiB)"
    if unit == "tokens":
        return f"{number:,.0f} tokens" if float(number).is_integer() else f"{number:,.3g} tokens"
    return f"{number:.3f}" if not unit else f"{number:.3g} {unit}"


def next_token_sentence(found: NextToken, graded: Graded, rank: int | None, probability: float | None) -> str:
    """The model's favourite with its probability; the learner's token with its own and its rank."""
    right = f"{fmt.bold_token(found.texts[0])} at {_pct(found.probs[0])} (T = {found.temperature:g})"
    if graded.right:
        return f"Right: the model's most likely next token is {right}."
    if graded.token_id is None or rank is None or probability is None:
        return f"The model's most likely next token is {right}; what you typed gives no token."
    return (
        f"The model's most likely next token is {right}. Yours, {fmt.bold_token(graded.answer)}, gets "
        f"{_pct(probability)}: rank {rank:,} of {found.vocab_size:,} tokens, "
        f"{found.probs[0] / probability:.3g}× less likely than the favourite."
        if probability > 0
        else f"The model's most likely next token is {right}; yours gets no probability at all."
    )


def number_sentence(found: Number, graded: Graded) -> str:
    """The true value, the estimate, the gap, and whether the gap is within the file's tolerance."""
    assert graded.value is not None
    gap = abs(graded.value - found.value)
    within = "within" if graded.right else "outside"
    return (
        f"{'Right' if graded.right else 'Not this time'}. {found.about[:1].upper()}{found.about[1:]}: "
        f"**{_value(found.value, found.unit)}**. "
        f"Your estimate, {_value(graded.value, found.unit)}, is {_value(gap, found.unit)} off: {within} the "
        f"±{_value(found.tolerance, found.unit)} that counts as right."
    )


def direction_sentence(found: Direction, graded: Graded, quantity_label: str) -> str:
    """The quantity before and after the change, and which way it went."""
    unit = DIRECTION_UNITS.get(found.quantity, "")
    what = (
        f"{quantity_label} is {found.before:.3g}{unit} at {found.setting} = {found.start:g} and {found.after:.3g}{unit} "
        f"at {found.to:g}"
    )
    moved = (
        "it stays the same"
        if found.answer == "stays the same"
        else f"it {found.answer} by {abs(found.after - found.before):.3g}{unit}"
    )
    verdict = "Right" if graded.right else f"You said it {graded.answer}; not this time"
    return f"{verdict}: {what}: {moved}."


def score_sentence(right: int, asked: int, answered: int) -> str:
    if asked == 0:
        return "This lesson asks no questions: nothing to score."
    skipped = asked - answered
    return f"You answered {right} of {asked} questions right" + (f" ({skipped} left unanswered)." if skipped else ".")
