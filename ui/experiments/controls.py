"""The Experiments page's intervention editor: which heads, attention edges and MLPs to change, and how.

Owns the widgets (bound to ``experiment_state``'s session keys with ``state.bind``, so
the choice carries to the Attention page and into the link) and the buttons' callbacks.
A stored value the widgets cannot show (a head of another model, an edge past the end
of a shorter prompt) is dropped before drawing, with a note, since Streamlit raises on a
multiselect value outside its options.
"""

from __future__ import annotations

import streamlit as st

from ui.common import format as fmt
from ui.common import state
from ui.common.token_text import visible
from ui.experiments import settings as exp


def _keep_valid(key: str, options: list) -> str | None:
    """Drop stored items that are no longer among ``options``; a note naming how many, or None."""
    stored = list(st.session_state.get(key, ()))
    kept = [item for item in stored if item in options]
    if len(kept) == len(stored):
        return None
    st.session_state[key] = tuple(kept)
    return f"{len(stored) - len(kept)} item(s) did not fit this model or prompt and were left out."


def _add_cut(pieces: list[str]) -> None:
    query, key = st.session_state.get(state.EXP_CUT_QUERY), st.session_state.get(state.EXP_CUT_KEY)
    if query is None or key is None or not key < query < len(pieces):
        st.session_state[state.EXP_CUT_ERROR] = True
        return
    st.session_state[exp.EDGES] = tuple(sorted(set(st.session_state.get(exp.EDGES, ())) | {(query, key)}))


def clear_all() -> None:
    """Button callback: no intervention at all."""
    for key in (exp.HEADS, exp.EDGES, exp.MLPS):
        st.session_state[key] = ()


def render_editor(n_layers: int, n_heads: int, pieces: list[str]) -> list[str]:
    """Draw the editor; the notes about stored values that were left out."""
    exp.init()
    head_options = [(layer, head) for layer in range(n_layers) for head in range(n_heads)]
    edge_options = [(q, k) for q in range(len(pieces)) for k in range(q)]
    notes = [
        note
        for note in (
            _keep_valid(exp.HEADS, head_options),
            _keep_valid(exp.EDGES, edge_options),
            _keep_valid(exp.MLPS, list(range(n_layers))),
        )
        if note
    ]
    heads_col, mlps_col = st.columns(2)
    with heads_col:
        st.multiselect(
            "Attention heads to change (layer L, head H)",
            head_options,
            format_func=lambda p: fmt.head(*p),
            placeholder="none",
            help="Each head's output, before the output projection mixes the heads.",
            **state.bind(exp.HEADS),
        )
        mode = st.radio(
            "How",
            list(exp.HEAD_MODES),
            format_func=exp.HEAD_MODES.get,
            horizontal=True,
            **state.bind(exp.HEAD_MODE, options=list(exp.HEAD_MODES)),
        )
        if mode == "scale":
            st.slider(
                "Head scale factor", *exp.FACTOR_RANGE, step=exp.FACTOR_STEP, **state.bind_slider(exp.HEAD_FACTOR)
            )
    with mlps_col:
        st.multiselect(
            "MLPs (feed-forward layers) to change",
            list(range(n_layers)),
            placeholder="none",
            format_func=lambda layer: f"MLP {layer}",
            **state.bind(exp.MLPS),
        )
        st.slider(
            "MLP scale factor (0 = off)", *exp.FACTOR_RANGE, step=exp.FACTOR_STEP, **state.bind_slider(exp.MLP_FACTOR)
        )
    st.markdown(
        "**Cut an attention edge** (in every layer and head): the query token may no longer look at the key "
        "token. It is masked before the softmax, so the query's other weights still sum to 1."
    )
    query_col, key_col, button_col = st.columns([2, 2, 1], vertical_alignment="bottom")
    queries = list(range(1, len(pieces)))
    if queries:
        query = query_col.selectbox(
            "Query token",
            queries,
            format_func=lambda i: f"{i}: {visible(pieces[i])}",
            key=state.EXP_CUT_QUERY,
            index=len(queries) - 1,
        )
        key_col.selectbox(
            "may not look at key token",
            list(range(query)),
            format_func=lambda i: f"{i}: {visible(pieces[i])}",
            key=state.EXP_CUT_KEY,
        )
        button_col.button("Cut this edge", key=state.EXP_CUT_ADD, on_click=_add_cut, args=(pieces,))
    if st.session_state.pop(state.EXP_CUT_ERROR, None):
        st.error("That edge cannot be cut: the key must come before the query (a token never sees later ones).")
    st.multiselect(
        "Edges cut (query → key)",
        list(st.session_state.get(exp.EDGES, ())),
        placeholder="none",
        format_func=lambda e: f"{e[0]} {visible(pieces[e[0]])} → {e[1]} {visible(pieces[e[1]])}",
        **state.bind(exp.EDGES),
    )
    st.button("Clear every intervention", key=state.EXP_CLEAR, on_click=clear_all)
    return notes
