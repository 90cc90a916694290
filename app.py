"""Entry point of the LLM inference explorer: page config, shared state, sidebar, navigation.

Run with ``streamlit run app.py``. Pages live in ``pages/`` and are registered, in
story order, in ``ui/common/navigation.py``; this file draws what every page shares. A shared
link's settings are read once per session (``links.restore``), and the URL follows
the state after every run (``links.publish``, through ``broadcast.publish``, which also
broadcasts a teacher's view; a follower applies it with ``broadcast.follow``).
"""

import streamlit as st

from ui.class_page import broadcast
from ui.common import fragment_races, models, navigation, presenter, sidebar, state
from ui.common.resources import client_with_notice, configure_server
from ui.session import links

fragment_races.install()  # before a tab's first fragment tick (Streamlit races that break a tab under load)

st.set_page_config(page_title=navigation.ROOT_TITLE, page_icon=navigation.FAVICON, layout="wide")
configure_server()  # the operator's settings checked, and the app's one thread setting (LLM_EXPLORER_THREADS)
broadcast.read_link()  # a teacher-only link's key, checked and dropped before the link is restored
links.restore()
state.init()
page = navigation.build()
broadcast.follow(navigation.spec_of(page).url_path)  # a follower takes the teacher's view (may switch page)
broadcast.render_sidebar()  # first under the page list: a class finds Follow / I am the teacher without scrolling
sidebar.render(client_with_notice(models.current()))  # a spinner while the model loads, here or in another session
presenter.render(navigation.spec_of(page))
links.show_notes()
navigation.run(page, after=broadcast.publish)
