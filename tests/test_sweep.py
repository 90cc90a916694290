"""Every sentence true on any prompt and either model: the pages' claims and "try next" suggestions, swept.

Each page whose text is computed from the prompt is opened (AppTest, one session per model, the prompt
typed into the sidebar as a user would) on both models and on prompts of other shapes than the ones the
text was written for: no pronoun, two candidate antecedents, byte pieces (byte-level BPE's, SentencePiece's
``<0xNN>`` fallback), code, German with umlauts, Japanese, and a chat template (SmolLM2 only: Gemma 3 270M
is a base model without one). Everything the page writes is read back, and the test fails on

- a dangling sentence: a paragraph or list item that ends in ":" or ",", an empty list item, a value
  left unformatted ("None", "nan", "-0.00"), a count of nothing ("first 0 characters");
- a suggestion whose promised outcome does not hold on that model: checked against the engine itself,
  outside the page's code (the logit-lens example's answer and its take-over, the head a button names
  really putting the pronoun's most weight on that word, an edit suggested "after" the pronoun really
  coming after it and being the user's own word, the temperature suggestion's monotone curves, the
  sampler's counts, the chat-template suggestion only where a template exists and is off);
- a count that includes special tokens as text: the text's tokens are the tokenizer's encoding of the
  prompt without its added tokens, on Tokenization, in the BPE column and on Compare.

Both weights modes are swept: SmolLM2 dense in float32 (the app's default), Gemma on its file's own blocks
(``LLM_EXPLORER_QUANT=gguf``, the mode the class and school servers run). The sentences are computed from the
numbers either way; on Gemma's blocks its decoding (the Speculative, Compare and Experiments pages generate) is
2.7x faster than through its dense float32 output matrix of 262,144 rows.

Cost: the session's engines are shared (``engine``, ``gguf_engine``, ``gemma_gguf_engine``: no load of its own),
each page's forwards are cached across its reruns, the two pages that run a traced forward of their own (Overview,
the logit lens) and the side-by-side page (which generates with both models) are swept on three of the prompts,
the pages whose text follows the settings (Sampling, Generation, Speculative decoding, Experiments) on four and the
Quantization page (its block view describes the model's file) on one, and the independent checks are one plain
forward per prompt and model (a traced one where a button names a head).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import streamlit as st
import torch
from streamlit.testing.v1 import AppTest

from tests.apptest_utils import APP, assert_clean, chart, plotly_array
from ui.attention.reference import MIN_SHARE

pytestmark = pytest.mark.real_model

SMOL, GEMMA = "SmolLM2-135M-Instruct", "gemma-3-270m"
TIMEOUT = 600
PROMPTS = {  # name: (prompt, chat template)
    "default": ("The cat sat on the mat because it was tired.", False),
    "no-pronoun": ("Bank is closed on Sunday", False),
    "two-nouns": ("The trophy did not fit in the suitcase because it was too big.", False),
    "bytes": ("I love pizza 🍕 and 𓀀", False),
    "code": ("def add(a, b):\n    return a + b", False),
    "german": ("Die Katze saß auf der Matte, weil sie müde war.", False),
    "japanese": ("猫はマットの上に座った。", False),
    "chat": ("The trophy did not fit in the suitcase because it was too big.", True),
}
PAGES = ("tokenization", "embeddings", "attention", "logits")  # on every prompt
TRACED_PAGES = ("overview", "logit_lens")  # a traced forward each: on the prompts below (the costliest pages)
TRACED_ON = ("default", "bytes", "japanese")
COMPARED_ON = ("default", "bytes", "japanese")  # the side-by-side page generates with both models: three prompts
# their text follows the settings more than the prompt
SETTINGS_PAGES = ("sampling", "generation", "speculative", "experiments")
SETTINGS_ON = ("default", "no-pronoun", "code", "chat")
MODEL_PAGES = ("quantization",)  # the block view and its introduction describe the model's file: one prompt
ENDS = (".", "!", "?", ")", "…", "”", "*", "`", '"', "'")


def problems_in(text: str) -> list[str]:
    """The dangling or unformatted bits of one markdown text (each paragraph and list item checked). A line may end
    in ":" only when more lines follow it in the same text (a lead-in to its list)."""
    found = []
    lines = [line.strip() for line in text.split("\n")]
    for index, item in enumerate(lines):
        if not item or item.startswith("```") or item.startswith("|"):
            continue
        if item in ("-", "*"):
            found.append("an empty list item")
            continue
        plain = re.sub(r"`[^`]*`", "`x`", item)  # code spans hold tokens, which may end in anything
        more = any(lines[index + 1 :])
        if plain.endswith((",", ";")) or (plain.endswith(":") and not more) or not plain.endswith(ENDS + (":",)):
            found.append(f"dangling: {item[-80:]!r}")
        for bad in (r"\bNone\b", r"\bnan\b", r"-0\.0+\b", r"\bfirst 0 \w+", r"\b0 tokens? survive", r"\{|\}"):
            if re.search(bad, plain):
                found.append(f"{bad} in {item[:80]!r}")
    return found


TEXT_KINDS = ("markdown", "caption", "info", "success", "warning")


def _in_order(node):
    """The page's elements in the order they are drawn (blocks such as columns walked in place)."""
    children = getattr(node, "children", None)
    if children is None:
        yield node
        return
    for key in sorted(children):
        yield from _in_order(children[key])


