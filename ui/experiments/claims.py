"""Sentences of the Experiments page, each computed from the numbers it quotes: the intervention's reach on the lens,
the head sweep, the patching setup and its result, the logit attribution's sum.

Plain numbers in, a markdown string out (no Streamlit, no model), so ``tests/test_claims.py`` checks each against
the numbers it quotes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ui.common import format as fmt
from ui.common.token_text import visible


def _token(text: str) -> str:
    return visible(text) or "∅"


def action_phrase(mode: str, factor: float) -> str:
    """What the head sweep does to each head: 'switched off', 'replaced by its mean', 'scaled by 0.5'."""
    return {"zero": "switched off", "mean": "replaced by its mean", "scale": f"scaled by {factor:g}"}[mode]


def lens_region_caption(
    layer_labels: Sequence[str], region: tuple[int, int] | None, keep_from: int, changed: int, changed_outside: int
) -> str:
    """Where an edit can reach on the lens (the outlined block) and how many cells changed their top guess."""
    if region is None:
        return "With no intervention nothing is outlined or dimmed: every cell is the plain run's."
    row, col = region
    inside = changed - changed_outside
    return (
        f"The outlined block starts at **{layer_labels[min(row, len(layer_labels) - 1)]}** and position "
        f"**{keep_from + col}**: an edit cannot reach earlier blocks, nor (attention looks only back) earlier "
        f"positions, which are dimmed. {fmt.count(inside, 'cell')} there changed "
        f"{'its' if inside == 1 else 'their'} top guess; {changed_outside:,} outside it."
    )


def sweep_intro(n_layers: int, n_heads: int, action: str) -> str:
    return (
        f"Each of the {n_layers * n_heads} heads is changed alone ({action}), on the plain run without the edits "
        f"above, and the change in the target's log-probability recorded: {fmt.count(n_layers, 'forward')}, each "
        f"over a batch of {n_heads} copies of the prompt (copy h changes head h)."
    )


def sweep_sentence(delta: np.ndarray, baseline: float, target: str) -> str:
    """The baseline log-probability and the three heads whose change lowers it most. ``delta``: (layers, heads)."""
    n_heads = delta.shape[1]
    order = delta.flatten().argsort()[:3]
    worst = ", ".join(f"{fmt.head(i // n_heads, i % n_heads)} ({fmt.signed(delta.flat[i], 3)})" for i in order)
    rise = float(delta.max())
    tail = f"the largest rise is {fmt.signed(rise, 3)}" if rise > 0 else "no head's change raises it"
    return (
        f"log p({_token(target)}) is **{fmt.fixed(baseline, 3)}** without changes. The heads whose change lowers it "
        f"most: {worst}; {tail}."
    )


def patch_setup_sentence(
    clean_answer: str,
    corrupt_answer: str,
    clean_gap: float,
    corrupt_gap: float,
    first_difference: int,
    clean_piece: str,
    corrupt_piece: str,
    n_layers: int,
) -> str:
    return (
        f"Clean answer **{_token(clean_answer)}**, corrupted answer **{_token(corrupt_answer)}**: d = "
        f"{clean_gap:+.3f} on the clean run, {corrupt_gap:+.3f} on the corrupted one. The prompts first differ at "
        f"position {first_difference} ({_token(clean_piece)} / {_token(corrupt_piece)}); before it both runs hold "
        "the same stream, so a patch there restores exactly 0 and is not run. Each later position is one forward "
        f"over a batch of {n_layers} copies (copy l patches after block l), reusing the corrupted run's KV cache for "
        "the positions before it, which a patch cannot change."
    )


def patching_sentence(restored: np.ndarray, first_difference: int) -> str:
    """Which blocks restore at least half of the clean answer at the first differing and at the last position.
    ``restored``: (layers, positions), 0 = no help, 1 = the clean answer fully restored."""
    n_layers, last = restored.shape[0], restored.shape[1] - 1
    held = [layer for layer in range(n_layers) if restored[layer, first_difference] >= 0.5]
    taken = [layer for layer in range(n_layers) if restored[layer, last] >= 0.5]
    if not held:
        sentence = f"No patch at position {first_difference} restores half of the clean answer"
    elif held == list(range(held[0], held[-1] + 1)):
        blocks = f"block {held[0]}" if len(held) == 1 else f"blocks {held[0]}–{held[-1]}"
        sentence = f"Patching position {first_difference} restores at least half of it after {blocks}"
    else:
        sentence = (
            f"Patching position {first_difference} restores at least half of it after {len(held)} of the "
            f"{n_layers} blocks, the last being block {held[-1]}"
        )
    if taken and taken == list(range(taken[0], n_layers)):
        sentence += f"; patching the last position does from block {taken[0]} on"
    elif taken:
        sentence += f"; patching the last position does after {fmt.count(len(taken), 'block')} (the first {taken[0]})"
    else:
        sentence += "; no patch at the last position restores half"
    return sentence + f". The best single patch restores {fmt.pct(float(restored.max()))}."


def attribution_sentence(
    token: str, logit: float, n_terms: int, total: float, residual: float, bound: float, intervened: bool
) -> str:
    return (
        f"The logit of {_token(token)}{' (with the intervention above)' if intervened else ''} is **{logit:.4f}**; "
        f"the {n_terms} terms sum to **{total:.4f}** (difference {residual:+.1e}, within the rounding bound "
        f"{bound:.1e} derived from float arithmetic). **The approximation:** the final norm divides the stream by its "
        "size σ, which depends on every term; here σ is frozen at this run's value, so each head, MLP and the "
        "embeddings add their own share exactly. A term is *not* what the logit would lose without that component — "
        "removing it would change σ and every later layer; that is what an ablation measures."
    )
