"""Paged KV cache: the engine's block manager replayed step by step on real requests, against the slot cache."""

import pandas as pd
import streamlit as st

from ui.common import charts, models, state
from ui.common.navigation import redirect_legacy_run
from ui.common.resources import client_for
from ui.paged_kv import claims, compute, controls
from ui.paged_kv import figures as figs

redirect_legacy_run()  # see ui/common/navigation.py: a fresh server's first deep link runs this file without app.py

st.title("Paged KV cache")
st.markdown(
    "A slot cache gives every request one long stretch of memory, sized for the longest request, however short "
    "this one is; a prompt start that several requests share is copied into each. A **paged** cache (vLLM's "
    "PagedAttention) cuts the cache into small fixed-size **blocks** and gives each sequence a **block table**, "
    "logical block → physical block, as an operating system pages memory. A sequence takes a block only when "
    "its last one is full; a full block is keyed by its tokens and everything before them, so a later request "
    "with the same start **shares** it (reference count + 1); a shared block about to be written is **copied** "
    "first; and when the pool runs out, the newest sequence is **preempted**: it gives its blocks back and is "
    "recomputed later. Below, a scenario runs through the engine's own scheduler on the real model, and every "
    "step is recorded."
)

model = models.current()
scenario_key, block_size = controls.scenario_and_block_size()
scenario = compute.SCENARIOS[scenario_key]
st.caption(f"Watch for this: {scenario.story}")
with st.expander("The requests"):
    st.dataframe(
        pd.DataFrame(
            {
                "prompt": scenario.prompts,
                "answers": [scenario.samples] * len(scenario.prompts),
                "new tokens each": scenario.new_tokens,
            }
        ),
        hide_index=True,
        width="stretch",
    )
try:
    with st.spinner("Running the scenario through the paged scheduler…"):
        replay = compute.replay(model, scenario_key, block_size, int(state.get(state.SEED)))
except ValueError as error:
    st.error(f"This scenario cannot run on this model: {error}", icon=":material/block:")
    st.stop()
trace, labels = replay.trace, replay.labels
st.markdown(claims.run_sentence(trace))

# 1. One step of the scheduler
st.header("The scheduler, step by step")
current, note = controls.step(len(trace.steps) - 1)
if note:
    st.warning(note, icon=":material/link:")
step = trace.steps[current]
st.markdown(claims.step_sentence(step, trace, labels))
if step.events:
    st.markdown("\n".join(f"- {claims.event_sentence(e, labels, block_size)}" for e in step.events))
else:
    st.caption("The block manager changed no table at this step: every sequence wrote into a block it already held.")
charts.show(figs.block_grid(step, labels, block_size), key="paged_grid")
charts.show(figs.block_tables(step, labels, claims.sequence_status(trace, current)), key="paged_tables")

# 2. Memory: paged against the slot cache, from the same requests
st.header("Memory: blocks against slots")
left, right = st.columns(2)
with left:
    charts.show(figs.memory_timeline(trace, current), key="paged_memory")
with right:
    charts.show(figs.memory_at_step(step), key="paged_memory_step")
st.markdown(claims.memory_sentence(step, trace))
st.markdown(claims.peak_sentence(trace))
for sentence in (claims.cow_sentence(trace, scenario.samples), claims.preemption_sentence(trace, labels, replay.alone)):
    if sentence:
        st.markdown(sentence)
config = client_for(model).info.config
released = claims.window_release_sentence(
    config.n_layers, len(config.local_layers), config.sliding_window, trace.position_bytes, block_size
)
if released:
    st.markdown(released)

with st.expander("The answers"):
    st.dataframe(
        pd.DataFrame({"sequence": labels, "answer": replay.answers, "tokens": [len(t) for t in replay.token_ids]}),
        hide_index=True,
        width="stretch",
    )

st.subheader("What to try next")
st.markdown(
    "- Set the block size to 1: no position is ever wasted, but every table is as long as its sequence. Then 32: "
    "the tables are short, and the last blocks leave more unwritten.\n"
    "- **n samples of one prompt**: step to the first decode and find the copy-on-write. Which block size makes it "
    "disappear?\n"
    "- **A long request forces a preemption**: follow the long prompt's table as it empties and fills again.\n"
    "- Back to **Batching** to see the slot cache's continuous batching on requests of your own."
)
