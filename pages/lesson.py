"""Guided lessons: predict first, then see the model's own answer, computed live (ui/lesson/, lessons/*.toml)."""

import streamlit as st

from ui.common.navigation import redirect_legacy_run
from ui.lesson import view

redirect_legacy_run()  # see ui/common/navigation.py: a fresh server's first deep link runs this file without app.py

st.title("Lessons")
st.caption(
    "A path through the chapters with questions on the way. Nothing is stored as an answer: each one is computed "
    "from the model you have chosen, for the step's own text and settings."
)
view.render()
