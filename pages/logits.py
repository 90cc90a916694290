"""Logits & temperature: the next token's scores, softmax, temperature, and the sampler's filters."""

import functools

import streamlit as st

from ui.common import charts, example_prompt, state
from ui.common import format as fmt
from ui.common.navigation import redirect_legacy_run
from ui.logits import claims, playground
from ui.logits import figures as figs
from ui.logits.compute import (
    STAGE_LABELS,
    entropy_bits,
    kept_by,
    sampling_stages,
    softmax_at,
    temperature_sweep,
    token_texts,
    tokens_for_mass,
    top_indices,
)
from ui.logits.frames import steps, temperature_frames
from ui.sampling import controls as sampling_controls
from ui.sampling.prompt import prompt_logits_and_settings

redirect_legacy_run()  # see ui/common/navigation.py: a fresh server's first deep link runs this file without app.py

TOP_N = 12
COMPARE_OPTIONS = [0.3, 0.5, 1.0, 1.5, 2.0]
SWEEP = tuple(round(0.05 * i, 2) for i in range(2, 61))  # T = 0.1 … 3.0

st.title("Logits & temperature")
st.caption(
    "After the last block the model gives one raw score (a **logit**) to every token in its vocabulary. "
    "Softmax turns them into probabilities; the temperature T reshapes them before anything is drawn."
)
example_prompt.render("logits")

prompt, chat, cached, model, settings = prompt_logits_and_settings()
params = settings.params

# 1. Logits: the raw scores, greedy marked
stages = sampling_stages(model, prompt, chat, params.canonical(), TOP_N)  # the engine's sampler on the cached logits
top_ids = top_indices(cached.logits, TOP_N)
tokens = token_texts(model, top_ids.tolist())
greedy_at = next((i for i, t in enumerate(top_ids.tolist()) if t == stages.greedy_token_id), -1)
st.subheader("1 · Logits for the next token")
st.markdown(
    f"The prompt ends with {fmt.bold_token(cached.token_strings[-1])} "
    f"({fmt.count(len(cached.token_ids), 'token')}). The top {TOP_N} of "
    f"{cached.logits.size:,} logits:"
)
top_logits = cached.logits[top_ids].tolist()
charts.show(figs.logits_bar(tokens, top_logits, greedy_at, token_ids=top_ids.tolist()), key="logits_bar", shared=True)
st.caption(
    "Bars start at 0. A logit is a raw score on no fixed scale: only the differences between logits "
    "matter (adding one number to all of them changes no probability), and they can be negative."
)
st.markdown(claims.greedy_sentence(tokens[0], token_texts(model, [stages.greedy_token_id])[0], greedy_at == 0))

# 2. Softmax and temperature: T < 1 sharpens, T > 1 flattens
st.subheader("2 · Softmax and temperature")
st.markdown(
    "**Drag T** below: the bars are redrawn in your browser, while you drag, from frames the server computed "
    "from this prompt's real logits at every step of the temperature slider. Release to make it the app's "
    "temperature: the controls above, the charts below and the link follow."
)
low, high = sampling_controls.RANGES[sampling_controls.TEMPERATURE]
frames = temperature_frames(
    model, prompt, chat, tuple(steps(low, high, sampling_controls.STEPS[sampling_controls.TEMPERATURE])), TOP_N
)
playground.render(frames, params.temperature, functools.partial(state.put, sampling_controls.TEMPERATURE))
compare_t = st.columns(3)[0].select_slider(
    "Compare with temperature", options=COMPARE_OPTIONS, **state.bind(state.COMPARE_TEMPERATURE, 1.0, COMPARE_OPTIONS)
)
probs_t, probs_c = softmax_at(cached.logits, params.temperature), softmax_at(cached.logits, compare_t)
metrics = st.columns(4)
metrics[0].metric(
    f"Entropy at T = {params.temperature:g}",
    fmt.bits(entropy_bits(probs_t)),
    delta=f"{fmt.signed(entropy_bits(probs_t) - entropy_bits(probs_c))} vs T = {compare_t:g}",
    delta_color="off",
)
metrics[1].metric(
    f"Top probability at T = {params.temperature:g}",
    fmt.prob(probs_t.max()),
    delta=f"{fmt.signed(probs_t.max() - probs_c.max(), 3)} vs T = {compare_t:g}",
    delta_color="off",
)
metrics[2].metric(
    f"Tokens for 90 % at T = {params.temperature:g}",
    f"{tokens_for_mass(probs_t, 0.9):,}",
    help="How many of the most probable tokens it takes to hold 90 % of the probability.",
)
metrics[3].metric("Vocabulary", f"{cached.logits.size:,}")
left, right = st.columns(2)
with left:
    labels = (f"T = {compare_t:g}", f"T = {params.temperature:g} (yours)")
    charts.show(
        figs.probability_overlay(tokens, probs_c[top_ids], probs_t[top_ids], *labels),
        key="probability_overlay",
        shared=True,
    )
with right:
    sweep = temperature_sweep(model, prompt, chat, SWEEP)
    charts.show(
        figs.temperature_sweep(sweep.temperatures, sweep.entropy_bits, sweep.top_probability, params.temperature),
        key="temperature_sweep",
        shared=True,
    )
st.caption(
    "softmax(logits / T) of the model's logits (before any repetition penalty): T < 1 stretches the gaps "
    "between logits (sharper, the top token gains), T > 1 shrinks them (flatter, the tail gains). "
    "T = 1 is the model's own distribution."
)

# 3. The sampler's stages, exactly as the engine runs them
st.subheader("3 · What the sampler keeps")
stage_labels = [STAGE_LABELS[n] for n in stages.stage_names]
survivors = [stages.survivors[n] for n in stages.stage_names]
vocab = cached.logits.size
counts = claims.stage_counts(stages.stage_names, stages.survivors, vocab)
charts.show(
    figs.stage_chart(
        stages.token_strings,
        stage_labels,
        stages.stage_probs,
        counts,
        token_ids=stages.token_ids,
        survivor_counts=survivors,
    ),
    key="stage_figure",
    shared=True,
)
final_row = stages.stage_probs[-1]
only = stages.token_strings[int(final_row.argmax())] if stages.survivors["final"] == 1 and final_row.max() > 0 else None
after_t = stages.survivors.get("temperature", stages.survivors["final"])
st.markdown(
    claims.survivors_sentence(
        stages.survivors["final"],
        only,
        removed=after_t - stages.survivors["final"],
        rounded_to_zero=vocab - after_t if "temperature" in stages.survivors else 0,
    )
)
st.caption(claims.STAGE_ORDER_CAPTION)

st.header("What to try next")
kept_top_p, kept_min_p = kept_by(model, prompt, chat, params.canonical(), 0.5, 0.1)
st.markdown(
    "- Slide T from 0.1 to 2: the top token's probability falls and the entropy rises as T grows (the sweep above "
    "draws both for this prompt).\n"
    + (
        claims.filter_suggestion(params.temperature, float(probs_t.max()), kept_top_p, kept_min_p) + "\n"
        if not params.greedy
        else ""
    )
    + "- Next: **Sampling** — the surviving tokens laid on [0, 1) and an actual draw."
)
