"""Sentences of the reading pages (Tokenization, Embeddings, Attention), each computed from the numbers it quotes.

Token texts arrive in the display notation (``ui.token_text``); each helper makes
whitespace visible itself, so a sentence names a token exactly as its chart does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ui.figures import format as fmt


def _times(ratio: float) -> str:
    return f"{ratio:.1f}×" if ratio < 10 else f"{ratio:,.0f}×"


# -- Tokenization ---------------------------------------------------------------------------
def word_level_caption(vocabulary_words: int, n_tokens: int, n_unknown: int) -> str:
    """The word-level tokenizer's caption: its vocabulary, and what happened to this text's words."""
    lost = (
        f"{n_unknown} unknown: their meaning is lost."
        if n_unknown
        else "none unknown: every word of this text is in the paragraph, but any other word would be lost."
    )
    return (
        f"Vocabulary: the {vocabulary_words:,} distinct words and marks of the paragraph, plus <unk>. "
        f"{n_tokens} tokens, {lost}"
    )


def prompt_tokens_caption(n_own: int, n_total: int, specials: Sequence[str], chat: bool) -> str | None:
    """What the model reads besides the user's own tokens (None when nothing): the special tokens the tokenizer
    adds (Gemma's ``<bos>``) and, with the chat template, the template's markers and words. ``specials`` are the
    special tokens' texts; the counts above the chips count the text's own tokens only."""
    others = n_total - n_own
    if others <= 0:
        return None
    named = ", ".join(fmt.code_span(s) for s in dict.fromkeys(specials))
    if chat:
        plain = others - len(specials)
        return (
            f"The model reads {fmt.count(n_total, 'token')} in all: your text's {n_own:,} and "
            f"{fmt.count(others, 'token')} of the chat template around it ({fmt.count(len(specials), 'special marker')}: "
            f"{named}; {plain:,} ordinary tokens of the template's own words). "
            "The counts above are your text's tokens only."
        )
    return (
        f"The model reads {fmt.count(n_total, 'token')}: your text's {n_own:,} and "
        f"{fmt.count(others, 'special token')} the tokenizer adds ({named}), which is not text. The counts above "
        "are your text's tokens only."
    )


def rare_character_sentence(character: str, stored: Sequence[str], shown: Sequence[str], byte_level: bool) -> str:
    """How the tokenizer writes one rare character, in the display notation of the chips (``<0xNN>`` for a piece of
    a character), with the entries as stored beside it when they differ (byte-level BPE's printable stand-ins)."""
    utf8 = character.encode("utf-8")
    pieces = ", ".join(fmt.code_span(piece) for piece in shown)
    line = (
        f"The rare character {character} (U+{ord(character):04X}, {len(utf8)} UTF-8 bytes: "
        f"{' '.join(f'{b:02X}' for b in utf8)}) becomes {fmt.count(len(shown), 'token')}: {pieces}"
    )
    if byte_level and list(stored) != list(shown):
        kept = ", ".join(f"`{raw}`" for raw in stored)
        line += (
            f" (stored in the vocabulary as {kept}: byte-level BPE writes every byte as a printable stand-in character)"
        )
    return line + "."


def bpe_caption(vocab_size: int, n_text_tokens: int, specials: Sequence[str]) -> str:
    """The model's BPE column: its vocabulary and the text's own tokens (a start token it adds named apart)."""
    added = (
        f" (plus {', '.join(fmt.code_span(s) for s in specials)}, which the tokenizer adds: not text)"
        if specials
        else ""
    )
    return (
        f"Vocabulary: {vocab_size:,} subwords. {fmt.count(n_text_tokens, 'token')}{added}, nothing unknown: rare "
        "words are spelled from pieces."
    )


def raw_bytes_caption(n_bytes: int, n_bpe_tokens: int) -> str:
    """The byte tokenizer's caption, compared with the model's BPE on the same text (``n_bpe_tokens``: the text's
    own tokens, without a start token the tokenizer adds)."""
    if n_bpe_tokens and n_bytes > n_bpe_tokens:
        longer = f"{_times(n_bytes / n_bpe_tokens)} as many as the model's BPE needs ({n_bpe_tokens})"
    else:
        longer = "here as many as the model's BPE needs, since every token of this text is one byte"
    return f"Vocabulary: 256 byte values. {n_bytes} tokens: nothing unknown, but {longer}."


def id_neighbours_sentence(
    word: str, word_pieces: Sequence[str], centre_id: int, neighbours: Sequence[tuple[int, str, int | None]]
) -> str:
    """Why the ids around a word's id mean nothing: computed from the neighbours' merge ranks when they have them.

    ``neighbours`` holds (id, piece, rank of the merge that made the piece or None), in id order.
    """
    first = (
        f"{fmt.code_span(word)} is token id {centre_id:,}"
        if len(word_pieces) == 1
        else f"{fmt.code_span(word)} is {len(word_pieces)} tokens; its first, {fmt.code_span(word_pieces[0])}, has id {centre_id:,}"
    )
    others = [piece for token_id, piece, _ in neighbours if token_id != centre_id]
    listed = ", ".join(fmt.code_span(p) for p in others[:4])
    ranks = [rank for _, _, rank in neighbours]
    if all(rank is not None for rank in ranks) and all(a < b for a, b in zip(ranks, ranks[1:])):
        order = (
            f"their merge ranks ({ranks[0]:,}–{ranks[-1]:,}) rise with their ids: the vocabulary is numbered in "
            "the order the tokenizer learned its merges, not by meaning"
        )
    else:
        order = "the vocabulary is not ordered by meaning"
    return (
        f"{first}. The ids right next to it hold {listed}: {order}. Adding, subtracting or comparing ids is "
        "meaningless; meaning comes later, from the **embedding** row each id selects (next page)."
    )


def merge_replay_caption(
    n_merges: int, n_symbols: int, n_parts: int, same_as_tokenizer: bool, cut: bool, unit: str = "bytes"
) -> str:
    """The merge-by-merge summary; it claims agreement with the real tokenizer only when the split is the same.

    ``unit``: what the replay starts from ("bytes" for byte-level BPE, "code points" for SentencePiece)."""
    text = f"{fmt.count(n_merges, 'merge')} from {n_symbols:,} {unit} to {fmt.count(n_parts, 'token')}"
    if cut:
        return text + f": the replay stopped at the first {unit}, so it is not the tokenizer's whole split."
    if same_as_tokenizer:
        return text + ", the same split the tokenizer itself produces."
    return text + ": the tokenizer's own split differs (it applies more rules than these merges)."


def tokenization_suggestions(has_template: bool, chat_on: bool) -> list[str]:
    """The page's "what to try next", each one possible in the app as it is now (no "turn on" for a switch already on,
    nor for a model without a chat template)."""
    lines = [
        "- Type a word the model has surely never seen (your name backwards) and watch it break into pieces.",
        "- Add an emoji or Hebrew text to the prompt: one character can be several byte tokens.",
    ]
    if has_template and chat_on:
        lines.append(
            "- Turn **Chat template** off in the sidebar: the template's markers and words disappear, and the "
            "counts above stay the same, since they count only your text's tokens."
        )
    elif has_template:
        lines.append(
            "- Turn on **Chat template** in the sidebar: the special tokens around your prompt are tokens too."
        )
    lines.append(
        "- Then open **Embeddings**: each id selects one row of a big matrix, and that is where meaning begins."
    )
    return lines


# -- Embeddings -----------------------------------------------------------------------------
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


# -- Attention ------------------------------------------------------------------------------
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
