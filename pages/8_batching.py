"""Batching: many requests of different lengths through one model at once, static vs continuous."""
import streamlit as st

from inference import SamplingError
from ui import charts
from ui import compute_batching as batching
from ui import models, state
from ui.figures import batching as figs
from ui.navigation import redirect_legacy_run

redirect_legacy_run()  # see ui/navigation.py: a fresh server's first deep link runs this file without app.py

RESULT_KEY = "batch_comparison"

st.title("Batching")
st.markdown(
    "A server rarely answers one prompt at a time. So the question is: how do we process **requests of different "
    "sizes, producing different amounts of output tokens**, together? One forward over a batch reads the "
    "weights once for every request in it — the expensive part on this hardware — but prompts of different "
    "lengths must be **padded** to one rectangle, and in a **static** batch a request that finishes early keeps "
    "its row until the longest one is done. **Continuous batching** gives every request its own cache slot, "
    "retires it the step it finishes and lets a waiting request join at once. Below, both run on the real model."
)

st.header("The requests")
st.caption(f"Edit, add or remove rows: at most {batching.MAX_REQUESTS} requests, prompts of at most "
           f"{batching.MAX_PROMPT_TOKENS} tokens, 1–{batching.MAX_NEW_TOKENS} new tokens each. Generation stops "
           "at the model's end-of-text token or the request's limit.")
rows = st.data_editor(batching.DEFAULT_REQUESTS, num_rows="dynamic", key="batch_requests",
                      use_container_width=True,
                      column_config={"prompt": st.column_config.TextColumn("prompt", width="large"),
                                     "max new tokens": st.column_config.NumberColumn(min_value=1, step=1)})
model = models.current()
requests = batching.parse_requests(model, list(rows))
for problem in requests.problems:
    st.warning(problem)
if not requests.prompts:
    st.error("No request can be run: give at least one row a non-empty prompt.")
    st.stop()

# 1. The padded batch
st.header("One batch tensor: padding, mask and positions")
padded = batching.padded_batch(model, tuple(requests.prompts))
charts.show(figs.make_padded_batch(padded.tokens), key="batch_padded")
st.metric("Share of the prefill batch that is padding", f"{padded.padding_share:.0%}",
          help="Columns computed for nothing: every prompt is left-padded to the longest.")
c1, c2 = st.columns([1, 1])
with c1:
    chosen = st.selectbox("Attention mask of request", list(range(len(requests.prompts))), key="batch_mask_row")
    charts.show(figs.make_mask_heatmap(padded.masks[chosen], padded.tokens[chosen], chosen), key="batch_mask")
with c2:
    charts.show(figs.make_positions_heatmap(padded.positions, padded.real), key="batch_positions")

# 2. Static vs continuous, measured
st.header("Static vs continuous batching, measured")
s1, s2, s3 = st.columns([1, 1, 1], vertical_alignment="bottom")
temperature = s1.slider("Temperature (0 = greedy)", 0.0, 1.5, 0.0, 0.05, key="batch_temperature")
n_slots = s2.number_input("Continuous: cache slots", 1, batching.MAX_REQUESTS, min(3, len(requests.prompts)),
                          key="batch_slots", help="Fewer slots than requests: the rest wait and join when one frees.")
s3.button("Run static and continuous", key="batch_run", type="primary", use_container_width=True,
          on_click=st.session_state.__setitem__, args=("batch_pending", True))
if st.session_state.pop("batch_pending", False):
    bar = st.progress(0.0, text="starting…")
    try:
        st.session_state[RESULT_KEY] = batching.compare(
            model, requests.prompts, requests.max_new_tokens, float(temperature), int(state.get(state.SEED)), int(n_slots),
            lambda share, text: bar.progress(share, text=text))
    except SamplingError as error:
        st.error(f"Cannot run these requests: {error}. Set the seed in the sidebar.", icon=":material/block:")
    bar.empty()

result = st.session_state.get(RESULT_KEY)
if result is None or result.prompts != requests.prompts:
    st.info("Press **Run static and continuous**: both modes, then every request alone, on the shared model.")
else:
    charts.show(figs.make_batch_timeline(
        result.static.grid, result.static.phases, "Static: one row per request until the whole batch is done",
        "row"), key="batch_static_timeline")
    charts.show(figs.make_batch_timeline(
        result.continuous.grid, result.continuous.phases,
        f"Continuous: {result.n_slots} cache slots, a request joins as soon as one frees", "slot"),
        key="batch_continuous_timeline")
    m1, m2 = st.columns(2)
    for column, name, run in ((m1, "Static", result.static), (m2, "Continuous", result.continuous)):
        column.metric(f"{name}: aggregate output", f"{run.tokens_per_second:.1f} tok/s",
                      help=f"{run.output_tokens} tokens in {run.seconds:.2f} s of forward + sampling, measured now")
        column.caption(f"{len(run.phases)} steps, {run.computed_positions:,} positions computed, "
                       f"{run.wasted_positions:,} wasted ({run.wasted_positions / max(run.computed_positions, 1):.0%})"
                       " on padding and finished rows; time to first token "
                       f"{min(run.ttft_ms):.0f}–{max(run.ttft_ms):.0f} ms.")
    st.subheader("Batched == solo")
    table = batching.check_table(result)
    st.dataframe(table, hide_index=True, use_container_width=True, key="batch_check")
    if all(row["identical"] == "✓" for row in table):
        st.success("Every request produced exactly the same tokens alone, in the static batch and in the "
                   "continuous batch: batch mates, padding and slots never change a request's answer.")
    else:
        st.error("Some request differs between modes — that would be a bug in the engine.")

st.subheader("What to try next")
st.markdown(
    "- Give one request 32 new tokens and the others 2: watch the grey *idle* rows in the static batch.\n"
    "- Set the cache slots to 1: continuous batching becomes one request at a time.\n"
    "- Raise the temperature: each request keeps its own seeded generator, so the check still holds.\n"
    "- Back to **Generation & KV cache** to see one request's cache grow."
)
