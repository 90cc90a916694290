"""The one engine per server process, loaded through ``st.cache_resource``.

The engine holds weights only (no per-request state), so sharing it across every
browser session is safe; caches and generators are created per request.
"""
from __future__ import annotations

import os

import streamlit as st

from inference import Engine, load_engine


@st.cache_resource(show_spinner="Loading the model (first start converts the GGUF, ~10 s)…")
def get_engine() -> Engine:
    """Load the model named by ``LLM_EXPLORER_MODEL`` (default: the embedded SmolLM2-135M-Instruct)."""
    return load_engine(
        model=os.environ.get("LLM_EXPLORER_MODEL") or None,
        device=os.environ.get("LLM_EXPLORER_DEVICE") or None,
        dtype=os.environ.get("LLM_EXPLORER_DTYPE") or None,
    )
