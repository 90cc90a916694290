"""Batching: many requests of different lengths through one model at once, static vs continuous."""

import time

import streamlit as st

from inference.api import SamplingError, SamplingParams
from ui.batching import claims
from ui.batching import compute as batching
from ui.batching import figures as figs
from ui.batching import requests as request_rows
from ui.common import charts, models, navigation, state
from ui.common import format as fmt
from ui.common.navigation import redirect_legacy_run

redirect_legacy_run()  # see ui/common/navigation.py: a fresh server's first deep link runs this file without app.py

st.title("Batching")
st.markdown(
    "A server rarely answers one prompt at a time. So the question is: how do we process **requests of different "
    "sizes, producing different amounts of output tokens**, together? One forward over a batch reads the "
    "weights once for every request in it — the expensive part on this hardware — but prompts of different "
    "lengths must be **padded** to one rectangle, and in a **static** batch a request that finishes early keeps "
    "its row until the longest one is done. **Continuous batching** gives every request its own cache slot, "
    "retires it the step it finishes and lets a waiting request join at once — but each join is a prefill step, "
    "and a prefill pauses the decoding of everyone else. Below, both run on the real model."
)

st.header("The requests")
st.caption(
    f"Edit, add or remove rows: at most {batching.MAX_REQUESTS} requests, prompts of at most "
    f"{batching.MAX_PROMPT_TOKENS} tokens, 1–{batching.MAX_NEW_TOKENS} new tokens each. Generation stops "
    "at the model's end-of-text token or the request's limit. Requests keep their row number everywhere below."
)
rows = st.data_editor(
    request_rows.editor_data(),
    num_rows="dynamic",
    key=state.BATCH_REQUESTS,
    width="stretch",
    column_config={
        "prompt": st.column_config.TextColumn("prompt", width="large"),
        "max new tokens": st.column_config.NumberColumn(min_value=1, step=1),
    },
)
request_rows.remember_rows(list(rows))
model = models.current()
requests = batching.parse_requests(model, list(rows))
for problem in requests.problems:
    st.warning(problem)
if not requests.prompts:
    st.error("No request can be run: give at least one row a non-empty prompt.")
    st.stop()
labels = requests.rows  # the editor's row numbers: a left-out row keeps the others' numbers

# 1. The padded batch
st.header("One batch tensor: padding, mask and positions")
padded = batching.padded_batch(model, tuple(requests.prompts))
charts.show(figs.padded_batch(padded.tokens, labels=labels), key="batch_padded")
st.metric(
    "Share of the prefill batch that is padding",
    fmt.pct(padded.padding_share),
    help="Columns computed for nothing: every prompt is left-padded to the longest.",
)
c1, c2 = st.columns([1, 1])
with c1:
    chosen = st.selectbox(
        "Attention mask of request",
        list(range(len(requests.prompts))),
        key=state.BATCH_MASK_ROW,
        format_func=[f"request {label}" for label in labels].__getitem__,
    )
    charts.show(figs.mask_heatmap(padded.masks[chosen], padded.tokens[chosen], labels[chosen]), key="batch_mask")
    st.caption(claims.mask_caption(sum(cell is None for cell in padded.tokens[chosen]), len(padded.tokens[chosen])))
with c2:
    charts.show(figs.positions_heatmap(padded.positions, padded.real, labels), key="batch_positions")

# 2. Static vs continuous, measured
st.header("Static vs continuous batching, measured")
s1, s2, s3 = st.columns([1, 1, 1], vertical_alignment="bottom")
temperature = s1.slider("Temperature (0 = greedy)", 0.0, 1.5, 0.0, 0.05, key=state.BATCH_TEMPERATURE)
n_slots = s2.number_input(
    "Continuous: cache slots",
    1,
    batching.MAX_REQUESTS,
    min(batching.DEFAULT_SLOTS, len(requests.prompts)),
    key=state.BATCH_SLOTS,
    help="Fewer slots than requests: the rest wait and join when one frees.",
)
s3.button(
    "Run static and continuous",
    key=state.BATCH_RUN,
    type="primary",
    width="stretch",
    **state.sets(state.BATCH_PENDING, True),
)
share = st.checkbox(
    "Continuous: share prompt starts",
    key=state.BATCH_SHARE,
    help="A request whose prompt begins with tokens a cache slot already holds copies those "
    "positions instead of computing them (what the class server does for every request).",
)
if st.session_state.pop(state.BATCH_PENDING, False):
    bar = st.progress(0.0, text="starting…")
    try:
        st.session_state[state.BATCH_RESULT] = batching.compare(
            model,
            requests.prompts,
            requests.max_new_tokens,
            float(temperature),
            int(state.get(state.SEED)),
            int(n_slots),
            lambda done, text: bar.progress(done, text=text),
            share_prefixes=bool(share),
        )
    except SamplingError as error:
        st.error(
            f"Cannot run these requests: {fmt.clause(error)}. Set the seed in the sidebar.", icon=":material/block:"
        )
    bar.empty()

