"""Which earlier word a pronoun's heads send it to, found from the recorded attention for any prompt.

The example sentence's "it" refers to the cat; a prompt the page was not written for has another
pronoun, or two nouns "it" could refer to, or no pronoun at all. ``find_pronoun`` finds the first
pronoun of the user's own text (English, German and French ones), ``candidates`` the nouns before it,
and ``resolve`` reads every head's row for the pronoun: a head *sends* it to the candidate that gets the
most weight among the earlier words, when that is at least ``MIN_SHARE`` of its row.

A candidate is a noun, never a verb or a function word. Without a tagger, a noun is found the way a
teaching prompt writes one: the word after a determiner ("the", "a", "his", "der", "la", ...; common
adjectives in between skipped: "the old *man*"), or a capitalised name ("Anna", a German noun), except a
sentence's first word when a determiner follows it ("Tell the dog": an imperative verb). Two kinds of
weight are left out of every count because they say nothing about reference: the first token's (heads
park weight there when they have nothing to fetch: the attention sink), and a *previous-token head*'s
(its strongest key is the token right before the pronoun, whatever word that is: position, not meaning).
Pure numpy on the arrays ``ui.attention.compute.attention_maps`` recorded; no model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ui.tokenization.own_text import Word

MIN_SHARE = 0.1  # a head counts for a candidate when the candidate gets at least this share of its row
PRONOUNS = frozenset(
    {
        "it",
        "he",
        "she",
        "they",
        "him",
        "her",
        "them",
        "its",
        "his",
        "their",  # English
        "er",
        "sie",
        "es",
        "ihn",
        "ihm",  # German
        "il",
        "elle",
        "ils",
        "elles",
        "lui",  # French
    }
)
FUNCTION_WORDS = frozenset(
    """
a an the and or but nor so yet if then than because since while when where why how what which who whom whose that
this these those there here not no yes very too also just only even still all any some each every both either
on in at of to for with by from as into onto over under about after before between through during without within
upon up down out off again once is was were be been being are am do does did done doing have has had having can
could will would shall should may might must let lets get got one ones such own same other another much many more
most few less least didn doesn isn wasn weren aren hasn haven hadn won wouldn couldn shouldn don t s
der die das den dem des ein eine einen einem einer eines und oder aber auf im an am zu zum zur mit von vom für
weil dass ist war sind waren nicht auch noch schon sehr als wie wenn
le la les un une des et ou mais sur dans au aux de du pour avec par parce que qu est était ne pas très
""".split()
)


DETERMINERS = frozenset(
    """
a an the this that these those my your his her its our their every each another no some
der die das den dem des ein eine einen einem einer eines mein meine dein deine sein seine ihr ihre
le la les un une du des ce cette ces mon ma mes ton ta tes son sa ses l
""".split()
)
ADJECTIVES = frozenset(  # skipped between a determiner and its noun
    """
big small little large tiny huge old young new good bad red blue green black white brown tall short long
happy sad tired angry hungry heavy light fast slow poor rich nice kind clever smart lazy first last other
""".split()
)
SENTENCE_ENDS = frozenset(".!?:;\n")


def _parts(text: str) -> list[str]:
    """A word's parts around apostrophes, lower case: "didn't" -> ["didn", "t"], "qu'il" -> ["qu", "il"]."""
    return [part for part in text.strip().lower().replace("’", "'").split("'") if part]


def is_pronoun(text: str) -> bool:
    return any(part in PRONOUNS for part in _parts(text))


def is_content_word(text: str) -> bool:
    """Letters only (apostrophes aside), two or more, its stem neither a function word nor a pronoun."""
    parts = _parts(text)
    return (
        bool(parts)
        and len(parts[0]) >= 2
        and all(part.isalpha() for part in parts)
        and parts[0] not in FUNCTION_WORDS
        and not is_pronoun(text)
    )


def find_pronoun(words: Sequence[Word]) -> int | None:
    """Index (in ``words``) of the first word that is (or holds, as "qu'il") a pronoun, or None."""
    return next((i for i, word in enumerate(words) if is_pronoun(word.text)), None)


def _stem(word: Word) -> str:
    parts = _parts(word.text)
    return parts[0] if parts else ""


def _after_determiner(words: Sequence[Word], index: int) -> bool:
    """Whether ``words[index]`` follows a determiner, past adjectives of ``ADJECTIVES``, and is not itself such an
    adjective with a content word after it ("the *old* man": the noun is *man*)."""
    following = words[index + 1].text if index + 1 < len(words) else ""
    if _stem(words[index]) in ADJECTIVES and is_content_word(following):
        return False
    previous = index - 1
    while previous >= 0 and _stem(words[previous]) in ADJECTIVES:
        previous -= 1
    return previous >= 0 and _stem(words[previous]) in DETERMINERS


def _is_name(words: Sequence[Word], index: int) -> bool:
    """Whether ``words[index]`` is capitalised like a name (or a German noun); a sentence's first word only when no
    determiner follows it (an imperative verb takes one: "Tell the dog")."""
    text = words[index].text.strip()
    if not text[:1].isupper():
        return False
    first = index == 0 or words[index - 1].text.strip()[-1:] in SENTENCE_ENDS or not words[index - 1].text.strip()
    return not (first and index + 1 < len(words) and _stem(words[index + 1]) in DETERMINERS)


