"""Sentences of the Transformer block & logit lens page, each computed from the numbers its chart draws."""

from __future__ import annotations

from collections.abc import Sequence

from ui.common import format as fmt


def _runs(indices: Sequence[int]) -> list[tuple[int, int]]:
    """Consecutive runs of sorted indices, as (first, last) pairs."""
    runs: list[tuple[int, int]] = []
    for i in indices:
        if runs and i == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    return runs


def _layer_name(label: str) -> str:
    return "the embeddings alone" if label == "embed" else label


def _span(layer_labels: Sequence[str], run: tuple[int, int]) -> str:
    first, last = run
    if first == last:
        return _layer_name(layer_labels[first])
    if layer_labels[first] == "embed":
        return f"the embeddings to {layer_labels[last]}"
    return f"layers {layer_labels[first].removeprefix('layer ')}–{layer_labels[last].removeprefix('layer ')}"


def answer_formation_sentence(
    layer_labels: Sequence[str], top_guesses: Sequence[str], final_probabilities: Sequence[float]
) -> str:
    """Which readouts put the final answer on top at the last position, and how sure they are.

    ``top_guesses[i]`` is readout i's top-1 token at the last position (the last readout is
    the model's output, so its top guess is the final answer); ``final_probabilities[i]`` is
    the probability readout i gives the final answer.
    """
    final, last = top_guesses[-1], len(top_guesses) - 1
    leads = [i for i, guess in enumerate(top_guesses) if guess == final]
    runs = _runs(leads)
    peak = max(range(len(final_probabilities)), key=lambda i: final_probabilities[i])
    if len(runs) == 1 and runs[0][0] == last:
        where = "only the last layer puts it on top"
    elif len(runs) == 1:
        where = f"it is the top guess from **{_layer_name(layer_labels[runs[0][0]])}** on"
    else:
        spans = [_span(layer_labels, run) for run in runs]
        listed = ", ".join(spans[:-1]) + f" and {spans[-1]}"
        before_last = runs[-2]  # the lead just before the final one: other guesses lead right after it
        back = (
            "only the output puts it back on top"
            if runs[-1][0] == last
            else f"it is back on top from {_layer_name(layer_labels[runs[-1][0]])} on"
        )
        where = (
            f"it is the top guess in {len(leads)} of the {len(top_guesses)} readouts ({listed}); after "
            f"{_span(layer_labels, before_last)} other guesses lead, and {back}"
        )
    sure = (
        f"; the surest readout is {_layer_name(layer_labels[peak])} (p = {final_probabilities[peak]:.2f})"
        if peak != last
        else ""
    )
    return (
        f"At the last position the final answer is {fmt.bold_token(final)}: {where}. It gets p = "
        f"{final_probabilities[-1]:.2f} at the output{sure}."
    )


def lens_suggestion(prompt: str | None, answer: str | None, current_prompt: str) -> str:
    """The "find where the answer takes over" suggestion, for an example checked on this model (``prompt`` None:
    no candidate holds, and the suggestion asks for a prompt whose answer the user knows instead)."""
    if prompt is None:
        return (
            "- Type a prompt whose next word you know (a capital, a weekday after three others) and find the layer "
            "where that word takes over."
        )
    if prompt == current_prompt:
        return (
            f"- This model answers {fmt.bold_token(answer)} here: find the layer where it takes over in the chart above, "
            "and how sure the readouts are before it."
        )
    return (
        f"- Change the prompt to “{prompt}”: this model answers it with {fmt.bold_token(answer)}. Find the layer where "
        f"{fmt.bold_token(answer)} takes over."
    )
