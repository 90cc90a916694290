"""Quantization: the weights as the model file stores them, what 4 bits cost and what they buy."""

import streamlit as st

from ui.common import charts, models, state
from ui.common import format as fmt
from ui.common.navigation import redirect_legacy_run
from ui.quantization import blocks, claims
from ui.quantization import compute as quant
from ui.quantization import figures as figs
from ui.tokenization.prompt import prompt_tokens_or_stop

redirect_legacy_run()  # see ui/common/navigation.py: a fresh server's first deep link runs this file without app.py

FIRST_TENSOR = "blk.0.attn_q.weight"  # the block shown first: its type, when the file has it

st.title("Quantization")
model = models.current()
st.markdown(
    "Every weight of the model is a number, and a decode step must read **all of them** from memory to make one "
    "token. A model file can store them in a few bits instead of 32: blocks of weights share a scale (and sometimes "
    "an offset), and each weight keeps only a small integer code. Fewer bytes to read means faster decoding — at "
    "the price of a little precision. " + claims.intro_sentence(blocks.weights_by_type(model)) + " Below, a real "
    "block from the file, the bytes per format against this machine's measured memory speed, and your prompt "
    "through the model in every weights mode."
)

view = prompt_tokens_or_stop()

# 1. One real block, as the file stores it
st.header("One block, as the file stores it")
types = blocks.block_types(model)
if not types:
    st.info(
        "This model was loaded from float weights, not from a GGUF file: there is no stored block to show. "
        "The comparison below quantizes its float weights on load (int8, int4)."
    )
else:
    first = next((t for t, names in types.items() if FIRST_TENSOR in names), next(iter(types)))
    left, right = st.columns([1, 2])
    type_name = left.selectbox(
        "Block type",
        list(types),
        format_func={t: f"{t} ({len(names)} tensors)" for t, names in types.items()}.__getitem__,
        **state.bind(state.QUANT_BLOCK_TYPE, first, options=list(types)),
    )
    names = types[type_name]
    tensor = right.selectbox(
        "Tensor",
        names,
        **state.bind(state.QUANT_BLOCK_TENSOR, FIRST_TENSOR if FIRST_TENSOR in names else names[0], options=names),
    )
    stored = blocks.stored_layout(model, tensor)
    layout = stored.layout
    held = blocks.kernel_held(layout)
    st.markdown(claims.type_phrase(type_name) + ".")
    charts.show(
        figs.block_layout(
            layout.codes.tolist(),
            layout.decoded,
            layout.group_size,
            layout.code_range,
            held,
            f"{tensor} ({type_name}, {stored.shape[0]} × {stored.shape[1]}): "
            f"row {stored.row}, weights 0–{layout.n_weights - 1}",
            layout.zero_code,
            scales=layout.scales,
            offsets=layout.offsets,
            reference=stored.reference,
        ),
        key="quant_block",
    )
    st.markdown(
        claims.block_sentence(
            type_name,
            layout.n_weights,
            layout.n_bytes,
            layout.codes.tolist(),
            layout.code_bits,
            layout.fields,
            layout.sub_codes,
            layout.rule,
        )
        + " "
        + claims.check_sentence(layout.decoded, stored.reference)
    )
    st.caption(f"How its {layout.n_bytes} bytes are spent: {layout.layout}.")
    if layout.groups > 1:
        st.dataframe(
            [
                {
                    "group": g,
                    "weights": f"{g * layout.group_size}–{(g + 1) * layout.group_size - 1}",
                    **{f"stored {name}": int(values[g]) for name, values in layout.sub_codes.items()},
                    "scale (multiplies q)": f"{layout.scales[g]:.6g}",
                    "offset (added)": f"{layout.offsets[g]:.6g}",
                }
                for g in range(layout.groups)
            ],
            hide_index=True,
            key="quant_groups",
        )
    if held is not None:
        moved = float(abs(held - layout.decoded).max())
        span = float(layout.decoded.max() - layout.decoded.min()) or 1.0
        st.caption(
            f"torch's 4-bit kernel keeps the codes as they are and each group's scale and zero in bfloat16: "
            f"that moves these weights by at most {moved:.2e}, {fmt.pct(moved / span, 2)} of the block's range. "
            "Everything else (the residual stream, norms, attention, the KV cache) stays float32."
        )

