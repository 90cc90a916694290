"""Attention: every token looks back at the tokens before it, one weighted average per head."""

import streamlit as st

from ui.attention import claims
from ui.attention import compute as att
from ui.attention import figures as figs
from ui.attention import reference as ref
from ui.attention.explore import explore_heads
from ui.class_page import broadcast
from ui.common import charts, models, state
from ui.common import format as fmt
from ui.common.navigation import redirect_legacy_run
from ui.common.token_text import visible
from ui.experiments import head_switch
from ui.tokenization.own_text import own_mask
from ui.tokenization.own_text import words as own_words
from ui.tokenization.prompt import prompt_tokens_or_stop

redirect_legacy_run()  # see ui/common/navigation.py: a fresh server's first deep link runs this file without app.py

EXAMPLE_TWO_NOUNS = "The trophy did not fit in the suitcase because it was too big."  # "it": trophy or suitcase?

st.title("Attention")
st.markdown(
    "Embeddings give each token a vector on its own. **Attention** is how tokens read each other: every "
    "position makes a **query** (what am I looking for?), every position offers a **key** (what do I contain?) "
    "and a **value** (what I pass on). A query's dot product with each key is a score; scaled and passed "
    "through softmax, the scores become weights that sum to 1, and the token takes that weighted average of "
    "the values. A token may only look **back**: the causal mask hides the future. Each layer has several heads "
    "doing this in parallel, each with its own idea of what to look for."
)

view = prompt_tokens_or_stop()

maps = att.attention_maps(models.current(), view.ids)
pieces = view.pieces[: maps.n_tokens]
own = own_mask(models.current(), state.get(state.PROMPT), bool(state.get(state.CHAT)))[: maps.n_tokens]
words = own_words(pieces, own)  # the user's own words (never a chat template's or a BOS)
pronoun_index = ref.find_pronoun(words)
reference = ref.resolve(maps.probs, words, pronoun_index) if pronoun_index is not None else None
last_own = max((i for i, mine in enumerate(own) if mine), default=maps.n_tokens - 1)
start_query = reference.query if reference is not None else last_own  # the pronoun, else the last token typed
if maps.total_tokens > maps.n_tokens:
    st.warning(
        f"The prompt has {maps.total_tokens:,} tokens; attention is computed and drawn for the first "
        f"{maps.n_tokens}. Those rows are exact: a causal model never lets later tokens change them."
    )


def _leading(found: ref.Reference | None) -> tuple[str, str, int, list[int]] | None:
    """(pronoun, word, query, the word's positions) of the antecedent most heads send the pronoun to, if any."""
    if found is None or not found.counted:
        return None
    best = max(found.antecedents, key=lambda a: a.n_heads)
    return found.pronoun.text, best.word.text, found.query, list(best.word.positions)


explore_heads(
    models.current(), view.ids, pieces, start_query, _leading(reference), head_switch.render, broadcast.publish
)

