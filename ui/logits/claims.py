"""Sentences of the Logits & temperature page, each computed from the numbers its chart draws."""

from __future__ import annotations

from collections.abc import Sequence

from ui.common import format as fmt

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
