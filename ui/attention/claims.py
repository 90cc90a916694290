"""Sentences of the Attention page, each computed from the numbers it quotes (the pronoun's head counts with their sign test)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ui.common import format as fmt


def clearly_more(per_layer: np.ndarray, first: int, second: int) -> bool:
    """Whether key ``first`` gets clearly more weight than key ``second`` in ``per_layer`` (L, keys): the layers are
    taken as samples of the head-averaged weight, and the mean of the per-layer differences must exceed twice its
    standard error (a paired test at about 95%); inside that, the two are a tie."""
    differences = np.asarray(per_layer, dtype=np.float64)[:, first] - np.asarray(per_layer, dtype=np.float64)[:, second]
    if len(differences) < 2:
        return bool(differences.mean() > 0)
    error = differences.std(ddof=1) / np.sqrt(len(differences))
    return bool(differences.mean() > 2 * error)


def sink_sentence(weights: np.ndarray, pieces: Sequence[str], query: int) -> str:
    """Where a query's weight goes on average (over heads and layers): the first token when it gets the most, and
    a tie when the runner-up is within noise (``clearly_more``)."""
    per_layer = np.asarray(weights, dtype=np.float64)[:, : query + 1]  # (L, keys)
    mean = per_layer.mean(axis=0)  # (keys,) mean over layers
    top = int(np.argmax(mean))
    if query == 0:
        return f"The first token can only look at itself: all of its weight, in every head, stays on {fmt.code_span(pieces[0])}."
    runner = int(np.argsort(mean)[-2])
    tie = not clearly_more(per_layer, top, runner)
    if top == 0 and not tie:
        return (
            f"Averaged over heads and layers, {fmt.pct(mean[0])} of the weight of {fmt.code_span(pieces[query])} goes to "
            f"the **first token** {fmt.code_span(pieces[0])}, more than to any other: models use it as a resting place (an "
            "*attention sink*) when a head has nothing to fetch. The average hides what single heads do."
        )
    if tie:
        first = "the **first token** " if top == 0 else ""
        return (
            f"Averaged over heads and layers, {fmt.code_span(pieces[query])} gives about as much weight to {first}"
            f"{fmt.code_span(pieces[top])} at position {top} ({fmt.pct(mean[top])}) as to {fmt.code_span(pieces[runner])} at "
            f"position {runner} ({fmt.pct(mean[runner])}): across the {len(per_layer)} layers their difference is "
            "within twice its standard error, a tie. Single heads differ from this average."
        )
    return (
        f"Averaged over heads and layers, the most weight of {fmt.code_span(pieces[query])} ({fmt.pct(mean[top])}) goes "
        f"to {fmt.code_span(pieces[top])} at position {top}; the first token gets {fmt.pct(mean[0])}. Single heads differ "
        "from this average."
    )


def window_sentence(
    window: int,
    n_local: int,
    local_max: float,
    outside_cells: int,
    global_layers: Sequence[int],
    outside_share: Sequence[float],
    sink_share: Sequence[float],
    sink_piece: str,
) -> str:
    """What the sliding window hides, measured: the largest weight a local layer puts beyond its window, and for
    each global layer the weight that queries past the window put that far back, the first token's (the sink,
    ``sink_piece``) apart from the text's. ``outside_share`` and ``sink_share`` are indexed by layer; the sink is
    beyond every such query's window, so counting it as "far back" text would overstate what the window hides."""
    by_layer = ", ".join(
        f"**{fmt.pct(max(0.0, outside_share[i] - sink_share[i]), 1)}** on text and {fmt.pct(sink_share[i], 1)} on "
        f"the sink (layer {i})"
        for i in global_layers
    )
    return (
        f"- Measured over all {n_local} local layers and their heads: the largest weight any query puts on a key "
        f"outside its window is **{local_max:g}** ({outside_cells:,} such (query, key) pairs per head and layer).\n"
        f"- In the global layers, queries past position {window - 1} put on average {by_layer} among keys "
        f"{window} or more positions back. The sink is the first token, {fmt.code_span(sink_piece)}, where heads park "
        "weight they do not need: only the text's share is information a local layer could not have read."
    )


