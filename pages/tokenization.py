"""Tokenization: how text becomes the token ids the model reads."""

import streamlit as st

from ui.common import charts, models, state
from ui.common import format as fmt
from ui.common.navigation import redirect_legacy_run
from ui.tokenization import claims
from ui.tokenization import compute as tok
from ui.tokenization.figures import token_chips_html, token_id_chart, visible
from ui.tokenization.own_text import has_chat_template, own_mask
from ui.tokenization.prompt import prompt_tokens_or_stop

redirect_legacy_run()  # see ui/common/navigation.py: a fresh server's first deep link runs this file without app.py

CHIP_LIMIT = 512  # tokens drawn as chips
CHART_LIMIT = 128  # bars in the id chart
BYTE_CHIP_LIMIT = 200  # chips in the raw-bytes column
TINY_CORPUS = (
    "The cat sat on the mat. The cat was tired, so the cat slept on the mat. "
    "A dog sat on the rug. The dog was not tired; the dog ran to the cat and the cat ran away. "
    "Cats and dogs sit, sleep and run. The mat, the rug and the sofa are where the cats sleep."
)

st.title("Tokenization")
st.markdown(
    "A model cannot read text. Before anything else, the prompt is cut into **tokens**, pieces of text "
    "found in a fixed vocabulary, and each token is replaced by its **id**, its row number in that "
    "vocabulary. Those ids are all the model ever sees. The vocabulary is made of **subwords**: common "
    "words are one token, rare words and typos are built from several pieces, so any text can be written."
)

model = models.current()
view = prompt_tokens_or_stop()

# 1. The prompt as the model sees it
st.header("Your prompt, token by token")
prompt, chat = state.get(state.PROMPT), bool(state.get(state.CHAT))
own = own_mask(model, prompt, chat)  # the user's own tokens: not a BOS, not the chat template's
n_own = sum(own)
cols = st.columns(4)
n_characters, n_code_points = tok.characters(prompt), len(prompt)
cols[0].metric(
    "Characters",
    f"{n_characters:,}",
    help="Of your text (the prompt in the sidebar), as a reader counts them: an emoji sequence such as 👨‍👩‍👧 or a "
    f"letter with a combining accent is one character. In Unicode code points: {n_code_points:,}.",
)
cols[1].metric("UTF-8 bytes", f"{len(prompt.encode('utf-8')):,}")
cols[2].metric(
    "Tokens of your text",
    f"{n_own:,}",
    help="Special tokens the tokenizer adds and the chat template's tokens are not counted.",
)
cols[3].metric("Characters per token", fmt.fixed(n_characters / n_own, 2) if n_own else "—")
if n_code_points != n_characters:
    st.caption(
        f"Your text is {fmt.count(n_characters, 'character')} as you see it, but "
        f"{fmt.count(n_code_points, 'Unicode code point')}: some characters are built from several (an emoji "
        "sequence joined by zero-width joiners, a flag, a letter and its combining accent). Tokenizers work on "
        "code points or bytes, never on what you see."
    )
extra = claims.prompt_tokens_caption(n_own, len(view.ids), [p for p, s in zip(view.pieces, view.special) if s], chat)
if extra:
    st.caption(extra)
shown = min(len(view.ids), CHIP_LIMIT)
if shown < len(view.ids):
    st.warning(f"The prompt has {len(view.ids):,} tokens; the chips show the first {shown}.")
st.caption(
    "One colour per token; `·` is a space, `↵` a newline, `→` a tab; the number under each token is its id."
    + (
        " Orange chips are special tokens: markers the tokenizer (a start-of-text token) or the chat template "
        "adds, not text."
        if any(view.special)
        else ""
    )
)
st.markdown(token_chips_html(view.pieces[:shown], view.ids[:shown], view.special[:shown]), unsafe_allow_html=True)
if state.get(state.CHAT):
    with st.expander("The chat template: what the model actually receives"):
        st.code(view.text, language=None)
        st.caption("The template (Jinja) that produced it, from the model's tokenizer:")
        st.code(tok.chat_template(model), language="jinja")

