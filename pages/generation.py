"""Generation & the KV cache: the autoregressive loop step by step, and why the cache makes it fast."""

import streamlit as st

from ui.common import charts, models, navigation, presenter, state
from ui.common import format as fmt
from ui.common.navigation import redirect_legacy_run
from ui.common.resources import current_client
from ui.generation import claims, walk
from ui.generation import compute as gen
from ui.generation import figures as figs
from ui.sampling import controls as sampling_controls
from ui.tokenization.prompt import prompt_tokens_or_stop

redirect_legacy_run()  # see ui/common/navigation.py: a fresh server's first deep link runs this file without app.py

st.title("Generation & the KV cache")
model = models.current()
client = current_client()
config = client.info.config
view = prompt_tokens_or_stop()
st.markdown(
    "A model answers one token at a time: it reads the sequence, scores every possible next token, one is chosen, "
    "and the sequence — now one token longer — goes in again "
    + claims.example_sentence(
        state.get(state.PROMPT),
        gen.greedy_example(model, tuple(view.ids)) if len(view.ids) + 3 <= config.max_seq_len else None,
        bool(state.get(state.CHAT)),
    )
    + ". Read naively, every step re-reads the whole context. The **KV cache** keeps each layer's keys and values "
    "of the tokens already seen, so a step only computes the one new position and attends to the stored rest. "
    "Step through it below on the real model."
)
presenting = presenter.is_on()  # a projector shows the walk, not every control: settings are read, not drawn
settings = sampling_controls.settings_or_stop(config.vocab_size, draw=not presenting)
stepper = walk.current_stepper(model, view.ids, settings.params)

# 1. Controls: next, run N, rewind, force a token (actions run as callbacks, before the page redraws)
st.header("Step through it")
if presenting:
    run_n = int(st.session_state.get(state.GEN_N, 8))
    c1, c2, c3 = st.columns(3, vertical_alignment="bottom")
    c1.button("Next token", key=state.GEN_NEXT, type="primary", width="stretch", on_click=walk.act, args=("next",))
    c2.button(f"Run {run_n}", key=state.GEN_RUN, width="stretch", on_click=walk.act, args=("run",))
    c3.button("Back to the prompt", key=state.GEN_RESTART, width="stretch", on_click=walk.act, args=("restart",))
    st.caption(f"Sampling: {sampling_controls.summary(settings.params)} (presenter mode hides the other controls).")
else:
    c1, c2, c3, c4 = st.columns([1, 1.3, 1.3, 1.6], vertical_alignment="bottom")
    c1.button("Next token", key=state.GEN_NEXT, type="primary", width="stretch", on_click=walk.act, args=("next",))
    c2.number_input(f"Run N (≤ {gen.MAX_RUN})", min_value=1, max_value=gen.MAX_RUN, value=8, key=state.GEN_N)
    c2.button("Run N", key=state.GEN_RUN, width="stretch", on_click=walk.act, args=("run",))
    c3.number_input(
        "Rewind to step",
        value=0,
        step=1,
        key=state.GEN_REWIND_TO,
        help="Keep this many generated tokens (0 = back to the prompt alone).",
    )
    c3.button("Rewind", key=state.GEN_REWIND, width="stretch", on_click=walk.act, args=("rewind",))
    c4.text_input(
        "Force the next token",
        value=" under",
        key=state.GEN_FORCE,
        help="Exactly one token; mind the leading space. Rewind first to branch at an earlier step.",
    )
    c4.button("Force it", key=state.GEN_FORCE_GO, width="stretch", on_click=walk.act, args=("force",))
error = st.session_state.pop(state.GEN_ERROR, None)
if error:
    st.error(f"{fmt.clause(error)}. Nothing was changed.", icon=":material/block:")
if st.session_state.get(state.GEN_PENDING) == "run":
    del st.session_state[state.GEN_PENDING]
    bar = st.progress(0.0, text="generating…")
    walk.run_steps(
        stepper, int(st.session_state.get(state.GEN_N, 8)), lambda share, text: bar.progress(share, text=text)
    )
    bar.empty()

