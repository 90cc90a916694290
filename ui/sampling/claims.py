"""Sentences of the Sampling page (and the class's pooled draws), each computed from the numbers it quotes."""

from __future__ import annotations

from ui.common import format as fmt

P_THRESHOLD = 0.001  # χ² verdict: below this p-value the draws are called inconsistent with the probabilities


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
