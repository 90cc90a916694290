"""Transformer block & logit lens: one block walked with real activations, then every layer read out as a guess."""

import streamlit as st

from ui.common import charts, models, state
from ui.common.navigation import redirect_legacy_run
from ui.common.resources import client_for
from ui.common.token_text import visible_token
from ui.logit_lens import claims
from ui.logit_lens import figures as figs
from ui.logit_lens.examples import lens_example
from ui.logits.compute import traced_prompt
from ui.logits.prompt import current_prompt_logits

redirect_legacy_run()  # see ui/common/navigation.py: a fresh server's first deep link runs this file without app.py

st.title("Transformer block & logit lens")
st.caption(
    "Each block reads the residual stream, adds what attention found, then adds what the feed-forward "
    "network computed. The stream keeps its size the whole way; only its contents change."
)
loaded = current_prompt_logits()
if loaded is None:
    st.stop()
prompt, chat, cached = loaded
model = models.current()
config = client_for(model).info.config
traced = traced_prompt(model, prompt, chat)
walk, lens = traced.walk, traced.lens
if traced.traced_tokens < traced.prompt_tokens:
    st.warning(
        f"The prompt has {traced.prompt_tokens:,} tokens; this page traces only {traced.traced_part} (a traced "
        "forward keeps every layer's attention, which grows as T²), so the numbers here see a shortened context."
    )

# 1. One block, walked with the real activations at the last position
st.subheader("1 · One block, walked")
layer = st.slider(
    "Block (layer)", 0, config.n_layers - 1, **state.bind_slider(state.BLOCK_LAYER, 0, range(config.n_layers))
)
last = visible_token(cached.token_strings[-1])
norms = walk.norms[layer, :, -1].tolist()
charts.show(
    figs.block_diagram(
        walk.stage_names, walk.shape, norms, f"Block {layer} of {config.n_layers}, at the last position ({last})"
    ),
    key="block_diagram",
)
if config.norms_per_block == 4:
    stage = {name: i for i, name in enumerate(walk.stage_names)}
    raw_attn, normed_attn = (
        walk.norms[layer, stage[name], -1] for name in ("attention output", "RMSNorm (post-attention)")
    )
    raw_mlp, normed_mlp = (walk.norms[layer, stage[name], -1] for name in ("feed-forward output", "RMSNorm (post-MLP)"))
    structure = (
        f"{config.name} has **four norms per block**: before attention, after it, before the feed-forward "
        "network and after it; what is added to the stream is each sub-layer's output *after* its post-norm. "
        f"Here the post-norms take the attention output from ‖x‖ = {raw_attn:.1f} to {normed_attn:.1f} and the "
        f"feed-forward output from {raw_mlp:.1f} to {normed_mlp:.1f}."
    )
else:
    structure = (
        f"{config.name} is pre-norm: an RMSNorm also sits just before attention (inside that box), and "
        "the sub-layers' outputs are added to the stream as they are."
    )
st.caption(
    f"Every stage is a {walk.shape[0]} × {walk.shape[1]} tensor (prompt positions × d_model): the residual "
    f"stream's size never changes. ‖x‖ is the length of the {walk.shape[1]}-number vector at the last "
    f"position. {structure}"
)
charts.show(figs.block_activations(walk.stage_names, walk.last_vectors[layer]), key="block_activations")

# 2. The logit lens: the final norm + output matrix applied after every block
st.subheader("2 · Logit lens")
st.caption(
    "Stop after any block, apply the final norm and the output matrix, and read off the token the model "
    "would predict. Bottom row: the embeddings alone; top row: the real output. Hover for the top 3."
)
if len(lens.position_tokens) < walk.shape[0]:
    st.caption(f"Showing the last {len(lens.position_tokens)} of {walk.shape[0]} positions.")
first_position = traced.prompt_tokens - len(lens.position_tokens)  # the lens shows the prompt's last positions
charts.show(
    figs.logit_lens(
        lens.layer_labels, lens.position_tokens, lens.top_probs, lens.top_strings, first_position=first_position
    ),
    key="logit_lens",
)
final = lens.top_strings[-1][-1][0]
final_probabilities = lens.final_token_probability.tolist()
charts.show(figs.answer_formation(lens.layer_labels, final_probabilities, final), key="answer_formation")
st.markdown(
    claims.answer_formation_sentence(
        lens.layer_labels, [layer[-1][0] for layer in lens.top_strings], final_probabilities
    )
    + " The line shows how sure each readout is."
)

st.header("What to try next")
example = lens_example(model)  # a prompt whose answer this model gives, and the lens shows taking over
st.markdown(
    claims.lens_suggestion(example.prompt if example else None, example.answer if example else None, prompt) + "\n"
    "- Walk the same block at an early and a late layer: which sub-layer changes the stream the most?\n"
    "- Next: **Logits & temperature** — what happens to the last layer's scores before a token is chosen."
)
if example is not None and example.prompt != prompt:
    st.button(
        f"Use “{example.prompt}”",
        key=state.LENS_USE_EXAMPLE,
        on_click=state.set_values,
        args=({state.PROMPT: example.prompt, state.CHAT: False},),
    )
