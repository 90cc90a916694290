"""Sentences of the Embeddings page, each computed from the numbers it quotes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ui.common import format as fmt


def closeness_sentence(word: str, near: str, far: str, cosine_near: float, cosine_far: float) -> str:
    """Which of two words a word's embedding row points nearer to, with the two cosines."""
    if cosine_near >= cosine_far:
        return (
            f"In this model the row of *{word}* points nearer to *{near}* (cosine {cosine_near:.2f}) than to "
            f"*{far}* ({cosine_far:.2f})."
        )
    return (
        f"In this model the row of *{word}* points nearer to *{far}* (cosine {cosine_far:.2f}) than to *{near}* "
        f"({cosine_near:.2f}): training does not always sort words the way we would."
    )


def pca_caption(n_vectors: int, explained: tuple[float, float], n_unlabelled: int) -> str:
    """The PCA map's caption: how much of the spread two axes keep (the sum of the axes' own shown shares), and
    which labels moved to the hover."""
    _, kept = fmt.parts_pct(explained)
    guide = (
        "so distances on the map are only a rough guide"
        if sum(explained) < 0.8
        else "so the map keeps most of their spread"
    )
    hidden = (
        f" {fmt.count(n_unlabelled, 'label')} would overlap another and "
        f"{fmt.plural_of(n_unlabelled, 'is', 'are')} left to the hover (every point has one)."
        if n_unlabelled
        else ""
    )
    return (
        f"PCA keeps the two directions along which these {n_vectors} vectors vary most; together they hold "
        f"{kept} of the variance, {guide}.{hidden} Words are taken with a leading space, as they appear "
        "inside a sentence."
    )


def variants_of(word: str, pieces: Sequence[str]) -> int:
    """How many of ``pieces``, from the first, are spellings of ``word`` itself (case, plural, leading space)."""
    count = 0
    for piece in pieces:
        if piece.strip().lower().removesuffix("s") != word:
            break
        count += 1
    return count


def neighbours_suggestion(word: str, in_prompt: bool, neighbours: Sequence[str]) -> str:
    """The "look at its neighbours" suggestion, with this model's real nearest rows of ``word``."""
    listed = ", ".join(fmt.code_span(p) for p in neighbours[:6])
    same = variants_of(word, neighbours)
    kind = (
        f"the first {same} are spellings of *{word}* itself (case, plural, a leading space)"
        if same > 1
        else f"the first is {'a spelling of' if same else 'not even a spelling of'} *{word}* itself"
    )
    where = f"Pick {fmt.code_span(' ' + word)} above" if in_prompt else f"Put *{word}* in the prompt and pick it above"
    return f"{where}: its nearest rows are {listed}; {kind}."


def repeated_token_sentence(pieces: Sequence[str], ids: Sequence[int], rows: np.ndarray) -> str:
    """A repeated token's two identical rows when the prompt has one (checked on the rows), else the experiment."""
    first_seen: dict[int, int] = {}
    for position, token_id in enumerate(ids[: len(rows)]):
        if token_id in first_seen:
            earlier = first_seen[token_id]
            if np.array_equal(rows[earlier], rows[position]):
                return (
                    f"{fmt.code_span(pieces[position])} appears at positions {earlier} and {position}: its two rows in the "
                    "heatmap are identical. Only RoPE, inside attention, tells them apart. **Attention** is next."
                )
        first_seen.setdefault(token_id, position)
    return (
        "Put the same word twice in the prompt (the same token: mind the leading space): its two rows in the "
        "heatmap are identical. Only RoPE, inside attention, tells them apart. **Attention** is next."
    )


def rope_pair_sentence(
    query_piece: str,
    key_piece: str,
    layer: int,
    head: int,
    weight: float,
    distance: int,
    layer_kind: str = "",
    scores: Sequence[float] = (),
) -> str:
    """The real query/key pair of the RoPE distance chart (``layer_kind``: e.g. "a local layer: RoPE base 10,000"),
    and, from ``scores`` (the pair scored at every distance drawn), how much distance changes it."""
    pair = (
        f"the query and the key of {fmt.code_span(query_piece)} itself"
        if distance == 0
        else f"the query of {fmt.code_span(query_piece)} and the key of {fmt.code_span(key_piece)}"
    )
    kind = f" ({layer_kind})" if layer_kind else ""
    text = (
        f"A real pair: {pair} in layer {layer}{kind}, head {head}, which puts {fmt.pct(weight)} of the weight from "
        f"one on the other. Undo their rotations, rotate them again as if they were *d* positions apart, and score "
        f"them: the red diamond, at the real distance {distance}, is the score the forward pass recorded; the line "
        "shows how the same two vectors would score nearer or farther."
    )
    if len(scores):
        low, high = float(np.min(scores)), float(np.max(scores))
        size = max(abs(low), abs(high)) or 1.0
        span = f"from {fmt.fixed(low, 2)} to {fmt.fixed(high, 2)}"
        if (high - low) < 0.01 * size:
            text += (
                f" For this pair distance barely matters: over distances 0–{len(scores) - 1} the score only goes "
                f"{span} ({fmt.pct((high - low) / size, 1)} of its size), so the axis is zoomed in."
            )
        else:
            text += f" Over distances 0–{len(scores) - 1} the score goes {span}: where the key sits changes it."
    return text
