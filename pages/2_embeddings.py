"""Embeddings page (stub)."""
import streamlit as st

from ui.navigation import redirect_legacy_run

redirect_legacy_run()

st.title("Embeddings")
st.write("coming")