def page_texts(at: AppTest) -> list[str]:
    """Every sentence the page shows in the main area (markdown, captions, notes), as written; token chips (HTML)
    left out, and a lead-in that ends in ":" kept only when what follows it is more text (a lead-in to a chart,
    a table, chips or a code block is not dangling)."""
    elements = list(_in_order(at.main))
    out = []
    for i, element in enumerate(elements):
        kind = getattr(element, "type", "")
        if kind not in TEXT_KINDS:
            continue
        value = str(element.value)
        if value.lstrip().startswith("<"):
            continue  # chips: HTML, not sentences
        following = next((e for e in elements[i + 1 :] if getattr(e, "type", "") not in ("empty",)), None)
        followed_by_text = (
            following is not None
            and getattr(following, "type", "") in TEXT_KINDS
            and not str(following.value).lstrip().startswith("<")
        )
        if value.rstrip().endswith(":") and not followed_by_text:
            continue  # "The top 12 of 49,152 logits:" above its chart
        out.append(value)
    return out


QUANT = {SMOL: None, GEMMA: "gguf"}  # each model's weights mode in its sweep (LLM_EXPLORER_QUANT)


@pytest.fixture(scope="module")
def loaded(engine, gguf_engine, gemma_gguf_engine):
    """(model, weights mode) -> the session's engine: Compare loads SmolLM2 beside Gemma, in Gemma's mode."""
    return {(SMOL, None): engine, (SMOL, "gguf"): gguf_engine, (GEMMA, "gguf"): gemma_gguf_engine}


@pytest.fixture(scope="module")
def app(loaded):
    """The app's engines are the session's (patched into the loader the app's cached resources call)."""
    from ui.common import resources

    with pytest.MonkeyPatch.context() as patch:
        real = resources.load_engine
        patch.setattr(
            resources,
            "load_engine",
            lambda model=None, **kwargs: (
                loaded.get((model or SMOL, kwargs.get("quant"))) or real(model=model, **kwargs)
            ),
        )
        st.cache_resource.clear()
        st.cache_data.clear()
        yield
    st.cache_resource.clear()
    st.cache_data.clear()


def _session(model: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"model": model})
    at.run()
    assert_clean(at)
    return at


def _open(at: AppTest, page: str, prompt: str, chat: bool) -> AppTest:
    """``page`` on ``prompt``: the page first (on the old prompt, whose results are cached), then the prompt typed
    into the sidebar, so a new prompt costs one run of this page, not one of the previous page too."""
    if at.session_state["_page"] != page:
        at.switch_page(f"pages/{page}.py").run()
    if at.session_state["prompt"] != prompt:
        at.text_area(key="_w_prompt").input(prompt).run()
    if bool(at.session_state["chat"]) != chat:
        at.toggle(key="_w_chat").set_value(chat).run()
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    return at


