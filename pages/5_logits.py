"""Logits & temperature: the next token's scores, softmax, temperature, and the sampler's filters."""
import streamlit as st

from ui import charts, models, sampling_controls, state
from ui.compute_logits import (
    STAGE_LABELS, current_prompt_logits, entropy_bits, params_key, sampling_stages, softmax_at, temperature_sweep,
    token_texts, tokens_for_mass, top_indices, use_article_prompt,
)
from ui.figures.logits import (
    make_logits_bar, make_probability_overlay, make_stage_figure, make_temperature_sweep, visible_token,
)
from ui.navigation import redirect_legacy_run
from ui.resources import engine_for

redirect_legacy_run()  # see ui/navigation.py: a fresh server's first deep link runs this file without app.py

TOP_N = 12
COMPARE_OPTIONS = [0.3, 0.5, 1.0, 1.5, 2.0]
SWEEP = tuple(round(0.05 * i, 2) for i in range(2, 61))  # T = 0.1 … 3.0

st.title("Logits & temperature")
st.caption("After the last block the model gives one raw score (a **logit**) to every token in its vocabulary. "
           "Softmax turns them into probabilities; the temperature T reshapes them before anything is drawn.")
st.button("Use the article's example: “The cat sat”", key="use_article_prompt_logits",
          on_click=use_article_prompt)

loaded = current_prompt_logits()
if loaded is None:
    st.stop()
prompt, chat, cached = loaded
model = models.current()
settings = sampling_controls.settings_or_stop(engine_for(model).config.vocab_size)
params = settings.params

# 1. Logits: the raw scores, greedy marked
stages = sampling_stages(model, prompt, chat, params_key(params), TOP_N)  # the engine's sampler on the cached logits
top_ids = top_indices(cached.logits, TOP_N)
tokens = token_texts(model, top_ids.tolist())
greedy_at = next((i for i, t in enumerate(top_ids.tolist()) if t == stages.greedy_token_id), -1)
st.subheader("1 · Logits for the next token")
st.markdown(f"The prompt ends with **{visible_token(cached.token_strings[-1])}** "
            f"({len(cached.token_ids)} tokens). The top {TOP_N} of {cached.logits.size:,} logits:")
charts.show(make_logits_bar(tokens, cached.logits[top_ids].tolist(), greedy_at), key="logits_bar")
greedy_text = visible_token(token_texts(model, [stages.greedy_token_id])[0])
if greedy_at == 0:
    st.markdown(f"**Greedy decoding** takes the highest score: **{greedy_text}**.")
else:
    st.markdown(f"**Greedy decoding** would take **{visible_token(tokens[0])}**, but the repetition penalty "
                f"lowers tokens already in the prompt, so it takes **{greedy_text}**.")

# 2. Softmax and temperature: T < 1 sharpens, T > 1 flattens
st.subheader("2 · Softmax and temperature")
compare_t = st.columns(3)[0].select_slider("Compare with temperature", options=COMPARE_OPTIONS,
                                           **state.bind("compare_temperature", 1.0, COMPARE_OPTIONS))
probs_t, probs_c = softmax_at(cached.logits, params.temperature), softmax_at(cached.logits, compare_t)
metrics = st.columns(4)
metrics[0].metric(f"Entropy at T = {params.temperature:g}", f"{entropy_bits(probs_t):.2f} bits",
                  delta=f"{entropy_bits(probs_t) - entropy_bits(probs_c):+.2f} vs T = {compare_t:g}",
                  delta_color="off")
metrics[1].metric(f"Top token's probability at T = {params.temperature:g}", f"{probs_t.max():.3f}",
                  delta=f"{probs_t.max() - probs_c.max():+.3f} vs T = {compare_t:g}", delta_color="off")
metrics[2].metric("Tokens holding 90 % of the mass",
                  f"{tokens_for_mass(probs_t, 0.9):,}")
metrics[3].metric("Vocabulary", f"{cached.logits.size:,}")
left, right = st.columns(2)
with left:
    charts.show(make_probability_overlay(tokens, probs_c[top_ids], probs_t[top_ids], f"T = {compare_t:g}",
                                         f"T = {params.temperature:g} (yours)"), key="probability_overlay")
with right:
    sweep = temperature_sweep(model, prompt, chat, SWEEP)
    charts.show(make_temperature_sweep(sweep.temperatures, sweep.entropy_bits, sweep.top_probability,
                                       params.temperature), key="temperature_sweep")
st.caption("softmax(logits / T) of the model's logits (before any repetition penalty): T < 1 stretches the gaps "
           "between logits (sharper, the top token gains), T > 1 shrinks them (flatter, the tail gains). "
           "T = 1 is the model's own distribution.")

# 3. The sampler's stages, exactly as the engine runs them
st.subheader("3 · What the sampler keeps")
charts.show(make_stage_figure(stages.token_strings, [STAGE_LABELS[n] for n in stages.stage_names],
                              stages.stage_probs, [stages.survivors[n] for n in stages.stage_names]),
            key="stage_figure")
final_left = stages.survivors["final"]
if final_left == 1:
    st.markdown(f"Only **one token survives** every stage: **{visible_token(stages.token_strings[0])}**, "
                "so every draw picks it — the same as greedy.")
else:
    st.markdown(f"**{final_left:,} tokens survive** every stage and share the final, "
                "renormalised probability.")
st.caption("Numbers from the engine's own sampler (`sample(record=True)`), in its order: repetition penalty → "
           "softmax → ÷ T → top-k → top-p → min-p → renormalise. Grey cells were cut at that stage.")

st.header("What to try next")
st.markdown(
    "- Slide T from 0.1 to 2: watch the top token's probability and the entropy move in opposite directions.\n"
    "- Set top-p to 0.5, then min-p to 0.1: which stage cuts more here, and why does it depend on the prompt?\n"
    "- Next: **Sampling** — the surviving tokens laid on [0, 1) and an actual draw."
)
