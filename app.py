"""Entry point of the LLM inference explorer: page config, shared state, sidebar, navigation.

Run with ``streamlit run app.py``. Pages live in ``pages/`` and are registered, in
story order, in ``ui/navigation.py``; this file draws what every page shares. A shared
link's settings are read once per session (``url_state.restore``), and the URL follows
the state after every run (``url_state.publish``, through ``classroom.publish``, which also
broadcasts a teacher's view; a follower applies it with ``classroom.follow``).
"""
import streamlit as st

from ui import classroom
from ui.shell import navigation, presenter, sidebar
from ui.session import state, links as url_state
from ui.shell.resources import configure_server, get_engine

st.set_page_config(page_title=navigation.ROOT_TITLE, page_icon=navigation.FAVICON, layout="wide")
configure_server()  # the operator's settings checked, and the app's one thread setting (LLM_EXPLORER_THREADS)
classroom.read_link()  # a teacher-only link's key, checked and dropped before the link is restored
url_state.restore()
state.init()
page = navigation.build()
classroom.follow(navigation.spec_of(page).url_path)  # a follower takes the teacher's view (may switch page)
classroom.render_sidebar()  # first under the page list: a class finds Follow / I am the teacher without scrolling
sidebar.render(get_engine())
presenter.render(navigation.spec_of(page))
url_state.show_notes()
navigation.run(page, after=classroom.publish)
