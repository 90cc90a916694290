"""Entry point of the LLM inference explorer: page config, shared state, sidebar, navigation.

Run with ``streamlit run app.py``. Pages live in ``pages/`` and are registered, in
story order, in ``ui/navigation.py``; this file draws what every page shares.
"""
import streamlit as st

from ui import navigation, sidebar, state
from ui.resources import get_engine, use_app_threads

st.set_page_config(page_title=navigation.ROOT_TITLE, page_icon="🔎", layout="wide")
use_app_threads()
state.init()
page = navigation.build()
sidebar.render(get_engine())
navigation.run(page)
