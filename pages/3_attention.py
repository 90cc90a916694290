"""Attention: every token looks back at the tokens before it, one weighted average per head."""
import streamlit as st

from ui import charts
from ui import compute_attention as att
from ui import classroom, models, state
from ui.claims import reading as claims
from ui.figures import attention as figs
from ui.figures.tokens import visible
from ui.head_switch import render as switch_heads_off
from ui.navigation import redirect_legacy_run
from ui.prompt import prompt_tokens

redirect_legacy_run()  # see ui/navigation.py: a fresh server's first deep link runs this file without app.py

st.title("Attention")
st.markdown(
    "Embeddings give each token a vector on its own. **Attention** is how tokens read each other: every "
    "position makes a **query** (what am I looking for?), every position offers a **key** (what do I contain?) "
    "and a **value** (what I pass on). A query's dot product with each key is a score; scaled and passed "
    "through softmax, the scores become weights that sum to 1, and the token takes that weighted average of "
    "the values. A token may only look **back**: the causal mask hides the future. Each layer has several heads "
    "doing this in parallel, each with its own idea of what to look for."
)

view = prompt_tokens()
if view is None:
    st.stop()

maps = att.attention_maps(models.current(), view.ids)
pieces = view.pieces[: maps.n_tokens]
if maps.total_tokens > maps.n_tokens:
    st.warning(f"The prompt has {maps.total_tokens:,} tokens; attention is computed and drawn for the first "
               f"{maps.n_tokens}. Those rows are exact: a causal model never lets later tokens change them.")


@st.fragment
def explore_heads(maps: att.AttentionMaps, pieces: list[str]) -> None:
    """Sections 1-3. A fragment: moving layer, head or query redraws only these charts, not the page."""
    # 1. One head
    st.header("One head: who looks at whom")
    c1, c2, c3 = st.columns(3)
    layer = c1.slider("Layer", 0, maps.n_layers - 1, **state.bind("att_layer", 0, options=range(maps.n_layers)))
    head = c2.selectbox("Head", list(range(maps.n_heads)), format_func=lambda h: f"head {h} (K/V head {maps.kv_group(h)})",
                        **state.bind("att_head", 0, options=range(maps.n_heads)))
    query = c3.selectbox("Query token (for the step-by-step below)", list(range(maps.n_tokens)),
                         format_func=lambda i: f"{i}: {visible(pieces[i])}",
                         **state.bind("att_query", att.default_query(pieces), options=range(maps.n_tokens)))
    charts.show(figs.make_attention_heatmap(maps.probs[layer, head], pieces,
                                            f"Layer {layer}, head {head}: attention weights (each row sums to 1)"),
                key="attention_heatmap", data=lambda: figs.attention_table(maps.probs[layer, head], pieces))
    st.caption("Rows are queries, columns are keys. Grey cells are the future: masked, weight exactly 0. The bars on "
               "the right are each row's sum, read from the model's own softmax output.")

    # 2. Step by step for one query
    st.header(f"Step by step: query {query} `{visible(pieces[query])}`")
    steps = att.score_steps(maps, layer, head, query)
    charts.show(figs.make_score_steps(steps.raw, steps.scaled, steps.masked, steps.probs, pieces, query,
                                      maps.head_dim), key="score_steps",
                data=figs.score_steps_table(steps.raw, steps.scaled, steps.masked, steps.probs, pieces))
    st.caption(f"Real numbers from layer {layer}, head {head}: the query vector · each key vector (after RoPE), divided "
               f"by √{maps.head_dim} so scores do not grow with the head size, future keys set to −∞, then softmax.")

    # 3. All heads, grouped-query attention
    st.header(f"All {maps.n_heads} heads of layer {layer}")
    groups = [maps.kv_group(h) for h in range(maps.n_heads)]
    charts.show(figs.make_heads_grid(maps.probs[layer], pieces, groups, layer), key="heads_grid",
                data=lambda: figs.heads_table(maps.probs[layer], pieces, groups))
    st.markdown(f"This model uses **grouped-query attention**: {maps.n_heads} query heads but only {maps.n_kv_heads} "
                f"key/value heads; each group of {maps.n_heads // maps.n_kv_heads} query heads reads the same keys and "
                "values, which makes the KV cache that many times smaller. Heads in one group still attend differently, "
                "because their queries differ.")
    charts.show(figs.make_gqa_diagram(maps.n_heads, maps.n_kv_heads), key="gqa_diagram",
                data=figs.gqa_table(maps.n_heads, maps.n_kv_heads))

    # Switch heads off (interventions): here in the fragment, so its buttons follow the layer and head shown
    switch_heads_off(maps, pieces, layer, head)
    classroom.publish()  # a fragment rerun skips app.py: keep the address bar (the shared link) and a broadcast current


explore_heads(maps, pieces)

# 4. The guided example
st.header("Where does “it” look?")
it_pos, cat_pos, mat_pos = (att.find_token(pieces, w) for w in ("it", "cat", "mat"))
buttons = []
if it_pos is None:
    st.info("This part follows the example “The cat sat on the mat because it was tired.”: this prompt has no "
            "word “it”. Put one in, after a noun (a “cat” or a “mat”), to see which noun its heads pick.")
else:
    over_layers = att.query_over_layers(maps, it_pos)
    charts.show(figs.make_query_over_layers(over_layers, pieces, it_pos), key="it_over_layers",
                data=figs.query_layers_table(over_layers, pieces))
    st.markdown(claims.sink_sentence(over_layers, pieces, it_pos))
    for name, pos in (("cat", cat_pos), ("mat", mat_pos)):
        if pos is not None and pos < it_pos:
            best = att.top_heads(maps, it_pos, pos)
            st.markdown(claims.top_heads_sentence(pieces[it_pos], pieces[pos], best))
            lay, hd, _ = best[0]
            buttons.append(name)
            st.button(f"Show layer {lay}, head {hd} with query “it” above", key=f"att_show_{name}",
                      on_click=state.set_values, args=({"att_layer": lay, "att_head": hd, "att_query": it_pos},))

st.header("What to try next")
query = it_pos if it_pos is not None else maps.n_tokens - 1
words = att.word_positions(pieces)
later = next((i for i in reversed(words) if i > query), None)
earlier = next((p for p in (cat_pos, mat_pos) if p is not None and p < query), None)
earlier = earlier if earlier is not None else next((i for i in words if i < query), None)
suggestions = []
if buttons:
    suggestions.append("- Press the buttons above to jump to the heads that resolve “it”: which noun wins, and how "
                       "sure is it?")
suggestions.append(claims.causal_suggestion(pieces, query, later, earlier))
suggestions.append(claims.previous_token_sentence(att.previous_token_heads(maps), maps.n_tokens))
suggestions.append("- Then **Transformer block & logit lens**: what the block does with these weighted averages.")
st.markdown("\n".join(line for line in suggestions if line))
