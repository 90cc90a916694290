"""Experiments: switch off heads, cut attention edges, scale MLPs, patch activations, and see what the model then says."""

import streamlit as st

from inference.api import PromptError, TokenizerError
from ui.common import charts, models, state
from ui.common import format as fmt
from ui.common.navigation import redirect_legacy_run
from ui.common.resources import client_for
from ui.common.token_text import token_texts, visible_token
from ui.experiments import claims
from ui.experiments import compute as ce
from ui.experiments import controls as experiment_controls
from ui.experiments import figures as figs
from ui.experiments import settings as exp
from ui.tokenization.prompt import prompt_tokens_or_stop

redirect_legacy_run()  # see ui/common/navigation.py: a fresh server's first deep link runs this file without app.py

st.title("Experiments")
st.markdown(
    "The other pages show what the model did. Here you change what it computes and watch the answer: switch off a "
    "head, cut one token off from another, turn down an MLP, or copy the stream of one prompt into another run. "
    "Interpretability researchers call these **interventions**; each runs on this request only, never on the "
    "shared model, and is carried in the link."
)
st.button(
    f"Use the example prompt: “{exp.EXAMPLE_PROMPT}”",
    key=state.EXP_USE_EXAMPLE,
    on_click=state.set_values,
    args=({state.PROMPT: exp.EXAMPLE_PROMPT, state.CHAT: False},),
)

view = prompt_tokens_or_stop()
model = models.current()
config = client_for(model).info.config
ids = tuple(view.ids)
try:
    ce.check_prompt(view.ids)
except ce.ExperimentError as error:
    st.error(f"{fmt.clause(error)}.", icon=":material/block:")
    st.stop()

# 1. The intervention
st.header("1 · Choose the intervention")
for note in experiment_controls.render_editor(config.n_layers, config.n_heads, view.pieces):
    st.info(note)
settings = exp.current()
try:
    ce.prepared_spec(model, ids, settings)
except ce.ExperimentError as error:
    st.error(
        f"This intervention cannot run: {fmt.clause(error)}. Nothing was changed; the results below are the plain run.",
        icon=":material/block:",
    )
    settings = exp.Settings()

# 2. Before and after
st.header("2 · Before and after")
compared = ce.before_after(model, ids, settings)
if settings.empty:
    st.info(
        "No intervention is chosen yet, so “after” equals “before”. Pick heads, edges or MLPs above — or "
        "switch heads off on the **Attention** page."
    )
else:
    st.markdown(f"**Intervention:** {compared.description}.")
m1, m2, m3 = st.columns(3)
m1.metric(
    "Top next token before → after",
    f"{visible_token(compared.top_before_text)} → {visible_token(compared.top_after_text)}",
    "changed" if compared.changed else "same",
    delta_color="off",
)
p_before, p_after = compared.p_before(compared.top_before), compared.p_after(compared.top_before)
m2.metric(f"p({visible_token(compared.top_before_text)})", fmt.prob(p_after), fmt.signed(p_after - p_before, 3))
m3.metric("KL(before ‖ after)", f"{compared.kl_bits:.4f} bits")
charts.show(
    figs.before_after(
        compared.token_strings,
        compared.before,
        compared.after,
        "Next-token probabilities without and with the intervention",
    ),
    key="exp_before_after",
)

lens = ce.lens_pair(model, ids, settings)
charts.show(
    figs.lens_with_region(
        lens.after.layer_labels,
        lens.after.position_tokens,
        lens.after.top_probs,
        lens.after.top_strings,
        lens.region,
        lens.changed,
    ),
    key="exp_lens",
)
st.caption(
    claims.lens_region_caption(
        lens.after.layer_labels, lens.region, lens.keep_from, int(lens.changed.sum()), lens.changed_outside
    )
)
c1, c2 = st.columns(2)
c1.markdown(f"**Greedy continuation before**\n\n> {fmt.quoted_text(ce.continuation(model, ids, exp.Settings()))}")
c2.markdown(
    f"**… and with the intervention on at every step**\n\n> {fmt.quoted_text(ce.continuation(model, ids, settings))}"
)

# 3. Head importance
st.header("3 · Which heads matter for one token?")
target_text = st.text_input(
    "Target token (empty: the model's top guess before any change)", max_chars=64, **state.bind(exp.TARGET)
)
try:
    target = ce.target_token(model, target_text, compared.top_before)
