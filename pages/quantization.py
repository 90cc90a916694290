"""Quantization: the weights as the model file stores them, what 4 bits cost and what they buy."""
import streamlit as st

from ui.shell import charts, models
from ui.session import state
from ui.compute import quant
from ui.figures import quant as figs
from ui.figures.logits import visible_token
from ui.shell.navigation import redirect_legacy_run
from ui.controls.prompt import prompt_tokens

redirect_legacy_run()  # see ui/shell/navigation.py: a fresh server's first deep link runs this file without app.py

COMPARE_KEY = "quant_compare_on"  # session key: the visitor asked for the prompt in every mode
SPEED_KEY = "quant_speed"  # session key: (model, prompt ids, {mode: tok/s}) of the last measurement

st.title("Quantization")
st.markdown(
    "Every weight of the model is a number, and a decode step must read **all of them** from memory to make one "
    "token. A model file can store them in **4 bits** instead of 32: blocks of 32 weights share one scale and one "
    "offset, and each weight keeps only a small integer code. Fewer bytes to read means faster decoding — at the "
    "price of a little precision. Below, a real "
    "block from the file, the bytes per format against this machine's measured memory speed, and your prompt "
    "through the model in every weights mode."
)

model = models.current()
view = prompt_tokens()
if view is None:
    st.stop()

# 1. One real block, as the file stores it
st.header("One block, as the file stores it")
block = quant.stored_block(model)
if block is None:
    st.info("This model was loaded from float weights, not from a GGUF file: there is no stored block to show. "
            "The comparison below quantizes its float weights on load (int8, int4).")
else:
    bits = 8 * block.block_bytes / len(block.decoded)
    charts.show(figs.make_block_figure(block.codes, block.decoded, block.kernel_held,
                                       f"{block.tensor} ({block.type_name}, {block.shape[0]} × {block.shape[1]}): "
                                       f"row {block.row}, weights {32 * block.block}–{32 * block.block + 31}"),
                key="quant_block", data=figs.block_table(block.codes, block.decoded, block.kernel_held))
    formula = (f"w = d·q + m with d = {block.scale:.6g} and m = {block.offset:.6g}" if block.offset is not None
               else f"w = d·q with d = {block.scale:.6g}" if block.codes else "its own layout")
    st.markdown(f"The file keeps these 32 weights in **{block.block_bytes} bytes** — {bits:.2f} bits per weight, "
                f"against 32 for float32 — as {len(block.codes) or 'no'} integer codes "
                + (f"from {min(block.codes)} to {max(block.codes)} " if block.codes else "")
                + f"and {formula}.")
    if block.kernel_held is not None:
        moved = float(abs(block.kernel_held - block.decoded).max())
        span = float(block.decoded.max() - block.decoded.min()) or 1.0
        st.caption(f"torch's 4-bit kernel keeps the codes as they are and the scale and zero in bfloat16: that moves "
                   f"these weights by at most {moved:.2e}, {moved / span:.2%} of the block's range. Everything else "
                   "(the residual stream, norms, attention, the KV cache) stays float32.")

# 2. Bytes: why decode is memory-bound
st.header("Bytes per token, and why decoding waits on memory")
sizes = quant.model_bytes(model)
bandwidth = quant.memory_speed()
formats = ["float32", "bfloat16", "Q8_0", "Q4_1"]
per_token_mb = [sizes.per_token_params * sizes.formats[f] / 1e6 for f in formats]
ceilings = [bandwidth / (mb * 1e6) for mb in per_token_mb]
charts.show(figs.make_bytes_chart(formats, per_token_mb, ceilings, bandwidth / 1e9), key="quant_bytes",
            data=figs.bytes_table(formats, per_token_mb, ceilings, bandwidth / 1e9))
stored = ""
if sizes.file_bytes:
    total = sum(sizes.file_types.values())
    mix = ", ".join(f"{count / total:.1%} {kind}" for kind, count in
                    sorted(sizes.file_types.items(), key=lambda item: -item[1]))
    stored = f" The file itself holds {sizes.file_bytes / 1e6:,.0f} MB of tensors: {mix} of its weights."
reads = ("every one of them — the output matrix that scores every token is the embedding matrix itself — plus the "
         "new token's embedding row" if sizes.tied else "all but the input embedding, of which it needs one row")
