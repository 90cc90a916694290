"""Sentences of the predicting pages (Transformer block & logit lens, Logits & temperature, Sampling).

Each helper takes the numbers its chart draws (token texts in the display notation of
``ui.token_text``) and returns the sentence that holds for them.
"""

from __future__ import annotations

from collections.abc import Sequence

from ui.figures import format as fmt

P_THRESHOLD = 0.001  # χ² verdict: below this p-value the draws are called inconsistent with the probabilities


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


# -- Transformer block & logit lens ---------------------------------------------------------
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


# -- Logits & temperature ---------------------------------------------------------------------
STAGE_ORDER_CAPTION = (
    "Numbers from the engine's own sampler (`sample(record=True)`), in its order: repetition penalty "
    "→ logits ÷ T → softmax → top-k → top-p → min-p → renormalise. The first row is the softmax at "
    "T = 1, for reference. Grey cells were cut at that stage."
)


def greedy_sentence(top_logit_token: str, greedy_token: str, same: bool) -> str:
    """What greedy decoding picks, and why it is not the highest raw logit when they differ."""
    if same:
        return f"**Greedy decoding** takes the highest score: {fmt.bold_token(greedy_token)}."
    return (
        f"**Greedy decoding** would take {fmt.bold_token(top_logit_token)}, but the repetition penalty lowers tokens "
        f"already in the prompt, so it takes {fmt.bold_token(greedy_token)}."
    )


FILTER_STAGES = ("top_k", "top_p", "min_p")  # the stages that remove tokens; softmax and temperature remove none


def stage_counts(stage_names: Sequence[str], nonzero: dict[str, int], vocab_size: int) -> list[str]:
    """What each of the sampler's stages did, for its row label: softmax and temperature remove nothing (a token
    whose probability is too small for float32 rounds to exactly 0 there, which is said as such); top-k, top-p and
    min-p remove tokens (counted against the stage before); the final row counts the tokens that can be drawn.

    ``nonzero[name]`` is the number of tokens with probability > 0 after stage ``name``, over the whole vocabulary.
    """
    out, before = [], vocab_size
    for name in stage_names:
        left = nonzero[name]
        if name == "final":
            out.append(f"{left:,} can be drawn")
        elif name in FILTER_STAGES:
            out.append(f"{left:,} left, {before - left:,} removed")
        else:  # softmax (T = 1 reference) or temperature: nothing removed
            zeros = vocab_size - left
            out.append("nothing removed" + (f", {zeros:,} round to 0" if zeros else ""))
        if name != "softmax":  # the T = 1 row is a reference beside the chain, not a step of it
            before = left
    return out


def survivors_sentence(final_left: int, only_token: str | None, removed: int = 0, rounded_to_zero: int = 0) -> str:
    """How many tokens can be drawn after every stage, and why the others cannot: ``removed`` by the filters, or
    ``rounded_to_zero`` by float32 at this temperature (softmax itself removes nothing)."""
    if final_left == 1 and only_token is not None:
        text = (
            f"Only **one token can be drawn** after every stage: {fmt.bold_token(only_token)}, so every draw picks it — the "
            "same as greedy."
        )
    else:
        text = f"**{final_left:,} tokens can be drawn** and share the final, renormalised probability."
    zeros = (
        f"{rounded_to_zero:,} token{'s' * (rounded_to_zero != 1)} round{'s' * (rounded_to_zero == 1)} to exactly 0 "
        "in float32 at this temperature (too small to represent), so never drawn"
    )
    if removed and rounded_to_zero:
        text += f" The filters removed {removed:,}; {zeros}."
    elif removed:
        text += f" The filters removed {removed:,}."
    elif rounded_to_zero:
        text += f" No filter removed any; {zeros}."
    return text


def filter_suggestion(
    temperature: float, top_probability: float, kept_top_p: int, kept_min_p: int, top_p: float = 0.5, min_p: float = 0.1
) -> str:
    """The top-p / min-p experiment, with what each would keep on this prompt at this temperature."""
    if kept_top_p == kept_min_p:
        verdict = "here both keep the same number"
    else:
        verdict = f"so {'top-p' if kept_top_p < kept_min_p else 'min-p'} cuts more here"
    return (
        f"- Set top-p to {top_p:g}, then min-p to {min_p:g}: at T = {temperature:g} on this prompt, top-p {top_p:g} "
        f"alone keeps {fmt.count(kept_top_p, 'token')} and min-p {min_p:g} alone {fmt.count(kept_min_p, 'token')}, "
        f"{verdict}. Top-p keeps the most probable tokens until their mass reaches {top_p:g}; min-p keeps every "
        f"token above {min_p:g} × the top probability ({top_probability:.3f} here, a bar of "
        f"{min_p * top_probability:.3f}). Both depend on how sure the model is about this prompt."
    )


# -- Sampling ---------------------------------------------------------------------------------
def histogram_sentence(n_bins: int, statistic: float, dof: int, p_value: float) -> str:
    """The χ² verdict of the thousand draws (with the threshold it uses)."""
    if dof == 0:
        return "Only one token can be drawn, so every draw is that token."
    consistent = p_value >= P_THRESHOLD
    verdict = "consistent with" if consistent else "**not** consistent with"
    compare = "≥" if consistent else "<"
    return (
        f"Pearson's χ² over {n_bins} bins: χ² = {statistic:.2f} with {fmt.count(dof, 'degree')} of freedom, "
        f"p = **{p_value:.3g}** {compare} {P_THRESHOLD:g} — the draws are {verdict} the probabilities. "
        "The law of large numbers: the more draws, the closer the bars."
    )


def greedy_vs_sampled_sentence(temperature: float, identical: bool) -> str:
    """Greedy against the user's temperature: what each row follows."""
    if temperature == 0:
        return (
            "Your temperature is 0, so the second row is greedy too: both take the top token at every step "
            "and no u is drawn."
        )
    same = " Here the two continuations are identical: every u landed in the top token's range." if identical else ""
    return (
        "Greedy always takes the top token (the sampler gives it all the mass, p = 1); sampling follows the "
        "seed's u values." + same
    )


def sampling_suggestions(temperature: float) -> list[str]:
    """The Sampling page's "what to try next", each true for the settings in force (at T = 0 no u is drawn)."""
    first = (
        "- Set T above 0 first: at T = 0 every draw is the top token and no u is drawn. Then press **Draw again** "
        "a few times, change the seed in the sidebar and start over: the same seed always replays the same draws."
        if temperature == 0
        else "- Press **Draw again** a few times, then change the seed in the sidebar and start over: the same seed "
        "always replays the same draws."
    )
    return [
        first,
        "- Draw 1,000 times at T = 0.3 and at T = 1.5: does the histogram still follow the probabilities? "
        "The χ² verdict says so either way.",
        "- Next: **Generation & KV cache** — repeat the draw, token after token.",
    ]


def two_settings_sentence(t_a: float, t_b: float, split: int | None) -> str:
    """Two temperatures, one seed: where the continuations part, and whether both drew u values."""
    where = "they never diverge" if split is None else f"they first differ at generated token #{split}"
    greedy = [name for name, t in (("A", t_a), ("B", t_b)) if t == 0]
    if len(greedy) == 2:
        stream = "Both are greedy (T = 0), so no u is drawn"
    elif greedy:
        stream = f"{greedy[0]} is greedy (T = 0) and draws no u; the other follows the seed's u values"
    else:
        stream = "Same seed, so the same stream of u values"
    return f"{stream}: {where}. Colour = the probability the sampler gave each chosen token."