result = st.session_state.get(state.BATCH_RESULT)
if result is None or result.prompts != requests.prompts:
    st.info("Press **Run static and continuous**: both modes, then every request alone, on the shared model.")
else:
    static, continuous = result.static, result.continuous
    st.markdown(
        claims.verdict_sentence(
            static.tokens_per_second,
            continuous.tokens_per_second,
            len(static.phases),
            len(continuous.phases),
            static.wasted_positions,
            continuous.wasted_positions,
            result.n_slots,
            len(result.prompts),
            len(continuous.late_prefills),
            static.decode_medians(),
            continuous.decode_medians(),
        )
    )
    steps = max(len(static.phases), len(continuous.phases))  # one step axis for both timelines
    charts.show(
        figs.batch_timeline(
            static.grid,
            static.phases,
            "Static: one row per request until the whole batch is done",
            "row",
            labels,
            steps,
            step_ms=static.step_ms,
        ),
        key="batch_static_timeline",
    )
    charts.show(
        figs.batch_timeline(
            continuous.grid,
            continuous.phases,
            f"Continuous: {result.n_slots} cache slots, a request joins as soon as one frees (wait = paused by a "
            "prefill)",
            "slot",
            labels,
            steps,
            step_ms=continuous.step_ms,
        ),
        key="batch_continuous_timeline",
    )
    m1, m2 = st.columns(2)
    for column, name, run in ((m1, "Static", static), (m2, "Continuous", continuous)):
        column.metric(
            f"{name}: aggregate output",
            f"{run.tokens_per_second:.1f} tok/s",
            help=f"{run.output_tokens} tokens in {run.seconds:.2f} s of forward + sampling, measured now",
        )
        column.caption(claims.mode_caption(len(run.phases), run.computed_positions, run.wasted_positions, run.ttft_ms))
    if result.share_prefixes:
        st.markdown(claims.shared_start_sentence(continuous.reused, continuous.prompt_positions, labels))
    pause = claims.prefill_pause_sentence(
        len(continuous.late_prefills), sum(continuous.step_ms[i] for i in continuous.late_prefills)
    )
    if pause:
        st.markdown(pause)

    st.subheader("Per request: time to first token, time per output token")
    charts.show(
        figs.request_latency(labels, static.ttft_ms, continuous.ttft_ms, static.tpot_ms, continuous.tpot_ms),
        key="batch_latency",
    )
    st.caption(
        "Time to first token: from the start of the run (every request arrives at once) to its first token, "
        "wall clock. Time per output token: the mean time between its later tokens (none for a one-token "
        "answer). A request waiting for a slot pays in its time to first token."
    )

    st.subheader("KV cache memory: reserved against used")
    charts.show(
        figs.memory_chart(static.reserved_bytes, static.used_bytes, continuous.reserved_bytes, continuous.used_bytes),
        key="batch_memory",
    )
    st.markdown(
        claims.memory_sentence(static.reserved_bytes, static.used_bytes, "Static")
        + " "
        + claims.memory_sentence(continuous.reserved_bytes, continuous.used_bytes, "Continuous")
        + f" Continuous batching allocates all {result.n_slots} slots up front "
        f"({continuous.allocated_bytes / 2**20:,.2f} MiB); a slot is sized for its longest request."
    )

    st.subheader("Batched == solo")
    table = batching.check_table(result, labels)
    st.dataframe(table, hide_index=True, width="stretch", key="batch_check")
    if all(row["identical"] == "✓" for row in table):
        st.success(
            "Every request produced exactly the same tokens alone, in the static batch and in the "
            "continuous batch: batch mates, padding and slots never change a request's answer."
        )
    else:
        st.error("Some request differs between modes — that would be a bug in the engine.")