except ce.ExperimentError as error:
    st.error(f"{fmt.clause(error)}.", icon=":material/block:")
    target = None
chosen = exp.current()  # the sweep changes heads the way the editor's "How" says, whatever else is chosen
mode, factor = chosen.head_mode, chosen.head_factor
action = claims.action_phrase(mode, factor)
st.markdown(claims.sweep_intro(config.n_layers, config.n_heads, action))
st.button(
    "Run the head sweep",
    key=state.EXP_SWEEP_RUN,
    on_click=state.set_values,
    args=({exp.SWEEP: True},),
    disabled=target is None,
)
if state.get(exp.SWEEP) and target is not None:
    bar = st.progress(0.0, text="Sweeping the heads…")
    sweep = ce.head_importance(
        model,
        ids,
        target,
        mode,
        factor,
        lambda done, total: bar.progress(done / total, text=f"Layer {done} of {total}"),
    )
    bar.empty()
    target_shown = token_texts(client_for(model).tokenizer, [target])[0]
    charts.show(figs.head_importance(sweep.delta, target_shown, action), key="exp_head_importance")
    st.markdown(claims.sweep_sentence(sweep.delta, sweep.baseline, target_shown))

# 4. Activation patching
st.header("4 · Activation patching: where does the model keep “cat”?")
st.markdown(
    "Run the **corrupted** prompt, but copy the residual stream after one block, at one position, from the "
    "**clean** prompt's run. If that one vector brings the clean answer back, it carried the information. "
    "The score: (d_patched − d_corrupted) / (d_clean − d_corrupted), with d = logit(clean answer) − "
    "logit(corrupted answer): 0 = no help, 1 = the clean answer fully restored."
)
left, right = st.columns(2)
clean = left.text_input("Clean prompt", max_chars=400, **state.bind(exp.CLEAN))
corrupt = right.text_input("Corrupted prompt (same number of tokens)", max_chars=400, **state.bind(exp.CORRUPT))
try:
    setup = ce.patch_setup(model, clean, corrupt)
except (ce.ExperimentError, PromptError, TokenizerError) as error:
    st.error(f"Cannot patch these prompts: {fmt.clause(error)}.", icon=":material/block:")
    setup = None
if setup is not None:
    st.markdown(
        claims.patch_setup_sentence(
            setup.clean_answer_text,
            setup.corrupt_answer_text,
            setup.clean_gap,
            setup.corrupt_gap,
            setup.first_difference,
            setup.clean_pieces[setup.first_difference],
            setup.corrupt_pieces[setup.first_difference],
            config.n_layers,
        )
    )
    st.button(
        "Run activation patching", key=state.EXP_PATCH_RUN, on_click=state.set_values, args=({exp.PATCHING: True},)
    )
    if state.get(exp.PATCHING):
        bar = st.progress(0.0, text="Patching…")
        restored = ce.patching(
            model, setup, lambda done, total: bar.progress(done / total, text=f"Position {done} of {total}")
        )
        bar.empty()
        charts.show(
            figs.patching(restored, setup.clean_pieces, (setup.clean_answer_text, setup.corrupt_answer_text)),
            key="exp_patching_map",
        )
        st.markdown(claims.patching_sentence(restored, setup.first_difference))

# 5. Direct logit attribution
st.header("5 · Direct logit attribution")
if target is not None:
    split = ce.attribution(model, ids, target, settings)
    charts.show(figs.attribution(split.labels, split.values, split.token_text), key="exp_attribution")
    st.markdown(
        claims.attribution_sentence(
            split.token_text,
            split.logit,
            len(split.labels),
            split.total,
            split.residual,
            split.bound,
            not settings.empty,
        )
    )

st.header("What to try next")
st.markdown(
    "- When your prompt has a pronoun after a noun, the **Attention** page has a button that switches off the heads "
    "sending the pronoun to the word most of them pick: press it, then come back: does the answer move?\n"
    "- Sweep the heads with the example prompt, switch off the three that matter most, and compare the continuation.\n"
    "- Run activation patching on the example pair: in which blocks does the noun's own position carry “cat”, and "
    "from which block on does the last position?"
)