def _own_ids(engine, prompt: str) -> list[int]:
    """The text's own tokens, by the tokenizer alone: its encoding without the tokens it adds (a BOS)."""
    return engine.tokenizer.encode(prompt, special_tokens=False)


def _metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.main.get("metric") if m.label == label)


def _check_tokenization(at, engine, prompt, chat, problems):
    own = _own_ids(engine, prompt)
    if _metric(at, "Tokens of your text") != f"{len(own):,}":
        problems.append(f"Tokens of your text {_metric(at, 'Tokens of your text')} != {len(own)} (specials counted?)")
    captions = " ".join(c.value for c in at.main.caption)
    compare = "The cat sat on thecatsatonthemat"  # the page's default comparison text
    n_bpe = len(_own_ids(engine, compare))
    if f"Vocabulary: {engine.tokenizer.vocab_size:,} subwords. {n_bpe:,} tokens" not in captions:
        problems.append(f"the BPE column does not count {n_bpe} text tokens")
    if f"as many as the model's BPE needs ({n_bpe})" not in captions:
        problems.append("the raw-bytes comparison does not use the text's own token count")
    shown = " ".join(m.value for m in at.main.markdown)
    has_template = engine.tokenizer.chat_template is not None
    if ("Turn on **Chat template**" in shown) != (has_template and not chat):
        problems.append("the chat-template suggestion does not match the template and the toggle")


def _pronoun_query(engine, prompt, chat, pieces):
    """The page's pronoun position (its last token), found here from the tokenizer alone."""
    from ui.attention import reference

    ids = engine.encode_prompt(prompt, chat=chat)
    for i, piece in enumerate(pieces):
        if reference.is_pronoun(piece.strip()) and piece.strip():
            return ids, i
    return ids, None


NOT_NOUNS = frozenset(  # the sweep prompts' verbs, adjectives and adverbs, written out by hand: never a referent
    "sat was tired did not fit too big closed love war saß müde return add def thanked worked hard".split()
)


def _two_sided_sign_test(a: int, b: int) -> float:
    n = a + b
    return min(1.0, 2 * sum(math.comb(n, k) for k in range(max(a, b), n + 1)) / 2**n) if n else 1.0


def _check_pronoun_sentence(shown: str, problems: list[str]) -> None:
    """The candidates are nouns (none of ``NOT_NOUNS``), and "leans to" only when the top two counts pass a sign
    test at 5%, computed here from the counts the sentence prints."""
    counts = [(word, int(n)) for word, n in re.findall(r"`([^`]+)` in (\d+)", shown)]
    for word, _ in counts:
        if word.strip("·").lower() in NOT_NOUNS:
            problems.append(f"“{word}” counted as a candidate referent: not a noun")
    ranked = sorted((n for _, n in counts), reverse=True)
    if "leans to" in shown and (len(ranked) < 2 or _two_sided_sign_test(ranked[0], ranked[1]) >= 0.05):
        problems.append(f"a verdict on counts {ranked[:2]}: inside chance")