if not presenting:
    st.caption(
        f"Up to {gen.MAX_STEPS} tokens per walk; Run N adds at most {gen.MAX_RUN} at a time. Changing the "
        "prompt starts a new walk; changed sampling settings apply from the next step. Step i's draw uses its "
        "own generator seeded from (seed, i), so a rewound step replays the same token."
    )
chosen_texts = gen.chosen_texts(model, stepper)
st.markdown(figs.sequence_html(view.pieces, chosen_texts, [c.forced for c in stepper.chosen]), unsafe_allow_html=True)
if stepper.done and stepper.chosen:
    st.info(claims.finished_sentence(stepper.chosen[-1].token_id in client.info.eos_ids, stepper.max_steps))

if stepper.chosen:
    last = stepper.chosen[-1]
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("Generated tokens", len(stepper.chosen))
    m2.metric("Positions in the KV cache", stepper.cache_length)
    m3.metric("Last step", fmt.ms(1000 * last.seconds), help=f"{last.phase}: forward + sampling")
    m4.metric(
        "Reused by the last step",
        f"{last.cache_len_before} positions",
        help="Positions read from the cache instead of recomputed.",
    )
    left, right = st.columns([1, 1.4]) if not presenting else (st.container(), None)  # no table beside it
    top_texts = gen.candidate_texts(model, last.top)
    chosen_text = chosen_texts[-1]
    with left:
        charts.show(
            figs.alternatives_bar(
                top_texts,
                [c.probability for c in last.top],
                chosen_text,
                claims.top_candidates_title(last.index, chosen_text, last.forced, settings.params.temperature),
                token_ids=[c.token_id for c in last.top],
                chosen_id=last.token_id,
            ),
            key="gen_alternatives",
        )
    if right is not None:
        right.dataframe(gen.steps_table(model, stepper), hide_index=True, height=300, key="gen_steps_table")
else:
    st.info("Press **Next token** to run the prefill (the whole prompt in one pass) and choose the first token.")

# 2. The cache itself
st.header("Inside the KV cache")
if stepper.cache_length == 0:
    st.info("The cache is empty until the first step runs the prompt through the model.")
else:
    layer = st.slider("Layer", 0, config.n_layers - 1, 0, key=state.GEN_LAYER)
    cache = gen.cache_view(model, stepper, layer)
    charts.show(
        figs.kv_heatmaps(
            cache.keys, cache.values, cache.labels, cache.new_rows, layer, first_position=cache.first_position
        ),
        key="gen_kv_heatmaps",
    )
    sizes = gen.cache_bytes(model, stepper)
    b1, b2, b3 = st.columns(3)
    b1.metric(
        "Cache now",
        f"{sizes.tensors_now / 1024:,.1f} KiB",
        help="Measured on the cache's tensors (keys + values of the positions held).",
    )
    b2.metric(
        "This request's allocation",
        f"{sizes.allocated / 2**20:,.2f} MiB",
        help="Preallocated for the prompt plus the step limit.",
    )
    b3.metric(f"At the full context ({config.max_seq_len:,} tokens)", f"{sizes.full_context / 2**20:,.0f} MiB")
    check = "✓ matches" if sizes.formula_now == sizes.tensors_now else "✗ differs from"
    st.caption(
        f"Formula: {sizes.formula} = {sizes.formula_now:,} bytes for {stepper.cache_length} tokens — {check} "
        f"the {sizes.tensors_now:,} bytes measured on the tensors: {sizes.per_token:,} bytes per token."
    )
    if sizes.rolling_full_context is not None:
        n_local = len(config.local_layers)
        saved = 1 - sizes.rolling_full_context / sizes.full_context
        st.markdown(
            f"**Local layers and a rolling buffer.** {n_local} of this model's {config.n_layers} layers only ever "
            f"look at the last {config.sliding_window} positions, but this engine keeps every position in every "
            f"layer (simpler, and the cache can be rewound anywhere). A rolling buffer holding just "
            f"{config.sliding_window} positions in the local layers would need "
            f"{sizes.rolling_full_context / 2**20:,.0f} MiB instead of {sizes.full_context / 2**20:,.0f} MiB at the "
            f"full context ({fmt.pct(saved)} less); for the {stepper.cache_length} positions held now, "
            f"{sizes.rolling_now:,} bytes instead of {sizes.formula_now:,}"
            + (
                " (the same: no local layer has dropped a position yet)."
                if sizes.rolling_now == sizes.formula_now
                else "."
            )
        )