# 3b. Local and global layers (models with a sliding window)
config = att.layer_layout(models.current())
if config.local_layers:
    st.header("Local and global layers: the sliding window")
    globals_ = [i for i in range(config.n_layers) if i not in config.local_layers]
    st.markdown(
        f"This model has **{len(config.local_layers)} local layers**: a query there sees only the "
        f"**{config.window} most recent keys** (itself included), so their cost and their KV cache stop "
        f"growing with the context; its **{len(globals_)} global layers** ({', '.join(map(str, globals_))}) "
        "see every earlier key and carry information further back. Below "
        f"{config.window} tokens the two kinds see the same keys: the difference shows only in a longer prompt."
    )
    charts.show(
        figs.layer_kinds(list(config.local_layers), config.n_layers, config.window), key="layer_kinds", shared=True
    )
    if len(view.ids) <= config.window:
        st.info(f"Your prompt has {len(view.ids):,} tokens, within the {config.window}-token window.")
        st.button(
            f"Use a prompt longer than {config.window} tokens",
            key=state.ATT_LONG_PROMPT,
            on_click=state.set_values,
            args=({state.PROMPT: att.long_prompt_for_window(models.current(), state.DEFAULT_PROMPT)},),
        )
    else:
        windowed = att.window_view(models.current(), view.ids)
        left, right = st.columns(2)
        local_layer = left.selectbox(
            "Local layer",
            list(config.local_layers),
            **state.bind(state.ATT_WINDOW_LOCAL, config.local_layers[0], options=list(config.local_layers)),
        )
        global_layer = right.selectbox(
            "Global layer", globals_, **state.bind(state.ATT_WINDOW_GLOBAL, globals_[0], options=globals_)
        )
        colour_top = figs.window_colour_top(
            [
                (windowed.pooled[i], windowed.block, windowed.window, i == local_layer)
                for i in (local_layer, global_layer)
            ]
        )  # one colour scale for both
        for column, layer_index, label in ((left, local_layer, "local"), (right, global_layer, "global")):
            with column:
                charts.show(
                    figs.window_heatmap(
                        windowed.pooled[layer_index],
                        windowed.block,
                        windowed.n_tokens,
                        windowed.window,
                        f"Layer {layer_index} ({label}), mean over heads",
                        label == "local",
                        colour_top,
                    ),
                    key=f"window_{label}",
                    shared=True,
                )
        st.caption(
            f"The first {windowed.n_tokens} tokens of the prompt, traced; each cell is the largest head-averaged "
            f"weight in a {windowed.block} × {windowed.block} block of (query, key) positions. Keys left of "
            f"the dashed line are {windowed.window} or more positions behind their query: masked (grey) in the "
            "local layer, still read in the global one. Both maps share one colour scale, which stops at the "
            "higher of their 99th percentiles."
        )
        st.markdown(
            claims.window_sentence(
                windowed.window,
                len(config.local_layers),
                max(float(windowed.outside_max[i]) for i in config.local_layers),
                windowed.outside_cells,
                globals_,
                [float(x) for x in windowed.outside_share],
                [float(x) for x in windowed.sink_share],
                pieces[0],
            )
        )

# 4. The guided example, for whatever pronoun and candidate words this prompt has
st.header("Where does the pronoun look?")
buttons = []
if reference is None:
    st.info(claims.no_pronoun_sentence(EXAMPLE_TWO_NOUNS), icon=":material/info:")
    st.button(
        f"Use “{EXAMPLE_TWO_NOUNS}”",
        key=state.ATT_USE_TWO_NOUNS,
        on_click=state.set_values,
        args=({state.PROMPT: EXAMPLE_TWO_NOUNS, state.CHAT: False},),
    )
else:
    query = reference.query
    over_layers = att.query_over_layers(maps, query)
    charts.show(figs.query_over_layers(over_layers, pieces, query), key="it_over_layers", shared=True)
    st.markdown(claims.sink_sentence(over_layers, pieces, query))
    st.markdown(
        claims.pronoun_sentence(
            reference.pronoun.text,
            [(a.word.text, a.n_heads, a.best, a.only_first_token) for a in reference.antecedents],
            reference.n_heads,
            ref.MIN_SHARE,
            reference.n_previous_token,
        )
    )
    shown = [a for a in reference.antecedents if a.n_heads and a.best][:3]
    for column, antecedent in zip(st.columns(len(shown)) if shown else [], shown):
        lay, hd, _ = antecedent.best[0]
        buttons.append(antecedent.word.text)
        column.button(
            f"Show {fmt.head(lay, hd)}: “{visible(reference.pronoun.text)}” → “{antecedent.word.text}”",
            key=state.att_show_button(str(antecedent.word.start)),
            on_click=state.set_values,
            args=({state.ATT_LAYER: lay, state.ATT_HEAD: hd, state.ATT_QUERY: query},),
        )

st.header("What to try next")
query = reference.query if reference is not None else last_own
later = next((w for w in reversed(words) if w.start > query and w.text[:1].isalpha()), None)
earlier_words = [w for w in words if w.end - 1 < query and w.text[:1].isalpha()]
earlier = next((a.word for a in (reference.antecedents if reference else []) if a.n_heads), None)
earlier = (
    earlier or next(iter(ref.candidates(earlier_words, len(earlier_words))), None) or next(iter(earlier_words), None)
)
suggestions = []
if buttons:
    suggestions.append(
        "- Press the buttons above to jump to the strongest head for each word: which word wins in "
        "each, and how sure is it?"
    )
suggestions.append(
    claims.causal_suggestion(
        pieces[query],
        query,
        (later.text, later.start, later.end - 1) if later else None,
        (earlier.text, earlier.start, earlier.end - 1) if earlier else None,
    )
)
suggestions.append(claims.previous_token_sentence(att.previous_token_heads(maps), maps.n_tokens))
suggestions.append("- Then **Transformer block & logit lens**: what the block does with these weighted averages.")
st.markdown("\n".join(line for line in suggestions if line))
