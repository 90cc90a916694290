"""Sentences of the Tokenization page, each computed from the numbers it quotes."""

from __future__ import annotations

from collections.abc import Sequence

from ui.common import format as fmt


def _times(ratio: float) -> str:
    return f"{ratio:.1f}×" if ratio < 10 else f"{ratio:,.0f}×"


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
    n_merges: int,
    n_symbols: int,
    n_parts: int,
    same_as_tokenizer: bool,
    cut: bool,
    unit: str = "bytes",
    fallback_characters: int = 0,
    fallback_bytes: int = 0,
) -> str:
    """The merge-by-merge summary; it claims agreement with the real tokenizer only when the split is the same.

    ``unit``: what the replay starts from ("bytes" for byte-level BPE, "code points" for SentencePiece).
    ``fallback_characters`` of the word's code points are outside the vocabulary and start as ``fallback_bytes``
    byte tokens (SentencePiece's byte fallback), so the replay starts from ``n_symbols`` symbols, not that many
    code points (``compute.replay_start``)."""
    characters = n_symbols - fallback_bytes + fallback_characters
    start = fmt.count(characters, unit.removesuffix("s"), unit)  # "1 byte", "7 code points"
    if fallback_characters:
        if characters == 1:
            which = ""
        elif fallback_characters == characters:
            which = "all of them "
        else:
            which = f"{fallback_characters:,} of them "
        start += (
            f" ({which}outside the vocabulary, spelled as {fmt.count(fallback_bytes, 'byte token')}: "
            f"{fmt.count(n_symbols, 'symbol')})"
        )
    text = f"{fmt.count(n_merges, 'merge')} from {start} to {fmt.count(n_parts, 'token')}"
    if cut:
        return text + ": the replay covers only the word's start, so it is not the tokenizer's whole split."
    if same_as_tokenizer:
        return text + ", the same split the tokenizer itself produces."
    return text + ": the tokenizer's own split differs (it applies more rules than these merges)."


def merge_start_label(unit: str, fallback_characters: int = 0) -> str:
    """The first row of the merge replay: what it starts from (``merge_replay_caption``'s counts)."""
    if not fallback_characters:
        return f"start (single {unit})"
    return f"start (single {unit}; {fallback_characters:,} as byte tokens)"


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