st.markdown(
    f"The model has **{sizes.n_params:,}** weights: {sizes.n_params * 4 / 1e6:,.0f} MB in float32, "
    f"{sizes.n_params * sizes.formats['Q4_1'] / 1e6:,.0f} MB in 4-bit blocks.{stored} A decode step reads "
    f"{sizes.per_token_params:,} weights: {reads}. This machine "
    f"reads memory at **{bandwidth / 1e9:.1f} GB/s** right now, so no engine can decode faster than "
    f"{ceilings[0]:,.0f} tok/s in float32 or {ceilings[-1]:,.0f} tok/s in 4-bit blocks: decoding one token at a time "
    "is limited by how fast the weights stream in, not by arithmetic."
)

# 3. The same prompt in every weights mode
st.header("Your prompt in every weights mode")
prompt, chat = state.get(state.PROMPT), state.get(state.CHAT)
modes = quant.available_modes(model)
if not st.session_state.get(COMPARE_KEY):
    # On request: each mode is another copy of the model in memory, loaded and checked once per server
    st.markdown(f"Run your prompt through all {len(modes)} weights modes ({', '.join(quant.MODE_LABELS[m] for m in modes)}): "
                "the server loads each mode once (a few seconds each), then every later prompt is compared at once.")
    st.button("Run my prompt in every weights mode", key="quant_compare", type="primary",
              on_click=st.session_state.__setitem__, args=(COMPARE_KEY, True))
else:
    comparison = quant.compare_modes(model, prompt, chat)
    labels = [quant.MODE_LABELS[m] for m in comparison.modes]
    charts.show(figs.make_mode_probabilities(comparison.token_strings, labels, comparison.next_probs), key="quant_modes",
                data=figs.mode_probabilities_table(comparison.token_strings, labels, comparison.next_probs))
    st.dataframe([{"weights": label, "what runs": description, "top-1 agreement with float32": f"{agree:.1%}",
                   "mean KL from float32 (nats)": f"{kl:.2e}"}
                  for label, description, agree, kl in zip(labels, comparison.descriptions, comparison.top1_agreement,
                                                           comparison.mean_kl)], hide_index=True, key="quant_table")
    best_mode = min(range(1, len(comparison.modes)), key=lambda i: comparison.mean_kl[i])
    flips = [labels[i] for i in range(1, len(labels)) if comparison.next_probs[i].argmax() != 0]
    st.markdown(
        f"Over the prompt's {comparison.positions} positions, the mode closest to float32 is **{labels[best_mode]}** "
        f"(mean KL {comparison.mean_kl[best_mode]:.1e} nats, the most probable next token the same at "
        f"{comparison.top1_agreement[best_mode]:.1%} of positions). "
        + (f"For the next token after your prompt, {', '.join(flips)} would pick another token than float32's "
           f"**{visible_token(comparison.token_strings[0])}**." if flips else
           f"After your prompt, every mode still puts **{visible_token(comparison.token_strings[0])}** first.")
    )


st.subheader("What 4 bits buy")
st.button("Measure decode speed in every mode", key="quant_measure", type="primary",
          on_click=st.session_state.__setitem__, args=("quant_pending", True))
if st.session_state.pop("quant_pending", False):
    bar, speeds = st.progress(0.0, text="measuring…"), {}
    for n, mode in enumerate(modes):
        bar.progress(n / len(modes), text=f"{quant.MODE_LABELS[mode]}: 24 greedy tokens")
        speeds[mode] = quant.decode_speed(model, mode, view.ids)
    bar.empty()
    st.session_state[SPEED_KEY] = (model, view.ids, speeds)
measured = st.session_state.get(SPEED_KEY)
if measured is None or measured[:2] != (model, view.ids):
    st.info("Press the button: 24 greedy tokens in each mode, timed now on this machine (a few seconds).")
else:
    speeds = measured[2]
    speed_labels = [quant.MODE_LABELS[m] for m in speeds]
    charts.show(figs.make_mode_speed(speed_labels, list(speeds.values())), key="quant_speed",
                data=figs.mode_speed_table(speed_labels, list(speeds.values())))
    fastest = max(speeds, key=speeds.get)
    st.markdown(f"Measured just now: **{quant.MODE_LABELS[fastest]}** decodes fastest, {speeds[fastest]:.1f} tok/s, "
                f"{speeds[fastest] / speeds['none']:.1f}× float32's {speeds['none']:.1f} tok/s. Bytes are not the "
                "whole story: each step also pays for the arithmetic of unpacking codes and for everything around the "
                "matmuls, which is why no mode reaches its memory ceiling above.")

st.header("What to try next")
st.markdown(
    "- Type a long prompt: the KL column averages over more positions; where does 4-bit disagree most?\n"
    "- Compare the bytes chart with the measured speeds: which mode gets closest to its ceiling, and why?\n"
    "- Next: **Batching** — reading the weights once for many requests at a time."
)
