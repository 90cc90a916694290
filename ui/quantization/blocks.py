"""The Quantization page's block view, cached: which block types and tensors the model's GGUF file holds, and one
stored block read through the backend (``Backend.stored_block``: the codes, scales and what they decode to).

The block reading itself is the engine's (``inference.inspection.blocks``, over the engine's own GGUF
reader); ``kernel_held`` (what the 4-bit kernel multiplies by) is a pure function of a block's layout.
"""

from __future__ import annotations

import streamlit as st

from inference.api import StoredLayout, kernel_held
from ui.common.resources import client_for

__all__ = ["block_types", "kernel_held", "stored_layout", "weights_by_type"]


@st.cache_data(max_entries=4, show_spinner="Reading the file's tensor directory…")
def block_types(model: str) -> dict[str, list[str]]:
    """The quantized block types ``model``'s GGUF file holds, each with its 2-D tensors' names in file order
    (empty without a GGUF file)."""
    summary = client_for(model).file_summary()
    return {} if summary is None else summary.block_tensors


@st.cache_data(max_entries=4, show_spinner=False)
def weights_by_type(model: str) -> dict[str, int]:
    """Weights stored per block type (float types included) in ``model``'s GGUF file (empty without one)."""
    summary = client_for(model).file_summary()
    return {} if summary is None else summary.weights_by_type


@st.cache_data(max_entries=16, show_spinner=False)
def stored_layout(model: str, tensor: str, row: int = 0, block: int = 0) -> StoredLayout | None:
    """Block ``block`` of row ``row`` of ``tensor`` as ``model``'s file stores it, read by the engine and by
    ``gguf``; None without a GGUF file or for a type not read."""
    return client_for(model).stored_block(tensor, row, block)