# 1b. How this model's tokenizer writes text (what differs between models)
facts = tok.tokenizer_facts(model)
with st.expander(
    f"How this model's tokenizer writes text: "
    f"{'byte-level BPE' if facts.scheme == 'byte-level' else 'SentencePiece-style BPE'}, "
    f"{facts.vocab_size:,} entries",
    expanded=True,
):
    space = f"`{facts.space_symbol}`"
    if facts.scheme == "byte-level":
        st.markdown(
            f"**Byte-level BPE.** Every one of the 256 byte values has a printable stand-in character, and "
            f"merges start from bytes; a space is the stand-in {space}, glued to the front of the next word. "
            f"Nothing is ever unknown: a character with no entry of its own is spelled from its bytes."
        )
    else:
        fallback = (
            " Characters with no entry of their own fall back to **byte tokens**, one per UTF-8 byte, written `<0xNN>`."
            if facts.byte_fallback
            else ""
        )
        st.markdown(
            f"**SentencePiece-style BPE.** Merges start from whole characters, and a space is written "
            f"{space}, glued to the front of the next word.{fallback}"
        )
    rare = claims.rare_character_sentence(
        facts.rare_text,
        facts.rare_pieces,
        [tok.model_piece_text(model, piece) for piece in facts.rare_pieces],
        facts.scheme == "byte-level",
    )
    start = (
        f"the tokenizer adds **`{facts.bos[1]}`** (id {facts.bos[0]}) before every text, so it is the "
        "first token above."
        if facts.bos
        else "the tokenizer adds nothing; the first token is the text's own."
    )
    st.markdown(f"- Vocabulary: **{facts.vocab_size:,}** entries.\n- Start of text: {start}\n- {rare}")
    shown_raw = min(len(view.ids), 16)
    st.dataframe(
        [
            {"position": i, "id": view.ids[i], "entry as stored": view.raw[i], "text": visible(view.pieces[i])}
            for i in range(shown_raw)
        ],
        hide_index=True,
        key="tok_raw_entries",
    )
    st.caption(
        f"The prompt's first {shown_raw} tokens as the vocabulary stores them (the space symbol "
        f"{space} included"
        + (
            ", and every byte of a character split over tokens as its printable stand-in"
            if facts.scheme == "byte-level"
            else ""
        )
        + ") and the text each one adds, in the chips' notation (`<0xNN>` for a piece of a character)."
    )

n_chart = min(len(view.ids), CHART_LIMIT)
if n_chart < len(view.ids):
    st.caption(f"The chart shows the first {n_chart} of {len(view.ids):,} tokens.")
charts.show(token_id_chart(view.pieces[:n_chart], view.ids[:n_chart]), key="token_ids_chart", shared=True)

# 2. Token ids mean nothing numerically
st.header("Token ids are names, not numbers")
word = st.text_input("A word (with its leading space, as inside a sentence)", **state.bind(state.TOK_ID_WORD, " cat"))
neighbours = tok.id_neighbours(model, word) if word else None
if neighbours:
    st.markdown(claims.id_neighbours_sentence(word, neighbours.word_pieces, neighbours.centre_id, neighbours.rows))
    st.dataframe(
        [{"id": i, "token": visible(p), "learned at merge #": rank} for i, p, rank in neighbours.rows],
        hide_index=True,
        key="id_neighbours",
    )
else:
    st.info("Type a word to see the ids around its id.")

# 3. Why subwords
st.header("Why subwords? Words, BPE and bytes")
compare = st.text_input("Text to compare", **state.bind(state.TOK_COMPARE, "The cat sat on thecatsatonthemat"))
corpus = st.text_area(
    "Training paragraph (the word vocabulary and the tiny BPE below learn from it)",
    height=110,
    max_chars=5000,
    **state.bind(state.TOK_CORPUS, TINY_CORPUS),
)
if compare:
    words = tok.word_level(compare, corpus)
    bpe_ids, bpe, bpe_special = tok.model_bpe(model, compare)
    data = tok.raw_bytes(compare)
    a, b, c = st.columns(3)
    with a:
        st.subheader("(a) Word-level")
        unknown = sum(1 for w, _ in words if w == tok.UNK)
        st.caption(claims.word_level_caption(len(set(tok.words(corpus))), len(words), unknown))
        st.markdown(token_chips_html([w for w, _ in words], [i for _, i in words]), unsafe_allow_html=True)
    with b:
        st.subheader("(b) The model's BPE")
        bpe_specials = [piece for piece, special in zip(bpe, bpe_special) if special]
        st.caption(claims.bpe_caption(tok.vocab_size(model), len(bpe_ids) - len(bpe_specials), bpe_specials))
        st.markdown(token_chips_html(bpe, bpe_ids, bpe_special), unsafe_allow_html=True)
    with c:
        st.subheader("(c) Raw bytes")
        st.caption(claims.raw_bytes_caption(len(data), len(bpe_ids) - len(bpe_specials)))
        st.markdown(
            token_chips_html(
                [chr(x) if 32 <= x < 127 else f"<0x{x:02X}>" for x in data][:BYTE_CHIP_LIMIT], data[:BYTE_CHIP_LIMIT]
            ),
            unsafe_allow_html=True,
        )
        if len(data) > BYTE_CHIP_LIMIT:  # never cut without saying so
            st.caption(f"The chips show the first {BYTE_CHIP_LIMIT} of the {len(data):,} bytes.")