# 2b. A class asking the same thing
st.header("A class asks the same thing")
st.markdown(
    "When students follow their teacher, every tab asks the server for the very same thing: one prompt, the same "
    "settings and seed. The shared generation server computes such a request once and hands the result to every "
    "identical request that arrives while it is in flight. Send the first request's prompt from as many tabs at once, "
    f"seeded (T = {float(temperature):g}, seed {int(state.get(state.SEED))}, {batching.CLASS_NEW_TOKENS} new tokens):"
)
tabs = st.number_input(
    "Tabs sending it",
    min_value=batching.CLASS_SIZES[0],
    max_value=batching.CLASS_SIZES[1],
    value=batching.DEFAULT_CLASS,
    step=1,
    key=state.BATCH_CLASS_TABS,
)
st.button("Send them at once", key=state.BATCH_CLASS_RUN, **state.sets(state.BATCH_CLASS_PENDING, True))
if st.session_state.pop(state.BATCH_CLASS_PENDING, False):
    params = SamplingParams(
        temperature=float(temperature),
        seed=int(state.get(state.SEED)),
        max_new_tokens=batching.CLASS_NEW_TOKENS,
        stop_on_eos=False,
    )
    with st.spinner("sending…"):
        st.session_state[state.BATCH_CLASS_RESULT] = (
            model,
            requests.prompts[0],
            batching.same_requests(model, requests.prompts[0], params, int(tabs)),
        )
sent = st.session_state.get(state.BATCH_CLASS_RESULT)
if sent and sent[0] == model and sent[1] == requests.prompts[0]:
    shared_run = sent[2]
    c1, c2, c3 = st.columns(3)
    c1.metric("Requests sent", f"{shared_run.n:,}")
    c2.metric("Computed", f"{shared_run.computed:,}")
    c3.metric("Rode on an identical one", f"{shared_run.shared:,}")
    st.markdown(
        claims.same_requests_sentence(shared_run.n, shared_run.shared, shared_run.identical, shared_run.seconds)
    )
    st.caption("The answer every tab got (the prompt, then the tokens generated):")
    st.code(sent[1] + shared_run.text, language=None, wrap_lines=True)  # as text: code and "#" lines stay as written

# 3. Throughput against batch size
st.header("Throughput against batch size, measured")
st.button(
    "Measure throughput vs batch size",
    key=state.BATCH_CURVE_RUN,
    **state.sets(state.BATCH_CURVE_PENDING, True),
)
if st.session_state.pop(state.BATCH_CURVE_PENDING, False):
    bar = st.progress(0.0, text="timing…")
    started = time.perf_counter()
    measured_curve = batching.throughput_curve(model, progress=lambda s, t: bar.progress(s, text=t))
    st.session_state[state.BATCH_CURVE] = (model, measured_curve, time.perf_counter() - started)
    bar.empty()
stored_curve = st.session_state.get(state.BATCH_CURVE)
if stored_curve and stored_curve[0] == model:
    curve, took = stored_curve[1], stored_curve[2] if len(stored_curve) > 2 else None
    charts.show(figs.throughput_curve(curve.batch_sizes, curve.tokens_per_second, curve.step_ms), key="batch_curve")
    st.markdown(claims.curve_sentence(curve.batch_sizes, curve.tokens_per_second, curve.step_ms))
    st.caption(claims.curve_caption(curve.prompt, curve.batch_sizes[-1], curve.decode_steps, took))
else:
    st.caption(
        f"Times {batching.CURVE_STEPS} decode steps at each batch size "
        f"({', '.join(map(str, batching.CURVE_SIZES))}) on this server, now."
    )

st.subheader("What to try next")
st.markdown(
    "- Give every request 16 new tokens: with equal answers a static batch keeps no idle rows. Which mode wins "
    "now, and why?\n"
    "- Set the cache slots to 6, one per request: nobody waits, so no prefill pauses the others. Then set 1: "
    "continuous batching becomes one request at a time.\n"
    "- Raise the temperature: each request keeps its own seeded generator, so the check still holds.\n"
    "- Tick **share prompt starts** with two slots, and give the requests the same opening words: the late "
    "ones copy those positions from a slot instead of computing them.\n"
    "- Back to **Generation & KV cache** to see one request's cache grow."
)
st.page_link(
    navigation.script_of("paged_kv"),
    label="Next: the Paged KV cache, the same requests in blocks that hold only what is written, prompt starts shared",
    icon=":material/grid_view:",
)