def drawn_tokens_note(n_drawn: int, n_total: int) -> str:
    """What a chart of the recorded attention leaves out, said where it is drawn: "" when it draws every token."""
    if n_drawn >= n_total:
        return ""
    return (
        f" Only the first {n_drawn:,} of the prompt's {n_total:,} tokens are drawn (and traced): their rows are "
        "exact, since the causal mask keeps later tokens from changing them, but the later tokens are not shown."
    )


def _heads(best: Sequence[tuple[int, int, float]]) -> str:
    return ", ".join(f"{fmt.head(layer, head)} {fmt.pct(weight)}" for layer, head, weight in best)


def no_pronoun_sentence(example: str) -> str:
    """The section's sentence for a prompt with no pronoun of the kinds the page reads."""
    return (
        "This prompt has no pronoun (it, he, she, they, …; er, sie, es; il, elle) whose heads could be read "
        f"here. Put one after two nouns, as in “{example}”, to see which heads send it to each noun."
    )


SIGNIFICANCE = 0.05  # a head-count margin below this chance (sign test) is a verdict; at or above it, a tie


def sign_test(leading: int, other: int) -> float:
    """Two-sided sign-test p-value of ``leading`` heads against ``other``: how often heads that each picked one of
    the two words at random, at even odds, would split at least this unevenly. 1.0 for equal counts; 19 against 18
    gives 1.0, 25 against 12 gives 0.047."""
    n = leading + other
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(max(leading, other), n + 1)) / 2**n
    return min(1.0, 2 * tail)


def pronoun_sentence(
    pronoun: str,
    antecedents: Sequence[tuple[str, int, Sequence[tuple[int, int, float]], bool]],
    n_heads: int,
    min_share: float,
    n_previous_token: int = 0,
) -> str:
    """Which earlier nouns a pronoun's heads send it to, counted over every head.

    ``antecedents`` holds (noun, heads that send the pronoun to it, its strongest heads as (layer, head, share),
    whether the word is the first token alone); a head sends the pronoun to the word that gets the most of its
    row among the earlier words (the first token left out), when that is at least ``min_share``.
    ``n_previous_token`` heads were left out: their strongest key is the token right before the pronoun. The two
    words most heads pick make a verdict only when a sign test (``sign_test``) puts their margin below
    ``SIGNIFICANCE``: a one-head margin, or any split heads picking at random would often give, is a tie.
    """
    p = fmt.code_span(pronoun)
    if not antecedents:
        return (
            f"No noun comes before {p} (a word after *the*, *a*, *his*, … or a name), so there is nothing for its "
            "heads to resolve here. Put one or two nouns before it."
        )
    sink = [word for word, _, _, first in antecedents if first]
    counted = [(word, n, best) for word, n, best, first in antecedents if not first]
    note = (
        f" {', '.join(fmt.code_span(w) for w in sink)} is the first token, where heads park weight they do not need, so "
        "no head is counted for it."
        if sink
        else ""
    )
    if n_previous_token:
        note += (
            f" {fmt.count(n_previous_token, 'head')} whose strongest key is the token right before {p} "
            f"{'are' if n_previous_token != 1 else 'is'} not counted for it: such a head reads position, not "
            "reference."
        )
    total = sum(n for _, n, _ in counted)
    listed = ", ".join(fmt.code_span(w) for w, _, _ in counted)
    if not counted:
        return f"The only noun before {p} is the first token.{note}"
    if total == 0:
        return (
            f"No head puts {fmt.pct(min_share)} or more of the weight of {p} on an earlier noun "
            f"({listed}) ahead of every other earlier word: here its heads look elsewhere.{note}"
        )
    parts = [
        f"{fmt.code_span(word)} in {n}" + (f" (strongest {_heads(best)})" if best and n else "")
        for word, n, best in sorted(counted, key=lambda item: -item[1])
    ]
    text = (
        f"Leaving out the first token, {total} of the {n_heads} heads send {p} mostly to one noun before "
        f"it (at least {fmt.pct(min_share)} of their weight, more than any other earlier word): "
        + "; ".join(parts)
        + "."
    )
    ranked = sorted(counted, key=lambda item: -item[1])
    if len(counted) > 1:
        (first, n_first, _), (second, n_second, _) = ranked[0], ranked[1]
        chance = sign_test(n_first, n_second)
        if chance < SIGNIFICANCE:
            text += (
                f" Of the {len(counted)} nouns before {p}, more heads pick {fmt.code_span(first)} than any other: "
                f"{n_first} against {n_second}, a split that heads picking either word at random would give only "
                f"{fmt.pct(chance, 1)} of the time. In this model {p} leans to *{first}*."
            )
        elif n_first == n_second:
            tied = [w for w, n, _ in ranked if n == n_first]
            text += (
                f" Of the {len(counted)} nouns before {p}, as many heads pick "
                + " as ".join(fmt.code_span(w) for w in tied)
                + ": the heads do not settle it."
            )
        else:
            text += (
                f" {n_first} heads for {fmt.code_span(first)} against {n_second} for {fmt.code_span(second)} is a tie: heads "
                f"picking either word at random would split at least this unevenly {fmt.pct(chance, 1)} of the time "
                f"(a sign test; a verdict needs less than {fmt.pct(SIGNIFICANCE, 1)}), so the heads do not settle it."
            )
    return text + note


