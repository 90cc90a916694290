"""Overview: the landing page at "/", a picture of one prediction computed from the prompt, and the map of the walk."""

import streamlit as st

from inference.api import PromptError, TokenizerError
from ui.common import format as fmt
from ui.common import models, picture, state
from ui.common.navigation import PAGES, redirect_legacy_run
from ui.overview.compute import overview
from ui.overview.figures import overview_svg

redirect_legacy_run()  # see ui/common/navigation.py: a fresh server's first deep link runs this file without app.py

st.title("LLM inference explorer")
model, prompt = models.current(), str(state.get(state.PROMPT) or "")
try:
    path = overview(model, prompt, bool(state.get(state.CHAT)))  # one traced forward of the sidebar's prompt
except (PromptError, TokenizerError) as error:
    st.error(f"Cannot run this prompt: {fmt.clause(error)}. Edit the prompt in the sidebar.", icon=":material/block:")
    path = None
if path is not None:
    asked = picture.render(overview_svg(path))
    if asked is not None:
        target = next((spec for spec in PAGES if spec.url_path == asked), None)
        if target is not None:
            st.switch_page(target.script)
    if path.traced_tokens < path.prompt_tokens:
        st.caption(
            f"The prompt has {path.prompt_tokens:,} tokens; the picture runs {path.traced_part} "
            "(a traced forward keeps every layer's attention, which grows with the square of the length)."
        )
if path is not None:
    st.caption(
        f"What happens between pressing Enter and seeing the next word: **{model}** on the sidebar's prompt, "
        "in one forward pass. Every number in the picture is the model's own; click a part to open its page."
    )
st.markdown(
    "This app walks through it with a real model (the one named in the sidebar) and your own prompt: every number "
    "on every page is computed by that model, live. The prompt in the sidebar carries from page to page.\n\n"
    "The story, in order: text is cut into **tokens**; each token id picks a row of the **embedding** matrix; "
    "**attention** lets every token look back at the ones before it; blocks of attention and feed-forward layers "
    "refine those vectors (and **experiments** switch parts of them off to see what each does); the last vector "
    "becomes **logits**, one score per vocabulary entry; **temperature** and **sampling** turn scores into one "
    "chosen token; and **generation** repeats it all, reusing a **KV cache**."
)
st.subheader("Pages")
for spec in PAGES[1:]:
    st.page_link(spec.script, label=spec.title, icon=spec.icon)
st.subheader("What to try next")
st.markdown(
    "Start with **Tokenization**, and change the prompt in the sidebar whenever you like: the picture above follows it."
)