def _check_attention(at, engine, prompt, chat, problems):
    shown = " ".join(m.value for m in at.main.markdown)
    _check_pronoun_sentence(shown, problems)
    words_typed = re.findall(r"\w+", prompt)
    trace = None
    for button in at.main.button:
        found = re.fullmatch(r"Show L(\d+) H(\d+): “(.+)” → “(.+)”", button.label)
        if not found:
            continue
        layer, head, pronoun, word = int(found[1]), int(found[2]), found[3], found[4]
        ids = engine.encode_prompt(prompt, chat=chat)
        if trace is None:  # one traced forward per prompt, independent of the page's cached maps
            _, trace = engine.traced_forward(ids[:128], last_only=True)
        pieces = [engine.tokenizer.decode([i]) for i in ids[:128]]
        query = max(i for i, p in enumerate(pieces) if p.strip() == pronoun.replace("·", "").strip())
        row = trace.layers[layer].attention_probs[0, head, query].numpy().copy()
        row[0] = 0.0  # the sink is left out, as the page says
        spans = [
            i
            for i in range(1, query)
            if word.startswith("".join(pieces[i : i + 1]).strip())
            and "".join(pieces[i : i + 8]).strip().startswith(word)
        ]
        if not spans:
            problems.append(f"“{word}” is not a word before “{pronoun}”")
            continue
        start = spans[-1]
        end = next(j for j in range(start + 1, query + 1) if "".join(pieces[start:j]).strip() == word)
        on_word = float(row[start:end].sum())
        others = np.delete(row[:query], range(start, end))
        if on_word < MIN_SHARE or on_word < others.max():  # the word's weight beats every other earlier token's
            problems.append(
                f"L{layer} H{head} puts {on_word:.2f} of “{pronoun}” on “{word}” and "
                f"{others.max():.2f} on {pieces[int(np.argmax(np.where(np.isin(np.arange(query), range(start, end)), -1, row[:query])))]!r}"
            )
    for word, _place in re.findall(r"Changing `([^`]+)` \(positions? (\d+)", shown):
        if word.replace("·", " ").strip() not in prompt:
            problems.append(f"the suggestion offers {word!r}, not a word of the user's text")
    later = re.search(
        r"Changing `[^`]+` \(positions? (\d+)(?:–\d+)?\) cannot move any head of `[^`]+` \(position (\d+)\)", shown
    )
    if later and int(later[1]) <= int(later[2]):
        problems.append("a word 'after' the query that is not after it")
    if not any(w.lower() in ("it", "he", "she", "they", "sie", "er", "es", "il", "elle") for w in words_typed):
        if "has no pronoun" not in " ".join(i.value for i in at.main.info):
            problems.append("no pronoun, and no sentence saying so")


_LENS_CHECKED: set = set()  # each model's example is checked once (it is the same on every prompt)


def _check_lens(at, engine, prompt, problems):
    shown = " ".join(m.value for m in at.main.markdown)
    found = re.search(r"Change the prompt to “(.+?)”: this model answers it with \*\*(.+?)\*\*", shown)
    if not found:
        if "answers **" not in shown and "Type a prompt whose next word you know" not in shown:
            problems.append("no lens suggestion")
        return
    suggested, answer = found[1], found[2].replace("·", " ")
    if (id(engine), suggested) in _LENS_CHECKED:
        return
    _LENS_CHECKED.add((id(engine), suggested))
    ids = engine.encode_prompt(suggested)
    logits, trace = engine.traced_forward(ids, last_only=True)
    top = int(logits[-1].argmax())
    if engine.tokenizer.decode([top]) != answer:
        problems.append(
            f"the lens example {suggested!r} is answered {engine.tokenizer.decode([top])!r}, not {answer!r}"
        )
    first = int(engine.unembed(trace.embeddings[0, -1:]).argmax())
    if first == top:
        problems.append("the lens example's answer does not take over: the embeddings already say it")


def _check_logits(at, engine, prompt, chat, problems):
    from inference import SamplingParams, sample

    shown = " ".join(m.value for m in at.main.markdown)
    logits = engine.forward_logits(engine.encode_prompt(prompt, chat=chat))[-1].double()  # one plain forward
    temperatures = torch.arange(0.1, 2.0001, 0.1, dtype=torch.float64)
    probs = torch.stack([(logits / t).softmax(-1) for t in temperatures])
    entropy = -(probs * probs.clamp_min(1e-300).log2()).sum(-1)
    if "the top token's probability falls and the entropy rises" in shown:
        if not (bool((probs.max(-1).values.diff() <= 1e-12).all()) and bool((entropy.diff() >= -1e-9).all())):
            problems.append("the temperature suggestion's curves are not monotone here")
    drawn = re.search(r"\*\*([\d,]+) tokens can be drawn\*\*", shown)
    result = sample(
        logits.float(),
        SamplingParams(temperature=0.8),
        torch.Generator().manual_seed(0),
        previous_ids=engine.encode_prompt(prompt, chat=chat),
        record=True,
    )
    final = int(torch.count_nonzero(result.stage_probs["final"]))
    if drawn is None or int(drawn[1].replace(",", "")) != final:
        problems.append(f"the sampler keeps {final:,} tokens, the page says {drawn[1] if drawn else 'nothing'}")
    sweep = chart(at, "temperature_sweep")["data"]
    page_entropy = plotly_array(sweep[0]["y"])[: 2 * len(temperatures) - 1 : 2]  # the page steps by 0.05
    if not np.allclose(page_entropy, entropy.numpy(), atol=1e-3):
        problems.append("the page's temperature sweep is not the model's")