# 2. Bytes: why decode is memory-bound
st.header("Bytes per token, and why decoding waits on memory")
sizes = quant.model_bytes(model)
bandwidth = quant.memory_speed()
formats = ["float32", "bfloat16", "Q8_0", "Q4_1"]
per_token_mb = [sizes.per_token_params * sizes.formats[f] / 1e6 for f in formats]
ceilings = [bandwidth / (mb * 1e6) for mb in per_token_mb]
charts.show(figs.bytes_chart(formats, per_token_mb, ceilings, bandwidth / 1e9), key="quant_bytes")
stored = ""
if sizes.file_bytes:
    ordered = sorted(sizes.file_types.items(), key=lambda item: -item[1])
    mix = ", ".join(f"{share} {kind}" for share, (kind, _) in zip(fmt.whole_pct([n for _, n in ordered]), ordered))
    stored = f" The file itself holds {sizes.file_bytes / 1e6:,.0f} MB of tensors: {mix} of its weights."
reads = (
    "every one of them — the output matrix that scores every token is the embedding matrix itself — plus the "
    "new token's embedding row"
    if sizes.tied
    else "all but the input embedding, of which it needs one row"
)
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
if not st.session_state.get(state.QUANT_COMPARE_ON):
    # On request: each mode is another copy of the model in memory, loaded and checked once per server
    st.markdown(
        f"Run your prompt through all {len(modes)} weights modes ({', '.join(quant.MODE_LABELS[m] for m in modes)}): "
        "the server loads each mode once (a few seconds each), then every later prompt is compared at once."
    )
    st.button(
        "Run my prompt in every weights mode",
        key=state.QUANT_COMPARE,
        type="primary",
        **state.sets(state.QUANT_COMPARE_ON, True),
    )
else:
    comparison = quant.compare_modes(model, prompt, chat)
    labels = [quant.MODE_LABELS[m] for m in comparison.modes]
    charts.show(figs.mode_probabilities(comparison.token_strings, labels, comparison.next_probs), key="quant_modes")
    st.table(
        [
            {
                "weights": label,
                "what runs": description,
                "top-1 agreement with float32": fmt.pct(agree, 1),
                "mean KL from float32 (nats)": f"{kl:.2e}",
            }  # a table wraps its long descriptions (no cut columns)
            for label, description, agree, kl in zip(
                labels, comparison.descriptions, comparison.top1_agreement, comparison.mean_kl
            )
        ],
        hide_index=True,
    )
    best_mode = min(range(1, len(comparison.modes)), key=lambda i: comparison.mean_kl[i])
    flips = [labels[i] for i in range(1, len(labels)) if comparison.next_probs[i].argmax() != 0]
    st.markdown(
        f"Over the prompt's {comparison.positions} positions, the mode closest to float32 is **{labels[best_mode]}** "
        f"(mean KL {comparison.mean_kl[best_mode]:.1e} nats, the most probable next token the same at "
        f"{fmt.pct(comparison.top1_agreement[best_mode], 1)} of positions). "
        + (
            f"For the next token after your prompt, {', '.join(flips)} would pick another token than float32's "
            f"{fmt.bold_token(comparison.token_strings[0])}."
            if flips
            else f"After your prompt, every mode still puts {fmt.bold_token(comparison.token_strings[0])} first."
        )
    )


st.subheader("What 4 bits buy")
st.button(
    "Measure decode speed in every mode",
    key=state.QUANT_MEASURE,
    type="primary",
    **state.sets(state.QUANT_PENDING, True),
)
if st.session_state.pop(state.QUANT_PENDING, False):
    bar, speeds = st.progress(0.0, text="measuring…"), {}
    for n, mode in enumerate(modes):
        bar.progress(n / len(modes), text=f"{quant.MODE_LABELS[mode]}: 24 greedy tokens")
        speeds[mode] = quant.decode_speed(model, mode, view.ids)
    bar.empty()
    st.session_state[state.QUANT_SPEED] = (model, view.ids, speeds)
measured = st.session_state.get(state.QUANT_SPEED)
if measured is None or measured[:2] != (model, view.ids):
    st.info("Press the button: 24 greedy tokens in each mode, timed now on this machine (a few seconds).")
else:
    speeds = measured[2]
    speed_labels = [quant.MODE_LABELS[m] for m in speeds]
    charts.show(figs.mode_speed(speed_labels, list(speeds.values())), key="quant_speed")
    fastest = max(speeds, key=speeds.get)
    st.markdown(
        f"Measured just now: **{quant.MODE_LABELS[fastest]}** decodes fastest, {speeds[fastest]:.1f} tok/s, "
        f"{speeds[fastest] / speeds['none']:.1f}× float32's {speeds['none']:.1f} tok/s. Bytes are not the "
        "whole story: each step also pays for the arithmetic of unpacking codes and for everything around the "
        "matmuls, which is why no mode reaches its memory ceiling above."
    )

st.header("What to try next")
st.markdown(
    "- Type a long prompt: the KL column averages over more positions; where does 4-bit disagree most?\n"
    "- Compare the bytes chart with the measured speeds: which mode gets closest to its ceiling, and why?\n"
    "- Next: **Batching** — reading the weights once for many requests at a time."
)
