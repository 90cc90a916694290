"""Entry point of the LLM inference explorer: page config, shared state, sidebar, navigation.

Run with ``streamlit run app.py``. Pages live in ``pages/`` and are registered, in
story order, in ``ui/navigation.py``; this file draws what every page shares. A shared
link's settings are read once per session (``url_state.restore``), and the URL follows
the state after every run (``url_state.publish``).
"""
import streamlit as st

from ui import navigation, presenter, sidebar, state, url_state
from ui.resources import configure_threads, get_engine

st.set_page_config(page_title=navigation.ROOT_TITLE, page_icon=navigation.FAVICON, layout="wide")
configure_threads()  # the app's one thread setting (LLM_EXPLORER_THREADS), once per process
url_state.restore()
state.init()
page = navigation.build()
sidebar.render(get_engine())
presenter.render(navigation.spec_of(page))
url_state.show_notes()
navigation.run(page, after=url_state.publish)
