"""Overview: the landing page at "/", the map of the walk through one forward pass."""
import streamlit as st

from ui.shell.navigation import PAGES, redirect_legacy_run

redirect_legacy_run()  # see ui/shell/navigation.py: a fresh server's first deep link runs this file without app.py

st.title("LLM inference explorer")
st.markdown(
    "What happens between pressing Enter and seeing the next word? This app walks through it with a real "
    "model (the one named in the sidebar) and your own prompt: every number on every page is computed by that "
    "model, live. The prompt in the sidebar carries from page to page.\n\n"
    "The story, in order: text is cut into **tokens**; each token id picks a row of the **embedding** matrix; "
    "**attention** lets every token look back at the ones before it; blocks of attention and feed-forward layers "
    "refine those vectors (and **experiments** switch parts of them off to see what each does); the last vector becomes **logits**, one score per vocabulary entry; "
    "**temperature** and **sampling** turn scores into one chosen token; and **generation** repeats it all, "
    "reusing a **KV cache**."
)
st.subheader("Pages")
for spec in PAGES[1:]:
    st.page_link(spec.script, label=spec.title, icon=spec.icon)
st.subheader("What to try next")
st.markdown("Start with **Tokenization**, and change the prompt in the sidebar whenever you like.")
