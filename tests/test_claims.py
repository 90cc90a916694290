"""Every claim-making sentence (each chapter's ``claims.py``) on several prompts' real numbers: each claim is checked
against the numbers it quotes, and the numbers against the model.

The prompts are of different kinds: the default sentence, no pronoun, emoji, code, a non-English
sentence and a single space. A helper's sentence is parsed back (counts, layers, percentages, tokens)
and compared with what the model computed, so a sentence that contradicts its chart fails here.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import streamlit as st

from ui.attention import claims as attention_claims
from ui.attention import compute as att
from ui.batching import claims as batching_claims
from ui.common.token_text import visible
from ui.embeddings import claims as embeddings_claims
from ui.embeddings import compute as emb
from ui.generation import claims as generation_claims
from ui.logit_lens import claims as logit_lens_claims
from ui.logits import claims as logits_claims
from ui.logits import compute as logits
from ui.sampling import claims as sampling_claims
from ui.tokenization import claims as tokenization_claims
from ui.tokenization import compute as tok

pytestmark = pytest.mark.real_model

MODEL = "SmolLM2-135M-Instruct"
PROMPTS = {
    "default": "The cat sat on the mat because it was tired.",
    "no-pronoun": "Bank is closed on Sunday",
    "emoji": "I love pizza 🍕🔥",
    "code": "def add(a, b):\n    return a + b",
    "french": "Le chat est assis sur le tapis parce qu'il était fatigué.",
    "space": " ",
}


@pytest.fixture(scope="module")
def real(engine):
    """Every UI helper's model lookup pointed at the session's engine; one cache for the module's tests
    (each prompt's traced forward runs once)."""
    from ui.common import resources

    st.cache_data.clear()
    st.cache_resource.clear()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(resources, "engine_for", lambda model: engine)  # every client is built on it
        yield engine
    st.cache_data.clear()
    st.cache_resource.clear()


def _layer_indices(text: str, labels: list[str]) -> list[int]:
    """Readout indices named in a lens sentence's parenthesis ("layer 0, layers 12–26 and layer 29")."""
    named = re.search(r"readouts \((.*?)\)", text).group(1)
    out: list[int] = []
    for part in re.split(r", | and ", named):
        if part == "the embeddings alone":
            out.append(0)
        elif m := re.fullmatch(r"the embeddings to layer (\d+)", part):
            out += range(0, labels.index(f"layer {m.group(1)}") + 1)
        elif m := re.fullmatch(r"layers (\d+)–(\d+)", part):
            out += range(labels.index(f"layer {m.group(1)}"), labels.index(f"layer {m.group(2)}") + 1)
        else:
            out.append(labels.index(part))
    return out


# -- Transformer block & logit lens ---------------------------------------------------------------
@pytest.mark.parametrize("name", PROMPTS)
def test_the_answer_formation_sentence_names_exactly_the_readouts_that_lead(real, name):
    lens = logits.traced_prompt(MODEL, PROMPTS[name], False).lens
    guesses = [layer[-1][0] for layer in lens.top_strings]
    probabilities = lens.final_token_probability.tolist()
    text = logit_lens_claims.answer_formation_sentence(lens.layer_labels, guesses, probabilities)
    final = guesses[-1]
    leads = [i for i, guess in enumerate(guesses) if guess == final]
    assert f"final answer is **{visible(final)}**" in text
    assert f"p = {probabilities[-1]:.2f} at the output" in text
    if "readouts (" in text:
        assert _layer_indices(text, lens.layer_labels) == leads, text
        assert f"top guess in {len(leads)} of the {len(guesses)} readouts" in text
    elif "from **" in text:
        first = lens.layer_labels.index(re.search(r"from \*\*(.+?)\*\* on", text).group(1))
        assert leads == list(range(first, len(guesses))), text  # "from X on" means every readout after X
    else:
        assert "only the last layer" in text and leads == [len(guesses) - 1]
    if "surest readout" in text:
        surest = re.search(r"surest readout is (.+?) \(p = ([0-9.]+)\)", text)
        assert int(np.argmax(probabilities)) == lens.layer_labels.index(surest.group(1))
        assert f"{max(probabilities):.2f}" == surest.group(2)


def test_the_default_prompt_no_longer_claims_the_answer_settles_at_the_last_layer(real):
    """The issue's case: ↵ leads in the middle layers, loses the lead near the end, is back at the output."""
    lens = logits.traced_prompt(MODEL, PROMPTS["default"], False).lens
    guesses = [layer[-1][0] for layer in lens.top_strings]
    text = logit_lens_claims.answer_formation_sentence(
        lens.layer_labels, guesses, lens.final_token_probability.tolist()
    )
    assert "from **layer 29** on" not in text
    assert guesses[-2] != guesses[-1] and "other guesses lead" in text


def test_the_lens_suggestion_holds_for_this_model(real):
    """The lens page suggests a prompt and promises its answer takes over: the model must answer it so, and the
    embeddings alone must not already say it."""
    from ui.logit_lens.examples import lens_example

    example = lens_example(MODEL)
    assert example is not None and example.prompt == "The capital of France is" and example.answer == " Paris"
    lens = logits.traced_prompt(MODEL, example.prompt, False).lens
    assert lens.top_strings[-1][-1][0] == example.answer and lens.top_strings[0][-1][0] != example.answer
    text = logit_lens_claims.lens_suggestion(example.prompt, example.answer, PROMPTS["default"])
    assert "“The capital of France is”" in text and "**·Paris**" in text


# -- Attention --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", PROMPTS)
def test_attention_sentences_quote_the_recorded_weights(real, name):
    ids = real.encode_prompt(PROMPTS[name])
    maps = att.attention_maps(MODEL, ids)
    pieces = tok.tokenize(MODEL, PROMPTS[name], False).pieces[: maps.n_tokens]
    query = att.default_query(pieces)
    over_layers = att.query_over_layers(maps, query)
    text = attention_claims.sink_sentence(over_layers, pieces, query)
    mean = over_layers[:, : query + 1].mean(axis=0)
    if query == 0:
        assert "can only look at itself" in text
    elif "about as much weight" in text:  # a tie: the top two within twice the standard error over layers
        top, runner = np.argsort(mean)[::-1][:2]
        differences = over_layers[:, top] - over_layers[:, runner]
        assert differences.mean() <= 2 * differences.std(ddof=1) / np.sqrt(len(differences))
    elif "**first token**" in text:
        assert int(np.argmax(mean)) == 0 and f"{mean[0]:.0%} of the weight" in text
    else:
        top = int(np.argmax(mean))
        assert f"({mean[top]:.0%}) goes to" in text and f"at position {top};" in text

    key = att.find_token(pieces[:query], "cat") or 0
    best = att.top_heads(maps, query, key)
    line = attention_claims.top_heads_sentence(pieces[query], pieces[key], best)
    quoted = [(int(l), int(h), p) for l, h, p in re.findall(r"layer (\d+) head (\d+) \(([<>]?\d+)%\)", line)]
    weights = maps.probs[:, :, query, key]
    assert [(l, h) for l, h, _ in quoted] == [
        tuple(np.unravel_index(i, weights.shape)) for i in np.argsort(weights, axis=None)[::-1][:5]
    ]

    def written(p: str, w: float) -> bool:  # the one rule: never "0%" for a weight that is not 0, nor "100%" below 1
        return {"<1": 0 < w < 0.005, ">99": 0.995 <= w < 1}.get(p, p.isdigit() and int(p) == round(100 * w))

    assert len(quoted) == len(best) and all(written(p, weights[l, h]) for l, h, p in quoted)

    previous = att.previous_token_heads(maps)
    sentence = attention_claims.previous_token_sentence(previous, maps.n_tokens)
    if maps.n_tokens < 4:
        assert sentence is None
    else:
        early, late = (int(n) for n in re.findall(r", (\d+) of \d+", sentence))
        band = maps.n_layers // 6
        assert (early, late) == (int(previous[:band].sum()), int(previous[-band:].sum()))
        clear = attention_claims.sign_test(early, late) < attention_claims.SIGNIFICANCE  # a one-head margin is a tie
        assert ("early heads look at the previous token more often" in sentence) == (early > late and clear)
        strongest = maps.probs[:, :, 2:, :].argmax(-1)  # (L, H, T-2): check one counted head by hand
        if previous.any():
            layer, head = np.argwhere(previous)[0]
            share = np.mean(strongest[layer, head] == np.arange(1, maps.n_tokens - 1))
            assert share > 0.5


def test_the_causal_suggestion_is_what_the_model_does(real):
    """Changing a word after "it" leaves every weight from "it" exactly as it was; a word before it moves them."""
    ids = real.encode_prompt(PROMPTS["default"])
    maps = att.attention_maps(MODEL, ids)
    pieces = tok.tokenize(MODEL, PROMPTS["default"], False).pieces
    query = att.find_token(pieces, "it")
    words = att.word_positions(pieces)
    later = next(i for i in reversed(words) if i > query)
    earlier = att.find_token(pieces[:query], "cat")
    text = attention_claims.causal_suggestion(
        pieces[query], query, (pieces[later].strip(), later, later), (pieces[earlier].strip(), earlier, earlier)
    )
    assert f"{visible(pieces[later].strip())}` (position {later}) cannot move any head" in text
    assert f"{visible(pieces[earlier].strip())}` (position {earlier}), which comes before" in text

    other = real.tokenizer.encode(" dirty", special_tokens=False)
    assert len(other) == 1
    changed_later = att.attention_maps(MODEL, ids[:later] + other + ids[later + 1 :])
    # Same shapes, same inputs for every position up to the query: each of their numbers is the same
    # sequence of float operations on the same values, so the rows are bitwise equal (no tolerance needed).
    assert np.array_equal(changed_later.probs[:, :, : query + 1], maps.probs[:, :, : query + 1])
    assert not np.array_equal(changed_later.probs[:, :, later:], maps.probs[:, :, later:])
    dog = real.tokenizer.encode(" dog", special_tokens=False)
    changed_earlier = att.attention_maps(MODEL, ids[:earlier] + dog + ids[earlier + 1 :])
    assert np.abs(changed_earlier.probs[:, :, query] - maps.probs[:, :, query]).max() > 0.01  # far beyond rounding


# -- Logits & temperature ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", PROMPTS)
def test_the_filter_suggestion_counts_what_the_sampler_keeps(real, name):
    import dataclasses

    from inference import SamplingParams

    params = SamplingParams(temperature=0.8)
    kept_top_p, kept_min_p = logits.kept_by(MODEL, PROMPTS[name], False, params.canonical(), 0.5, 0.1)
    cached = logits.prompt_logits(MODEL, PROMPTS[name], False)
    probs = logits.softmax_at(cached.logits, 0.8)
    ordered = np.sort(probs)[::-1]
    # by hand: top-p keeps tokens until their mass reaches p (the one crossing it included); min-p keeps p >= 0.1 max
    assert kept_top_p == int(np.searchsorted(np.cumsum(ordered), 0.5) + 1)
    assert kept_min_p == int((probs >= 0.1 * probs.max()).sum())
    text = logits_claims.filter_suggestion(0.8, float(probs.max()), kept_top_p, kept_min_p)
    assert f"top-p 0.5 alone keeps {kept_top_p:,} token" in text and f"min-p 0.1 alone {kept_min_p:,} token" in text
    if kept_top_p != kept_min_p:
        assert f"so {'top-p' if kept_top_p < kept_min_p else 'min-p'} cuts more" in text
    assert f"({probs.max():.3f} here, a bar of {0.1 * probs.max():.3f})" in text
    assert dataclasses.replace(params, temperature=0).greedy


def test_the_stage_caption_gives_the_engine_order():
    """softmax(logits / T): temperature divides the logits before softmax, never the probabilities."""
    order = logits_claims.STAGE_ORDER_CAPTION
    assert order.index("logits ÷ T") < order.index("→ softmax") < order.index("top-k")
    assert "softmax → ÷ T" not in order and logits.STAGE_LABELS["temperature"] == "softmax(logits ÷ T)"


# -- Sampling ------------------------------------------------------------------------------------------
def test_histogram_and_seed_sentences():
    assert "1 degree of freedom" in sampling_claims.histogram_sentence(2, 0.4, 1, 0.53)
    assert "3 degrees of freedom" in sampling_claims.histogram_sentence(4, 12.4, 3, 0.006)
    assert "≥ 0.001 — the draws are consistent" in sampling_claims.histogram_sentence(4, 12.4, 3, 0.006)
    assert "< 0.001 — the draws are **not** consistent" in sampling_claims.histogram_sentence(4, 40.0, 3, 1e-8)
    assert sampling_claims.histogram_sentence(1, 0.0, 0, 1.0).startswith("Only one token")
    assert "same stream of u values: they first differ at generated token #2" in sampling_claims.two_settings_sentence(
        0.3, 1.5, 2
    )
    assert "A is greedy (T = 0) and draws no u" in sampling_claims.two_settings_sentence(0.0, 1.5, 0)
    assert "second row is greedy too" in sampling_claims.greedy_vs_sampled_sentence(0.0, True)


# -- Embeddings and tokenization ------------------------------------------------------------------------
def test_embedding_sentences_quote_the_matrix(real):
    weight = real.model.embed.weight.float().detach()
    unit = weight / weight.norm(dim=-1, keepdim=True)
    cat, dog, banana = (real.tokenizer.encode(w, special_tokens=False)[0] for w in (" cat", " dog", " banana"))
    cat_dog, cat_banana = emb.word_cosines(MODEL, " cat", (" dog", " banana"))
    assert cat_dog == pytest.approx(float(unit[cat] @ unit[dog]), abs=1e-6)
    assert cat_banana == pytest.approx(float(unit[cat] @ unit[banana]), abs=1e-6)
    text = embeddings_claims.closeness_sentence("cat", "dog", "banana", cat_dog, cat_banana)
    assert f"(cosine {max(cat_dog, cat_banana):.2f})" in text
    assert ("nearer to *dog*" in text) == (cat_dog >= cat_banana)

    nearest = [piece for _, piece, _ in emb.nearest(MODEL, cat)]
    text = embeddings_claims.neighbours_suggestion("cat", True, nearest)
    same = embeddings_claims.variants_of("cat", nearest)
    assert all(p.strip().lower().removesuffix("s") == "cat" for p in nearest[:same])
    assert nearest[same].strip().lower().removesuffix("s") != "cat"
    assert f"the first {same} are spellings" in text and all(visible(p) in text for p in nearest[:6])

    ids = real.encode_prompt("the cat and the dog")
    rows = emb.rows_for(MODEL, ids)
    pieces = tok.tokenize(MODEL, "the cat and the dog", False).pieces
    text = embeddings_claims.repeated_token_sentence(pieces, ids, rows)
    assert "positions 0 and 3" not in text or ids[0] == ids[3]  # "the" and " the" are two tokens
    assert "appears at positions 1 and 4" not in text
    repeat = real.encode_prompt(" the cat and the dog")
    text = embeddings_claims.repeated_token_sentence(
        tok.tokenize(MODEL, " the cat and the dog", False).pieces, repeat, emb.rows_for(MODEL, repeat)
    )
    assert "`·the` appears at positions 0 and 3" in text and repeat[0] == repeat[3]


@pytest.mark.parametrize(
    ("counts", "start"),
    [
        ((17, 5, "bytes", 0, 0), "12 merges from 17 bytes to 5 tokens"),
        ((1, 1, "bytes", 0, 0), "12 merges from 1 byte to 1 token"),
        ((22, 22, "code points", 5, 20), "from 7 code points (5 of them outside the vocabulary, spelled as 20 byte "),
        ((2, 2, "code points", 2, 2), "from 2 code points (all of them outside the vocabulary, spelled as 2 byte "),
        (
            (4, 4, "code points", 1, 4),
            "from 1 code point (outside the vocabulary, spelled as 4 byte tokens: 4 symbols)",
        ),
    ],
)
def test_the_merge_caption_counts_what_the_replay_starts_from(counts, start):
    """Byte-level BPE starts from bytes; SentencePiece from code points, a code point outside its vocabulary as its
    byte tokens: the caption counts code points and says how many symbols they make (``compute.replay_start``)."""
    n_symbols, n_parts, unit, fallback_characters, fallback_bytes = counts
    caption = tokenization_claims.merge_replay_caption(
        12, n_symbols, n_parts, True, False, unit, fallback_characters, fallback_bytes
    )
    assert start in caption


@pytest.mark.parametrize("name", PROMPTS)
def test_tokenization_sentences_quote_the_tokenizer(real, name):
    text = PROMPTS[name]
    n_bytes, n_tokens = len(text.encode("utf-8")), len(real.tokenizer.encode(text))
    caption = tokenization_claims.raw_bytes_caption(n_bytes, n_tokens)
    assert caption.startswith(f"Vocabulary: 256 byte values. {n_bytes} tokens")
    if n_bytes > n_tokens:
        ratio = float(re.search(r"but ([0-9.]+)×", caption).group(1))
        assert ratio == pytest.approx(n_bytes / n_tokens, abs=0.05)
    word = text.split()[0] if text.split() else text
    steps = tok.bpe_steps(MODEL, word)
    same = steps[-1].parts == tok.tokenizer_split(MODEL, word)
    caption = tokenization_claims.merge_replay_caption(
        len(steps) - 1, len(steps[0].parts), len(steps[-1].parts), same, False
    )
    assert ("the same split the tokenizer itself produces" in caption) == same
    assert same  # a replay of the model's own merges on one pre-token is the tokenizer's split

    around = tok.id_neighbours(MODEL, " cat")
    sentence = tokenization_claims.id_neighbours_sentence(" cat", around.word_pieces, around.centre_id, around.rows)
    ranks = [rank for _, _, rank in around.rows]
    assert ("rise with their ids" in sentence) == all(a < b for a, b in zip(ranks, ranks[1:]))
    assert f"({ranks[0]:,}–{ranks[-1]:,})" in sentence


# -- Generation and batching -------------------------------------------------------------------------------
def test_generation_sentences(real):
    from ui.generation.compute import greedy_example

    continuation = greedy_example(MODEL, "The cat sat")
    done = real.complete("The cat sat", __import__("inference").SamplingParams(temperature=0.0, max_new_tokens=3))
    assert [real.tokenizer.decode([i]) for i in done.token_ids] == continuation
    assert " → ".join(f"“{visible(p)}”" for p in continuation) in generation_claims.example_sentence(
        "The cat sat", continuation
    )

    text = generation_claims.timing_sentence(
        [4, 5, 6, 7, 8, 9, 10, 11], [40, 41, 40, 42, 41, 40, 42, 41], [50, 60, 70, 80, 90, 100, 110, 120]
    )
    assert "the full recompute went from 55.0 ms to 115 ms (×2.09)" in text  # medians of 2 values each
    assert "the cached step stayed near 40.5 ms" in text and "grows with the sequence much faster" in text
    text = generation_claims.phase_sentence(10, 100.0, [40.0, 50.0, 45.0])
    assert "10 prompt tokens in 100 ms (10.0 ms per token)" in text and "4.5× less" in text
    assert "less in the prefill" not in generation_claims.phase_sentence(2, 200.0, [40.0])  # 100 ms > 40 ms: no claim


def test_batching_verdicts_follow_the_run():
    text = batching_claims.verdict_sentence(10.0, 14.0, 20, 22, 92, 21, 4, 6, 2)
    assert text.startswith("**Continuous batching won this run**: 14.0 against 10.0 tok/s (×1.40)")
    assert "71 fewer wasted positions" in text
    text = batching_claims.verdict_sentence(14.0, 10.0, 20, 24, 92, 6, 3, 6, 3)
    assert text.startswith("**Static batching won this run**") and "3 cache slots for 6 requests" in text
    assert "24 steps against 20" in text and "3 of its steps were prefills" in text
    text = batching_claims.verdict_sentence(14.0, 10.0, 32, 34, 170, 30, 4, 6, 2, (60.0, 6.0), (90.0, 1.4))
    assert "decode steps were slower although they carried fewer rows (median 90.0 ms for 1.4 rows" in text
    text = batching_claims.verdict_sentence(10.0, 10.3, 20, 20, 92, 21, 6, 6, 0)
    assert text.startswith("**Both modes ran about as fast")
    assert "time to first token 607 ms for every request" in batching_claims.mode_caption(20, 180, 92, [607.2, 606.9])
    assert "181–2,960 ms" in batching_claims.mode_caption(24, 94, 6, [181.0, 2960.0])
    assert "×2.00" in batching_claims.curve_sentence([1, 8], [20.0, 80.0], [50.0, 100.0])
    assert batching_claims.prefill_pause_sentence(0, 0.0) is None
    mib = 2**20
    text = batching_claims.memory_sentence([4 * mib, 4 * mib, 2 * mib], [1 * mib, 2 * mib, 2 * mib], "Continuous")
    assert "up to 4.00 MiB reserved" in text and "up to 2.00 MiB holding" in text
    assert "filled 25%–100% of what was reserved (mean 58%)" in text  # shares 0.25, 0.5, 1.0, step by step


# -- Speculative decoding ----------------------------------------------------------------------------------
SPEC_PROMPTS = {name: PROMPTS[name] for name in ("default", "emoji", "code", "space")} | {"chat": "Quote: the cat sat."}


def _spec_run(model: str, prompt: str, chat: bool, drafter: str, temperature: float, n_layers: int):
    from inference import SamplingParams
    from ui.speculative import compute as spec

    ids = tuple(tok.tokenize(model, prompt, chat).ids)
    speculation = spec.speculation_for(drafter, 4, 3, n_layers // 2, n_layers)
    params = SamplingParams(temperature=temperature, max_new_tokens=8, seed=3).canonical()
    return spec.run(model, ids, params, speculation, repeats=1), params


def _check_speculative_sentences(result, params, drafter: str, depth: int, n_layers: int) -> None:
    from tests.test_sweep import problems_in
    from ui.speculative import claims
    from ui.speculative import compute as spec

    drafting = sum(1 for s in result.steps if s.checks)
    text = claims.steps_sentence(len(result.token_ids), result.forwards, result.drafted, result.accepted, drafting)
    numbers = re.match(r"([\d,]+) tokens? took ([\d,]+) forwards?", text)
    assert (int(numbers[1]), int(numbers[2])) == (len(result.token_ids), len(result.steps))
    assert sum(len(s.checks) for s in result.steps) == result.drafted
    assert sum(c.accepted for s in result.steps for c in s.checks) == result.accepted
    if result.drafted:
        assert f"checked {result.drafted:,} drafted token" in text
        assert ("none was kept" in text) == (result.accepted == 0)
        assert ("every one of them was kept" in text) == (result.accepted == result.drafted)
    else:
        assert "Nothing was drafted" in text
    sentences = [text]
    for step in result.steps:  # every drafted token's sentence quotes its own numbers
        for check in step.checks:
            top = check.p_top[0][1] if check.p_top else None
            focus = claims.focus_sentence(
                drafter,
                params.greedy,
                check.text,
                check.p,
                check.q,
                check.accept_probability,
                check.u,
                check.accepted,
                check.p_range,
                top,
            )
            sentences.append(focus)
            if params.greedy:
                assert ("so it is kept" in focus) == check.accepted
                assert check.accepted == (check.token_id == check.p_top[0][0])
            elif drafter == "self":
                assert f"q = {fmt_prob(check.q)}" in focus and f"p = {fmt_prob(check.p)}" in focus
                assert (": kept." in focus) == check.accepted == (check.u < check.accept_probability)
            else:
                assert f"p = {fmt_prob(check.p)}" in focus and check.q == 1.0
                if check.p_range is not None:
                    inside = check.p_range[0] <= check.u < check.p_range[1]
                    shown = re.search(r"u = ([\d.]+) lands (in|outside) .*?\[([\d.]+), ([\d.]+)\)", focus)
                    assert inside == check.accepted and (shown.group(2) == "in") == inside
                    low, u, high = float(shown.group(3)), float(shown.group(1)), float(shown.group(4))
                    assert (low <= u < high) == inside  # printed as it is: empty only when it is empty
                    assert low < high or (check.p_range[0] == check.p_range[1] and "(empty: " in focus)
            if not check.accepted:
                sentences.append(
                    claims.residual_sentence(
                        drafter, params.greedy, check.text, step.final_text, step.final_probability, step.rejected_mass
                    )
                )
                assert step.final_kind == "residual"
    speed = claims.speed_sentence(
        result.speedup,
        result.acceptance_rate,
        result.tokens_per_forward,
        drafter,
        depth if drafter == "self" else None,
        n_layers,
        result.measured_at,
        result.load,
    )
    sentences.append(speed)
    assert f"{result.speedup:.2f}×" in speed
    if abs(result.speedup - 1) <= claims.TIE_BAND:
        assert "about as fast" in speed
    elif result.speedup > 1:
        assert ("as fast as plain decoding" in speed) == (result.tokens_per_forward > 1)
    else:
        assert "plain decoding's speed" in speed
    check = spec.GreedyCheck(result.plain_ids, result.token_ids, result.plain_texts, result.texts)
    sentences.append(claims.greedy_sentence(check.plain_texts, check.speculative_texts, check.first_difference))
    if params.greedy or drafter == "lookup":  # greedy, and seeded prompt lookup: plain decoding's own tokens
        assert result.token_ids == result.plain_ids, (result.texts, result.plain_texts)
    for sentence in sentences:
        assert not problems_in(sentence), (sentence, problems_in(sentence))


def fmt_prob(value: float) -> str:
    from ui.common import format as fmt

    return fmt.prob(value)


SPEC_CASES = [(name, "lookup") for name in SPEC_PROMPTS] + [(name, "self") for name in ("default", "code", "chat")]


@pytest.mark.parametrize("name,drafter", SPEC_CASES, ids=[f"{n}-{d}" for n, d in SPEC_CASES])
def test_speculative_sentences_quote_the_run(real, name, drafter):
    """Each sentence against the run it describes: both drafters, greedy ("code") and sampled, bytes, a chat
    template, a one-token prompt (self-speculation, the slower drafter, on three of them)."""
    n_layers = real.config.n_layers
    temperature = 0.0 if name == "code" else 0.8  # greedy on one prompt, sampled on the rest
    result, params = _spec_run(MODEL, SPEC_PROMPTS[name], name == "chat", drafter, temperature, n_layers)
    _check_speculative_sentences(result, params, drafter, n_layers // 2, n_layers)


def test_speculative_sentences_hold_on_gemma(real, gemma_engine, monkeypatch):
    from ui.common import resources

    gemma = "gemma-3-270m"
    monkeypatch.setattr(resources, "engine_for", lambda model: gemma_engine if model == gemma else real)
    st.cache_resource.clear()
    n_layers = gemma_engine.config.n_layers
    for drafter, prompt in (("lookup", "I love pizza 🍕 and 𓀀"), ("self", PROMPTS["default"])):
        result, params = _spec_run(gemma, prompt, False, drafter, 0.8, n_layers)
        _check_speculative_sentences(result, params, drafter, n_layers // 2, n_layers)
    st.cache_resource.clear()


def test_speculative_sentences_for_the_cases_a_prompt_may_give():
    from ui.speculative import claims

    everything = claims.steps_sentence(12, 4, 9, 9, 3)
    assert everything.startswith("12 tokens took 4 forwards of the model (3.00 tokens per forward")
    assert "3 steps checked 9 drafted tokens: every one of them was kept." in everything
    assert "none was kept" in claims.steps_sentence(8, 8, 7, 0, 7)
    assert "4 were kept (57%)" in claims.steps_sentence(8, 5, 7, 4, 3)
    nothing = claims.steps_sentence(1, 1, 0, 0, 0)
    assert nothing.startswith("1 token took 1 forward of the model") and "Nothing was drafted" in nothing
    assert claims.lookup_note(5, 5, 3) is None
    assert "had nothing to copy" in claims.lookup_note(0, 5, 3) and "length 3 down to 1" in claims.lookup_note(0, 5, 3)
    assert claims.lookup_note(2, 5, 3).startswith("3 steps of 5 found no earlier n-gram")

    when = ("12:00:00 UTC", 1.5)
    faster = claims.speed_sentence(2.02, 0.96, 3.56, "lookup", None, 30, *when)
    assert faster.startswith("On this prompt speculation ran 2.02× as fast as plain decoding: 96% of the drafts")
    assert "this machine at 12:00:00 UTC (load 1.5)" in faster
    wrong = claims.speed_sentence(0.8, 0.3, 1.23, "lookup", None, 30, *when)
    assert wrong.startswith("On this prompt the draft is wrong too often: 0.80× plain decoding's speed (30%")
    costly = claims.speed_sentence(0.51, 0.55, 2.13, "self", 26, 30, *when)
    assert "kept often enough" in costly and "the first 26 of 30 layers (87% of a forward)" in costly
    assert "about as fast as plain decoding: 0.97×" in claims.speed_sentence(0.97, None, 1.0, "lookup", None, 30, *when)
    assert "nothing was drafted" in claims.speed_sentence(0.9, None, 1.0, "lookup", None, 30, "t", None)
    noise = claims.speed_sentence(1.12, 0.0, 1.0, "lookup", None, 30, *when)
    assert "noise" in noise and "as fast as plain" not in noise

    assert claims.sweep_sentence([4, 8], [None, None], [1.0, 1.0], [0.9, 0.8], "k").startswith(
        "No setting drafted anything on this prompt (k = 4…8)."
    )
    text = claims.sweep_sentence([1, 2, 3], [0.2, 0.6, 0.4], [1.1, 1.9, 1.4], [0.9, 1.4, 1.0], "n")
    assert "The most drafts were kept at n = 2 (60%), the fewest at n = 1 (20%)." in text
    assert "Tokens per forward: 1.10–1.90." in text and "Faster than plain decoding at n = 2 (the best: 1.40×" in text
    text = claims.sweep_sentence([4, 8], [0.0, 0.0], [1.0, 1.0], [0.4, 0.3], "k")
    assert "0% of the drafts were kept at every setting that drafted." in text and "Tokens per forward: 1.00." in text
    assert "None ran clearly faster than plain decoding (the best: 0.40× at k = 4)." in text

    assert claims.greedy_sentence([" a", " b"], [" a", " b"], None).startswith("Identical: all 2 tokens")
    differ = claims.greedy_sentence([" a", " b"], [" a", " c"], 1)
    assert "the first 1 token agree, then they part" in differ and "“·b”" in differ and "“·c”" in differ

    lookup = claims.seed_sentence("lookup", 200, 200, 0.0, 5, 1.0, 9)
    assert "very tokens on all 200 seeds" in lookup and "p = 1" in lookup and "No sign that they differ" in lookup
    differs = claims.seed_sentence("self", 200, 20, 80.0, 6, 1e-12, 12)
    assert "χ² = 80.00 on 6 degrees of freedom, p = 1.00e-12" in differs and "differ more than chance" in differs
    assert "same two tokens on 20 of the 200 seeds" in differs
    assert "nothing is tested" in claims.seed_sentence("self", 50, 10, 0.0, 0, 1.0, 30)
    assert "the very first token differs" in claims.greedy_sentence([" a"], [" c"], 0)
    assert claims.spread_note("plain decoding (s)", 1.0, 1.2) is None
    busy = claims.spread_note("plain decoding (s)", 14.58, 5.246)
    assert busy.startswith("The two timings of plain decoding (s) differ by 178% (5.25 and 14.6)")


# ---- Experiments (hand-made numbers: every branch of each sentence) --------------------------------------------
def test_the_patching_sentence_names_exactly_the_blocks_that_restore_half():
    from ui.experiments import claims as exp_claims

    restored = np.zeros((6, 5))  # (layers, positions); the prompts first differ at position 1, the last is 4
    restored[1:4, 1] = 0.9
    restored[3:, 4] = 0.6
    text = exp_claims.patching_sentence(restored, 1)
    assert "after blocks 1–3" in text and "from block 3 on" in text and "restores 90%" in text
    restored[2, 1] = 0.1  # a hole: not a run of blocks
    restored[4, 4] = 0.0  # the last position's blocks are no longer "from block 3 on"
    text = exp_claims.patching_sentence(restored, 1)
    assert "after 2 of the 6 blocks, the last being block 3" in text
    assert "from block" not in text and "after 2 blocks (the first 3)" in text
    assert exp_claims.patching_sentence(np.zeros((6, 5)), 1).startswith("No patch at position 1")
    single = np.zeros((6, 5))
    single[2, 1] = 0.5
    assert "after block 2;" in exp_claims.patching_sentence(single, 1)


def test_the_sweep_sentence_quotes_the_three_lowest_heads_and_an_honest_rise():
    from ui.experiments import claims as exp_claims

    delta = np.array([[-0.5, 0.2], [-1.5, -0.25]])  # (layers, heads)
    text = exp_claims.sweep_sentence(delta, -2.0, " cat")
    assert "L1 H0 (-1.500)" in text
    assert text.index("L1 H0") < text.index("L0 H0") < text.index("L1 H1")
    assert "largest rise is +0.200" in text
    assert "no head's change raises it" in exp_claims.sweep_sentence(-np.abs(delta), -2.0, " cat")


def test_the_lens_caption_counts_the_cells_inside_and_outside_the_reach():
    from ui.experiments import claims as exp_claims

    text = exp_claims.lens_region_caption(["embed", "L0", "L1"], (1, 2), 3, 7, 2)
    assert "**L0**" in text and "position **5**" in text and "5 cells there changed their" in text
    assert "2 outside it" in text
    assert "1 cell there changed its" in exp_claims.lens_region_caption(["embed", "L0"], (9, 0), 0, 1, 0)
    assert "nothing is outlined" in exp_claims.lens_region_caption(["embed"], None, 0, 0, 0)


def test_the_window_release_sentence_is_the_engines_own_block_count():
    """Gemma 3 270M's shapes (18 layers, 15 of them with a 512-position window, K and V of one position in one layer
    2 KiB in float32): at 1,022 positions in blocks of 16 the engine's paged server held 21.47 MiB against 36.00 MiB
    without the release (docs/benchmarks.md, tests/test_paged_server.py); the sentence's arithmetic gives the same."""
    from ui.paged_kv import claims as paged_claims

    text = paged_claims.window_release_sentence(18, 15, 512, 18 * 2048, 16, n_positions=1022)
    assert "**21.47 MiB held instead of 36.00 MiB**" in text and "(40% less)" in text
    assert paged_claims.window_blocks(1022, 512, 16) == 33  # positions 510..1021: blocks 31..63
    assert paged_claims.window_blocks(512, 512, 16) == 32 and paged_claims.window_blocks(528, 512, 16) == 32
    assert paged_claims.window_release_sentence(30, 0, None, 30 * 2048, 16) is None  # no local layers (SmolLM2)


@pytest.mark.parametrize(
    ("n", "shared", "saying"),
    [
        (20, 19, "computed it once and handed that result to the other 19, which arrived while it was in flight"),
        (20, 17, "computed 3 of them; the other 17 arrived while an identical one was in flight and rode on it"),
        (2, 1, "computed it once and handed that result to the other 1, which arrived"),
        (5, 0, "computed every one of them (5): none was still in flight"),
    ],
)
def test_the_same_requests_sentence_carries_the_servers_counts(n, shared, saying):
    text = batching_claims.same_requests_sentence(n, shared, True, 0.4321)
    assert text.startswith(f"{n} identical requests sent at once, answered in 0.43 s.")
    assert saying in text and "Every request got the same tokens" in text
    assert (f"({shared / n:.0%} of the work saved)" in text) == (shared > 0)
    assert "bug" in batching_claims.same_requests_sentence(n, shared, False, 0.4)