else:
    st.info("Type some text to compare the three tokenizers.")

# 4. Merge by merge with the model's own merges
st.header("Merge by merge")
unit = tok.symbol_unit(model)
st.markdown(
    f"Byte-pair encoding starts from single {unit}"
    + (
        " (a code point outside the vocabulary starts as its byte tokens)"
        if facts.scheme != "byte-level" and facts.byte_fallback
        else ""
    )
    + " and repeatedly glues together the adjacent pair that comes first in the model's list of learned merges "
    "(lower rank = learned earlier, more frequent)."
)
bpe_word = st.text_input("Word to build", **state.bind(state.TOK_BPE_WORD, "thecatsatonthemat"))
pieces = tok.pre_tokens(model, bpe_word) if bpe_word else []
if not pieces:
    st.info("Type a word to see it built merge by merge.")
else:
    if len(pieces) > 1:
        st.info(
            f"The pre-tokenizer splits this text into {len(pieces)} words before BPE; showing the first, "
            f"`{visible(tok.model_piece_bytes(model, pieces[0]).decode('utf-8', 'replace'))}`."
        )
    if len(pieces[0]) > tok.MAX_BPE_BYTES:
        st.info(
            f"This word is {len(pieces[0]):,} {unit} long: the merges below are replayed on its "
            f"first {tok.MAX_BPE_BYTES}."
        )
    steps = tok.bpe_steps(model, bpe_word)
    start = tok.replay_start(steps[0].parts)
    for n, step in enumerate(steps):
        if step.merged is None:
            label = claims.merge_start_label(unit, start.fallback_characters)
        else:
            left_piece, right_piece = (visible(text) for text in step.merged_texts)
            label = f"merge {n}: `{left_piece}` + `{right_piece}` (rank {step.rank:,})"
        left, right = st.columns([1, 3])
        left.markdown(label)
        right.markdown(token_chips_html(step.texts), unsafe_allow_html=True)
    cut = len(pieces[0]) > tok.MAX_BPE_BYTES
    st.caption(
        claims.merge_replay_caption(
            len(steps) - 1,
            len(steps[0].parts),
            len(steps[-1].parts),
            steps[-1].parts == tok.tokenizer_split(model, bpe_word),
            cut,
            unit,
            start.fallback_characters,
            start.fallback_bytes,
        )
    )

# 5. A tiny BPE trained live
st.header("Train a tiny BPE")
vocab = st.slider(
    "Vocabulary size (256 byte symbols + learned merges)", 257, 400, **state.bind_slider(state.TOK_VOCAB, 300)
)
tiny = tok.train_tiny_bpe(corpus, vocab, compare or " ")
st.caption(
    f"Trained with the `tokenizers` library on the paragraph above: {len(tiny.merges)} merges learned, "
    f"vocabulary {tiny.vocab_size}. Merges are listed in the order they were learned."
)
m1, m2 = st.columns(2)
m1.dataframe(
    [
        {
            "step": i + 1,
            "merge": f"{visible(tok.piece_text(a, False))} + {visible(tok.piece_text(b, False))}",
            "new token": visible(tok.piece_text(a + b, False)),
        }
        for i, (a, b) in enumerate(tiny.merges)
    ],
    hide_index=True,
    height=300,
    key="tiny_merges",
)
with m2:
    st.markdown(f"**The comparison text through the tiny tokenizer** ({len(tiny.tokens)} tokens):")
    st.markdown(token_chips_html([tok.piece_text(t, False) for t in tiny.tokens]), unsafe_allow_html=True)

st.header("What to try next")
st.markdown("\n".join(claims.tokenization_suggestions(has_chat_template(model), chat)))
