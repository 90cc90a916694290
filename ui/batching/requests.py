"""The Batching page's request editor, as the session keeps it: the rows it starts from and the rows as left.

A data editor's widget state holds edits relative to the rows it was created with; this module gives
it those rows unchanged while that state lives, and the rows as the user left them after Streamlit
dropped it (another page was opened), so every edit is applied once and survives a page switch.
"""

from __future__ import annotations

import streamlit as st

from ui.batching.compute import DEFAULT_REQUESTS
from ui.common import state


def editor_data() -> list[dict]:
    """The rows to give the request editor, so that edits survive a page switch and are applied once.

    While the editor's widget state lives, it holds edits relative to the rows it was created with,
    so those rows must be passed unchanged (feeding its output back in would re-apply every edit
    and lose the next keystroke). When Streamlit has dropped that state (the user visited another
    page), the editor starts again from the rows as the user left them.
    """
    if state.BATCH_REQUESTS not in st.session_state or state.BATCH_ROWS_ORIGIN not in st.session_state:
        st.session_state[state.BATCH_ROWS_ORIGIN] = [
            dict(row) for row in st.session_state.get(state.BATCH_ROWS_LATEST, DEFAULT_REQUESTS)
        ]
    return st.session_state[state.BATCH_ROWS_ORIGIN]


def remember_rows(rows: list[dict]) -> None:
    """Keep the editor's current rows for the next time the page is opened."""
    st.session_state[state.BATCH_ROWS_LATEST] = [dict(row) for row in rows]
