"""The Attention page's first three sections (one head, step by step, all heads of a layer), as one fragment.

A fragment lives in its session as long as the session does, with its arguments and its function's globals, and a
session stays 120 s after its tab closes (Streamlit keeps it for a reconnect): so it is defined here, not in the
page, whose globals hold the run's attention maps, and it takes the model and the token ids and reads the maps from
the page's cache itself, rather than holding a copy of them (1.3 MB for an 11-token prompt on SmolLM2, more
for a longer one; ``tests/test_session_memory.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from ui.attention import claims
from ui.attention import compute as att
from ui.attention import figures as figs
from ui.common import charts, state
from ui.common.token_text import visible


@st.fragment
def explore_heads(
    model: str,
    ids: list[int],
    pieces: list[str],
    start_query: int,
    leading: tuple[str, str, int, list[int]] | None,
    switch_heads_off: Callable[..., None],
    publish: Callable[[], None],
) -> None:
    """Sections 1-3 for ``model`` on ``ids`` (``pieces``: the tokens drawn; ``start_query``: the query shown first;
    ``leading``: pronoun, word, query and the word's positions of the antecedent most heads send the pronoun to,
    or None; ``switch_heads_off``: the experiments' head switch, ``experiments.head_switch.render``; ``publish``: the
    class's ``broadcast.publish``, both passed in by the page, since a chapter imports neither folder). A fragment:
    moving layer, head or query redraws only these charts, not the page."""
    maps = att.attention_maps(model, ids)  # read from the page's cache on every run of the fragment
    # 1. One head
    st.header("One head: who looks at whom")
    c1, c2, c3 = st.columns(3)
    layer = c1.slider(
        "Layer", 0, maps.n_layers - 1, **state.bind_slider(state.ATT_LAYER, 0, options=range(maps.n_layers))
    )
    head = c2.selectbox(
        "Head",
        list(range(maps.n_heads)),
        format_func=[f"head {h} (K/V head {maps.kv_group(h)})" for h in range(maps.n_heads)].__getitem__,
        **state.bind(state.ATT_HEAD, 0, options=range(maps.n_heads)),
    )
    query = c3.selectbox(
        "Query token (for the step-by-step below)",
        list(range(maps.n_tokens)),
        format_func=lambda i: f"{i}: {visible(pieces[i])}",
        **state.bind(state.ATT_QUERY, start_query, options=range(maps.n_tokens)),
    )
    window = maps.window_of(layer)
    kind = "" if not maps.local_layers else (f" (local: window {window})" if window else " (global)")
    charts.show(
        figs.attention_heatmap(
            maps.probs[layer, head],
            pieces,
            f"Layer {layer}{kind}, head {head}: attention weights (each row sums to 1)"
            + (f", first {maps.n_tokens} of {maps.total_tokens:,} tokens" if maps.total_tokens > maps.n_tokens else ""),
            window,
        ),
        key="attention_heatmap",
        shared=True,
    )
    hidden = (
        f" In this local layer, keys {window} or more positions back are hidden too."
        if window and window < maps.n_tokens
        else ""
    )
    st.caption(
        "Rows are queries, columns are keys. Grey cells are the future: masked, weight exactly 0."
        + hidden
        + " The bars on the right are each row's sum, read from the model's own softmax output."
        + claims.drawn_tokens_note(maps.n_tokens, maps.total_tokens)
    )

    # 2. Step by step for one query
    st.header(f"Step by step: query {query} `{visible(pieces[query])}`")
    steps = att.score_steps(maps, layer, head, query)
    charts.show(
        figs.score_steps(steps.raw, steps.scaled, steps.masked, steps.probs, pieces, query, maps.scale_dim),
        key="score_steps",
        shared=True,
    )
    scalar = (
        "the head size"
        if maps.scale_dim == maps.head_dim
        else f"the model's own score scalar (head size {maps.head_dim})"
    )
    st.caption(
        f"Real numbers from layer {layer}, head {head}: the query vector · each key vector (after RoPE), divided "
        f"by √{maps.scale_dim:g} ({scalar}) so scores do not grow with the head size, masked keys set to −∞, "
        "then softmax."
    )

    # 3. All heads, grouped-query attention
    st.header(f"All {maps.n_heads} heads of layer {layer}")
    groups = [maps.kv_group(h) for h in range(maps.n_heads)]
    charts.show(figs.heads_grid(maps.probs[layer], pieces, groups, layer, window), key="heads_grid", shared=True)
    if maps.total_tokens > maps.n_tokens:
        st.caption(claims.drawn_tokens_note(maps.n_tokens, maps.total_tokens).strip())
    sharing = att.attention_kind(maps.n_heads, maps.n_kv_heads)
    group = maps.n_heads // maps.n_kv_heads
    if maps.n_kv_heads == maps.n_heads:
        st.markdown(
            f"This model uses **{sharing}**: each of its {maps.n_heads} query heads has its own keys and values."
        )
    elif maps.n_kv_heads == 1:
        st.markdown(
            f"This model uses **{sharing}**: all {maps.n_heads} query heads read one and the same key/value "
            f"head, which makes the KV cache {group} times smaller than one K/V head per query head. The "
            "heads still attend differently, because their queries differ."
        )
    else:
        st.markdown(
            f"This model uses **{sharing}**: {maps.n_heads} query heads but only {maps.n_kv_heads} "
            f"key/value heads; each group of {group} query heads reads the same keys and values, which "
            f"makes the KV cache {group} times smaller. Heads in one group still attend differently, "
            "because their queries differ."
        )
    charts.show(figs.gqa_diagram(maps.n_heads, maps.n_kv_heads), key="gqa_diagram", shared=True)

    # Switch heads off (interventions): here in the fragment, so its buttons follow the layer and head shown
    switch_heads_off(maps, pieces, layer, head, leading)
    publish()  # a fragment rerun skips app.py: keep the address bar (the shared link) and a broadcast current