def is_noun(words: Sequence[Word], index: int) -> bool:
    """Whether ``words[index]`` is a candidate referent: a content word after a determiner, or a name."""
    text = words[index].text
    parts = _parts(text)
    if len(parts) > 1 and parts[0] in ("l", "d") and parts[1].isalpha() and len(parts[1]) >= 2:
        return not is_pronoun(text)
    return is_content_word(text) and (_after_determiner(words, index) or _is_name(words, index))


def candidates(words: Sequence[Word], before: int) -> list[Word]:
    """The nouns among ``words[:before]`` (``is_noun``): never a verb or a function word."""
    return [word for i, word in enumerate(words[:before]) if is_noun(words[:before], i)]


@dataclass(frozen=True)
class Antecedent:
    word: Word
    n_heads: int  # heads that send the pronoun to this word
    best: list[
        tuple[int, int, float]
    ]  # of the heads that send it here: (layer, head, share of the row), strongest first
    only_first_token: bool  # the word is the first token alone: its weight cannot be told from the sink's


@dataclass(frozen=True)
class Reference:
    pronoun: Word
    query: int  # the position whose heads are read (the pronoun's last token)
    antecedents: list[Antecedent]  # every candidate, in prompt order
    n_heads: int  # all heads (layers × heads)
    n_previous_token: int = 0  # heads left out that would have counted: their strongest key is the token before

    @property
    def counted(self) -> int:
        return sum(a.n_heads for a in self.antecedents)


def _word_weights(row: np.ndarray, words: Sequence[Word], query: int) -> np.ndarray:
    """(L, H, W): each head's weight from the query on each word (its tokens summed), the first token left out."""
    weights = row.copy()
    weights[..., 0] = 0.0  # the sink
    return np.stack([weights[..., [p for p in word.positions if p < query]].sum(-1) for word in words], axis=-1)


def previous_token_heads(row: np.ndarray, before: int) -> np.ndarray:
    """(L, H) bool: heads whose strongest key in ``row`` (L, H, T), the first token left out, is ``before`` (the
    token right before the pronoun). Such a head reads position, so its pick says nothing about reference."""
    if before < 1:
        return np.zeros(row.shape[:2], dtype=bool)
    return row[..., 1 : before + 1].argmax(-1) == before - 1  # keys 1..before


def resolve(probs: np.ndarray, words: Sequence[Word], pronoun_index: int, top: int = 3) -> Reference:
    """Every head's reading of the pronoun ``words[pronoun_index]`` in ``probs`` (L, H, T, T)."""
    pronoun = words[pronoun_index]
    query = pronoun.end - 1
    earlier = [w for w in words[:pronoun_index] if w.start < query]
    found = candidates(words, pronoun_index)
    n_layers, n_heads = probs.shape[:2]
    if not earlier or not found:
        return Reference(
            pronoun, query, [Antecedent(w, 0, [], w.start == 0 and w.end == 1) for w in found], n_layers * n_heads
        )
    row = probs[:, :, query, :]  # (L, H, T)
    positional = previous_token_heads(row, pronoun.start - 1)  # (L, H)
    weights = _word_weights(row, earlier, query)  # (L, H, W)
    strongest = weights.argmax(-1)  # (L, H) the earlier word each head weighs most
    strongest_share = weights.max(-1)
    candidate = np.isin(strongest, [earlier.index(word) for word in found])  # (L, H)
    left_out = positional & candidate & (strongest_share >= MIN_SHARE)  # would have counted for a candidate
    out = []
    for word in found:
        index = earlier.index(word)
        sends = (strongest == index) & (strongest_share >= MIN_SHARE) & ~positional  # (L, H)
        share = np.where(sends, weights[..., index], -1.0)  # only heads that send the pronoun to this word
        order = np.argsort(share, axis=None)[::-1][: min(top, int(sends.sum()))]
        best = [(int(i // n_heads), int(i % n_heads), float(share.flat[i])) for i in order]
        out.append(Antecedent(word, int(sends.sum()), best, word.start == 0 and word.end == 1))
    return Reference(pronoun, query, out, n_layers * n_heads, int(left_out.sum()))


def rope_candidates(probs: np.ndarray, words: Sequence[Word], query: int, top: int = 8) -> list[tuple[int, int, int]]:
    """(layer, head, key) triples for the RoPE distance chart: the ``top`` strongest weights from ``query`` onto a
    key that is an earlier token of a content word (else of any earlier own word), never the first token (the
    sink, where a head parks weight whatever the distance) nor the query itself; strongest first. Empty when the
    query has no such key."""
    keys = [p for w in candidates(words, len(words)) for p in w.positions if 0 < p < query]
    if not keys:
        keys = [p for w in words for p in w.positions if 0 < p < query]
    if not keys:
        return []
    weights = probs[:, :, query, keys]  # (L, H, K)
    order = np.argsort(weights, axis=None)[::-1][:top]
    n_heads = probs.shape[1]
    return [(int(i // (n_heads * len(keys))), int(i // len(keys) % n_heads), keys[int(i % len(keys))]) for i in order]
