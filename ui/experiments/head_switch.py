"""The Attention page's "Switch off this head" section: silence heads and see what the next token becomes.

Owns the section drawn at the end of the page's head explorer (inside its fragment, so the
buttons follow the layer and head shown): a button for the head on screen, one click for
every head that sends the prompt's pronoun to the word most of its heads pick (found in the
attention maps, ``ui.attention.reference``: each head whose weight from the pronoun to that word
is at least ``SENDING_THRESHOLD``), and the effect on the next token. The
switched-off heads are ``experiment_state.HEADS``, the same list the Experiments page edits
and the link carries (``off=``).
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from ui.attention import compute as att
from ui.common import charts, models, navigation, state
from ui.common import format as fmt
from ui.common.token_text import visible_token
from ui.experiments import compute as ce
from ui.experiments import settings as exp
from ui.experiments.figures import before_after
from ui.tokenization.compute import tokenize

SENDING_THRESHOLD = 0.3  # a head "sends it to cat" when at least this share of its attention from "it" is on "cat"


def render(
    maps: att.AttentionMaps,
    pieces: list[str],
    layer: int,
    head: int,
    target: tuple[str, str, int, list[int]] | None = None,
) -> None:
    """``target``: (pronoun, word, the pronoun's position, the word's positions) of the word most of the pronoun's
    heads send it to (``ui.attention.reference``), or None when the prompt has none."""
    st.header("Switch heads off")
    st.markdown(
        "Attention weights show where a head looks, not whether the answer needs it. Switch heads off "
        "(their output set to zero before the output projection) and see what the next token becomes."
    )
    exp.init()
    off = set(map(tuple, st.session_state.get(exp.HEADS, ())))
    this, sending_col, reset_col = st.columns(3)
    if (layer, head) in off:
        this.button(
            f"Switch layer {layer}, head {head} back on",
            key=state.ATT_HEAD_ON,
            on_click=exp.remove_head,
            args=(layer, head),
        )
    else:
        this.button(
            f"Switch off this head (layer {layer}, head {head})",
            key=state.ATT_HEAD_OFF,
            on_click=exp.add_head,
            args=(layer, head),
        )
    sending = []
    if target is not None:
        pronoun, word, query, positions = target
        weights = maps.probs[:, :, query, positions].sum(-1)  # (L, H): the word's tokens together
        sending = sorted(
            ((int(l), int(h), float(weights[l, h])) for l, h in np.argwhere(weights >= SENDING_THRESHOLD)),
            key=lambda t: -t[2],
        )
    if sending:
        sending_col.button(
            f"Switch off the {len(sending)} heads that send “{pronoun.strip()}” to “{word}”",
            key=state.ATT_HEADS_IT_CAT,
            on_click=exp.add_heads,
            args=([(l, h) for l, h, _ in sending],),
        )
    reset_col.button(
        "Switch every head back on", key=state.ATT_HEADS_RESET, disabled=not off, on_click=exp.set_heads, args=([],)
    )
    if sending:
        listed = ", ".join(f"{fmt.head(l, h)} ({fmt.pct(w)})" for l, h, w in sending)
        st.caption(
            f"Heads putting at least {fmt.pct(SENDING_THRESHOLD)} of “{pronoun.strip()}”'s attention on "
            f"“{word}” (layer, head: weight): {listed}."
        )
    elif target is not None:
        st.caption(
            f"No head puts {fmt.pct(SENDING_THRESHOLD)} or more of “{target[0].strip()}”'s attention on "
            f"“{target[1]}” in this prompt."
        )
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
        st.error(f"Cannot switch these heads off: {fmt.clause(error)}.", icon=":material/block:")
        return
    heads = ", ".join(fmt.head(l, h) for l, h in settings.heads)
    p_before, p_after = compared.p_before(compared.top_before), compared.p_after(compared.top_before)
    top = fmt.markdown_safe(visible_token(compared.top_before_text))
    if compared.changed:
        verdict = (
            f"the most likely next token changes from **{top}** to {fmt.bold_token(compared.top_after_text)}"
            f" (p({top}) {fmt.prob(p_before)} → {fmt.prob(p_after)})"
        )
    else:
        verdict = (
            f"the most likely next token stays **{top}**, p {fmt.prob(p_before)} → {fmt.prob(p_after)} "
            f"(Δp {fmt.signed(p_after - p_before, 3)})"
        )
    st.markdown(
        f"With {len(settings.heads)} head(s) off ({heads}), {verdict}; KL(before ‖ after) = "
        f"{compared.kl_bits:.4f} bits."
    )
    charts.show(
        before_after(
            compared.token_strings,
            compared.before,
            compared.after,
            "Next token with and without the switched-off heads",
        ),
        key="att_switch_effect",
    )
    st.page_link(
        navigation.script_of("experiments"), label="More experiments with these heads", icon=":material/science:"
    )