def _check_compare(at, engines, prompt, problems):
    shown = " ".join(m.value for m in at.main.markdown)
    for name, engine in engines.items():
        own = _own_ids(engine, prompt)
        if f"**{len(own):,} token{'s' * (len(own) != 1)}** for the text's {len(prompt):,} character" not in shown:
            problems.append(f"{name}: the text's {len(own)} tokens are not what Compare counts")
    axes = [chart(at, f"cmp_top_{side}")["layout"]["xaxis"]["range"] for side in ("left", "right")]
    if axes[0] != axes[1]:
        problems.append(f"the two top-10 charts do not share their axis: {axes}")


@pytest.mark.parametrize("model", [SMOL, GEMMA])
def test_every_sentence_holds_on_every_prompt(model, app, loaded, monkeypatch):
    from inference import settings

    if QUANT[model]:
        monkeypatch.setenv("LLM_EXPLORER_QUANT", QUANT[model])
    settings.current.cache_clear()
    st.cache_resource.clear()  # the clients of the other mode's engines,
    st.cache_data.clear()  # and what they computed (a server runs one weights mode: its caches are not keyed by it)
    engines = {name: loaded[name, QUANT[model]] for name in (SMOL, GEMMA) if (name, QUANT[model]) in loaded}
    engine = engines[model]
    at = _session(model)
    problems: list[str] = []
    for name, (prompt, chat) in PROMPTS.items():
        if chat and engine.tokenizer.chat_template is None:
            continue  # the sidebar disables the toggle for a model without a template
        pages = PAGES + (TRACED_PAGES if name in TRACED_ON else ()) + (SETTINGS_PAGES if name in SETTINGS_ON else ())
        for page in pages + (MODEL_PAGES if name == "default" else ()):
            _open(at, page, prompt, chat)
            where = f"{model} / {name} / {page}"
            problems += [f"{where}: {p}" for text in page_texts(at) for p in problems_in(text)]
            checks = []
            if page == "tokenization":
                _check_tokenization(at, engine, prompt, chat, checks)
            elif page == "attention":
                _check_attention(at, engine, prompt, chat, checks)
            elif page == "logit_lens":
                _check_lens(at, engine, prompt, checks)
            elif page == "logits":
                _check_logits(at, engine, prompt, chat, checks)
            problems += [f"{where}: {p}" for p in checks]
        if model == GEMMA and name in COMPARED_ON:  # both models are loaded by now: the side-by-side page
            _open(at, "compare", prompt, False)
            problems += [f"compare / {name}: {p}" for text in page_texts(at) for p in problems_in(text)]
            checks = []
            _check_compare(at, engines, prompt, checks)
            problems += [f"compare / {name}: {p}" for p in checks]
    assert not problems, "\n".join(problems)


def test_the_sweep_catches_what_it_is_for():
    """A positive control: the issue's own faulty texts are caught."""
    assert problems_in(
        "Averaged over heads, 48% goes to the first token. The interesting work happens in single heads:"
    )
    assert problems_in("They agree on the first 0 characters (∅), then part.")
    assert problems_in("Entropy -0.00 bits.")
    assert problems_in("-")
    held_out = []  # the pronoun sentence: a verb counted, and 19 heads against 18 called a verdict
    _check_pronoun_sentence(
        "`thanked` in 19 (strongest L3 H1 40%); `student` in 18. More heads pick `thanked`: `she` leans to *thanked*.",
        held_out,
    )
    assert len(held_out) == 2
    assert not problems_in("- Changing `·tired` (position 9) cannot move any head of `·it` (position 7).")
    assert not problems_in("Greedy decoding takes the highest score: **·on**.")
