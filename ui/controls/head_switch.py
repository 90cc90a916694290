"""The Attention page's "Switch off this head" section: silence heads and see what the next token becomes.

Owns the section drawn at the end of the page's head explorer (inside its fragment, so the
buttons follow the layer and head shown): a button for the head on screen, one click for
every head that sends "it" to "cat" (found in the attention maps: each head whose weight from
"it" to "cat" is at least ``SENDING_THRESHOLD``), and the effect on the next token. The
switched-off heads are ``experiment_state.HEADS``, the same list the Experiments page edits
and the link carries (``off=``).
"""
from __future__ import annotations

import streamlit as st

from ui.shell import charts, models
from ui.session import state
from ui.compute import attention as att
from ui.compute import experiments as ce
from ui.session import experiment as exp
from ui.compute.tokens import tokenize
from ui.figures.experiments import before_after_table, make_before_after
from ui.figures.logits import visible_token

SENDING_THRESHOLD = 0.3  # a head "sends it to cat" when at least this share of its attention from "it" is on "cat"


def render(maps: att.AttentionMaps, pieces: list[str], layer: int, head: int) -> None:
    st.header("Switch heads off")
    st.markdown("Attention weights show where a head looks, not whether the answer needs it. Switch heads off "
                "(their output set to zero before the output projection) and see what the next token becomes.")
    exp.init()
    off = set(map(tuple, st.session_state.get(exp.HEADS, ())))
    this, sending_col, reset_col = st.columns(3)
    if (layer, head) in off:
        this.button(f"Switch layer {layer}, head {head} back on", key="att_head_on",
                    on_click=exp.remove_head, args=(layer, head))
    else:
        this.button(f"Switch off this head (layer {layer}, head {head})", key="att_head_off",
                    on_click=exp.add_head, args=(layer, head))
    it_pos, cat_pos = att.find_token(pieces, "it"), att.find_token(pieces, "cat")
    sending = []
    if it_pos is not None and cat_pos is not None and cat_pos < it_pos:
        sending = ce.heads_sending(maps.probs, it_pos, cat_pos, SENDING_THRESHOLD)
    if sending:
        sending_col.button(f"Switch off the {len(sending)} heads that send “it” to “cat”", key="att_heads_it_cat",
                           on_click=exp.set_heads, args=([*off, *((l, h) for l, h, _ in sending)],))
    reset_col.button("Switch every head back on", key="att_heads_reset", disabled=not off,
                     on_click=exp.set_heads, args=([],))
    if sending:
        listed = ", ".join(f"{l}.{h} ({w:.0%})" for l, h, w in sending)
        st.caption(f"Heads putting at least {SENDING_THRESHOLD:.0%} of “it”'s attention on “cat” (layer.head, "
                   f"weight): {listed}.")
    elif it_pos is not None and cat_pos is not None and cat_pos < it_pos:
        st.caption(f"No head puts {SENDING_THRESHOLD:.0%} or more of “it”'s attention on “cat” in this prompt.")
    _effect()


def _effect() -> None:
    """The next token with the switched-off heads against the plain run."""
    settings = exp.current().heads_only()
    if settings.empty:
        st.caption("No head is switched off.")
        return
    model = models.current()
    ids = tuple(tokenize(model, state.get(state.PROMPT), state.get(state.CHAT)).ids)
    try:
        compared = ce.before_after(model, ids, settings)
    except ce.ExperimentError as error:
        st.error(f"Cannot switch these heads off: {error}.", icon=":material/block:")
        return
    heads = ", ".join(f"{l}.{h}" for l, h in settings.heads)
    p_before, p_after = compared.p_before(compared.top_before), compared.p_after(compared.top_before)
    top = visible_token(compared.top_before_text)
    if compared.changed:
        verdict = (f"the most likely next token changes from **{top}** to **{visible_token(compared.top_after_text)}**"
                   f" (p({top}) {p_before:.3f} → {p_after:.3f})")
    else:
        verdict = f"the most likely next token stays **{top}**, p {p_before:.3f} → {p_after:.3f} (Δp {p_after - p_before:+.3f})"
    st.markdown(f"With {len(settings.heads)} head(s) off ({heads}), {verdict}; KL(before ‖ after) = "
                f"{compared.kl_bits:.4f} bits.")
    charts.show(make_before_after(compared.token_strings, compared.before, compared.after,
                                  "Next token with and without the switched-off heads"), key="att_switch_effect",
                data=before_after_table(compared.token_strings, compared.before, compared.after))
    st.page_link("pages/experiments.py", label="More experiments with these heads", icon=":material/science:")
