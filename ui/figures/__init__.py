"""Pure figure builders: plain data in, ``go.Figure`` (or an HTML string) out; no Streamlit, no torch."""