def top_heads_sentence(query_piece: str, key_piece: str, best: Sequence[tuple[int, int, float]]) -> str:
    """The heads that put the most weight from one query on one key, strongest first."""
    listed = ", ".join(f"layer {layer} head {head} ({fmt.pct(weight)})" for layer, head, weight in best)
    return f"- Heads that send {fmt.code_span(query_piece)} most to {fmt.code_span(key_piece)}: {listed}."


def _where(first: int, last: int) -> str:
    return f"position {first}" if first == last else f"positions {first}–{last}"


def causal_suggestion(
    query_piece: str, query: int, later: tuple[str, int, int] | None, earlier: tuple[str, int, int] | None
) -> str:
    """What an edit of the prompt can and cannot change in the heads from ``query``: the causal mask's lesson.

    ``later`` and ``earlier`` are words of the user's own text, (text, first position, last position): one after the
    query (an edit there changes none of its weights) and one before it (an edit there can). Only words the user
    typed are offered (never a chat template's).
    """
    q = fmt.code_span(query_piece)
    if later is None and earlier is None:
        if query == 0:
            return (
                f"- This prompt is one token: {q} can only attend to itself, so every weight is 1. Add words after "
                "it and watch the later tokens spread their weight over the earlier ones."
            )
        return ""
    parts = []
    if later is not None:
        word, first, last = later
        parts.append(
            f"Changing {fmt.code_span(word)} ({_where(first, last)}) cannot move any head of {q} (position {query}): "
            f"it comes later, and the causal mask hides later tokens, so every weight from {q} stays exactly "
            f"the same. Only queries at or after position {first} can see it."
        )
    if earlier is not None:
        word, first, last = earlier
        parts.append(
            f"Changing {fmt.code_span(word)} ({_where(first, last)}), which comes before {q}, can: try another word "
            f"there and watch the row of {q} in the heatmaps change."
        )
    return "- " + " ".join(parts)


def previous_token_sentence(previous_heads: np.ndarray, n_tokens: int) -> str | None:
    """How many heads look at the previous token in the first and last few layers (None for a prompt too short).

    ``previous_heads`` is (L, H) bool: a head whose strongest key is the previous token for
    most queries (``compute_attention.previous_token_heads``).
    """
    if n_tokens < 4:
        return None
    n_layers, n_heads = previous_heads.shape
    band = max(1, n_layers // 6)
    early, late = int(previous_heads[:band].sum()), int(previous_heads[-band:].sum())
    total = band * n_heads
    chance = sign_test(early, late)
    if early == late:
        verdict = "as many early as late heads do"
    elif chance >= SIGNIFICANCE:
        verdict = (
            f"a difference heads counted at random would show {fmt.pct(chance, 1)} of the time (a sign test), so "
            "neither early nor late heads clearly do it more"
        )
    elif early > late:
        verdict = "early heads look at the previous token more often; later ones reach further"
    else:
        verdict = "here, unusually, late heads look at the previous token more often than early ones"
    return (
        f"- Compare early and late layers: in layers 0–{band - 1}, {early} of {total} heads put most weight on "
        f"the previous token; in layers {n_layers - band}–{n_layers - 1}, {late} of {total}: {verdict}."
    )