# 3. Cached vs uncached, measured live
st.header("With and without the cache, measured")
t1, t2 = st.columns([1, 3], vertical_alignment="bottom")
if presenting:
    n_timing = int(st.session_state.get(state.GEN_TIMING_N, 32))
else:
    n_timing = t1.number_input(
        f"Tokens to time (≤ {gen.MAX_TIMING_TOKENS})", 4, gen.MAX_TIMING_TOKENS, 32, key=state.GEN_TIMING_N
    )
t1.button("Measure", key=state.GEN_MEASURE, on_click=walk.act, args=("measure",))
if st.session_state.get(state.GEN_PENDING) == "measure":
    del st.session_state[state.GEN_PENDING]
    bar = st.progress(0.0, text="timing…")
    st.session_state[state.GEN_TIMING] = (
        view.ids,
        gen.measure_cache_timing(model, view.ids, int(n_timing), lambda share, text: bar.progress(share, text=text)),
    )
    bar.empty()
stored = st.session_state.get(state.GEN_TIMING)
if stored and stored[0] == view.ids:
    timing = stored[1]
    charts.show(figs.cache_timing(timing.context_lengths, timing.cached_ms, timing.uncached_ms), key="gen_timing_chart")
    k1, k2, k3 = st.columns(3)
    cached_ms = claims.quarters(timing.cached_ms)[1].median  # the same medians as the sentence below
    uncached_ms = claims.quarters(timing.uncached_ms)[1].median
    k1.metric("With the cache (longest quarter, median)", fmt.ms(cached_ms))
    ratio = uncached_ms / cached_ms
    k2.metric(
        "Recomputing everything (same steps)",
        fmt.ms(uncached_ms),
        f"{ratio:.1f}× slower" if ratio >= 1 else f"{1 / ratio:.1f}× faster",
        delta_color="inverse",
    )
    k3.metric(
        "Largest |Δ logit| between the two",
        f"{timing.max_abs_diff:.2e}",
        help="Same numbers either way: the cache changes the cost, not the answer.",
    )
    st.markdown(claims.timing_sentence(timing.context_lengths, timing.cached_ms, timing.uncached_ms))
else:
    t2.caption(
        "Generates greedy tokens after the prompt; at every length it times one cached decode step and one "
        "full recompute, and compares their logits."
    )

# 4. Prefill vs decode
st.header("Prefill, then decode")
if stepper.chosen:
    phases = [c.phase for c in stepper.chosen]
    seconds = [c.seconds for c in stepper.chosen]
    tokens_in = [len(stepper.prompt_ids) if c.phase == "prefill" else 1 for c in stepper.chosen]
    charts.show(figs.phase_timeline(phases, seconds, tokens_in, chosen_texts), key="gen_timeline")
    prefill = next((c for c in stepper.chosen if c.phase == "prefill"), None)
    st.caption(
        "The prefill processes every prompt token in one pass (matrix-matrix work); each decode step "
        "processes one token (matrix-vector work, limited by reading the weights from memory). "
        + (
            claims.phase_sentence(
                len(stepper.prompt_ids),
                1000 * prefill.seconds,
                [1000 * c.seconds for c in stepper.chosen if c.phase == "decode"],
                *gen.machine_load(),
            )
            if prefill is not None
            else ""
        )
    )
else:
    st.info("Press **Next token**: the first step is the prefill.")

st.subheader("What to try next")
st.markdown("\n".join(claims.generation_suggestions(settings.params.temperature)))
st.page_link(
    navigation.script_of("paged_kv"),
    label="Next: the Paged KV cache, where a server keeps many requests' caches in shared blocks",
    icon=":material/grid_view:",
)
