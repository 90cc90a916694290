"""Work-arounds for two Streamlit races that a fragment's timer (``run_every``) turns into a broken tab under load.

Both were seen with the class heartbeat (``ui.classroom.broadcast``, a fragment on every page, ticking every 0.5 s)
on Streamlit 1.67, in the lesson browser test on a loaded machine, and traced from the websocket's messages and the
server's debug log.

**A tick for a page the tab left blanks the new page.** A tab on page A sends a tick naming page A; the server switches
the session to page B (a follower's ``st.switch_page``) and runs B; the tick arrives while B runs and is run after it,
as a fragment run *on page A* (the fragment still exists: it is drawn on every page). The browser takes that run's
``new_session`` (page A's hash) for a page change and clears the page's elements (the main script's stay, so the
sidebar is left), then redraws only the fragment: the main area stays blank, script idle and socket connected, until
the next full run. Fix: a timer tick that names another page than the session's current one is dropped; the next
tick, 0.5 s later, names the page the tab shows.

**A fragment request that finds the runner finishing loses that run's end.** When a run has ended but the event loop
has not yet handled the runner's last events (its final deltas, the URL's new query, ``script_finished``), the runner
refuses new requests and ``AppSession`` starts a new runner at once; the old runner's pending events are then ignored
("Ignoring event from non-current ScriptRunner"). A follower's tab that had just applied the teacher's next step never
showed it (its URL kept ``step=1``), and its heartbeat saw nothing new. Fix: a fragment's request waits until the old
runner is gone (its ``SHUTDOWN`` handled, which comes after all its events) and is then handed to whichever runner
exists; a timer tick is simply dropped (the next one follows). Full-app reruns are left alone: they redraw everything.

Neither change ever drops a user's input: a press inside a fragment is not a timer tick, and it waits rather than drops.
"""

from __future__ import annotations

import functools

from streamlit.runtime.app_session import AppSession, AppSessionState

_MARK = "_llmx_works_around_fragment_races"
RETRY_S = 0.02  # how often a waiting fragment request looks again for the old runner's end


def is_stale_tick(client_state, current_page_hash: str) -> bool:
    """Whether a rerun request is a fragment's timer tick for a page the session has left."""
    return bool(
        client_state is not None
        and client_state.fragment_id
        and client_state.is_auto_rerun
        and client_state.page_script_hash
        and current_page_hash
        and client_state.page_script_hash != current_page_hash
    )


def is_fragment_request(rerun_data) -> bool:
    return bool(rerun_data.fragment_id or rerun_data.fragment_id_queue)


def _later(session: AppSession, callback, *args) -> None:
    """``callback(*args)`` on the session's event loop in ``RETRY_S`` (safe from any thread)."""
    session._event_loop.call_soon_threadsafe(session._event_loop.call_later, RETRY_S, callback, *args)


def install() -> None:
    """Patch ``AppSession.request_rerun`` and ``AppSession._create_scriptrunner`` once per process (idempotent)."""
    if getattr(AppSession.request_rerun, _MARK, False):
        return
    original_request = AppSession.request_rerun
    original_create = AppSession._create_scriptrunner

    @functools.wraps(original_request)
    def request_rerun(self: AppSession, client_state) -> None:
        if is_stale_tick(client_state, self._pages_manager.current_page_script_hash):
            return
        original_request(self, client_state)

    def hand_over(self: AppSession, rerun_data) -> None:
        """A waiting fragment request: to the runner that exists now, or a new one once the old one is gone."""
        if self._state == AppSessionState.SHUTDOWN_REQUESTED:  # the tab closed meanwhile: nothing to run
            return
        if self._scriptrunner is None:
            original_create(self, rerun_data)
        elif not self._scriptrunner.request_rerun(rerun_data):  # still the finishing one: look again soon
            _later(self, hand_over, self, rerun_data)

    @functools.wraps(original_create)
    def create_scriptrunner(self: AppSession, initial_rerun_data) -> None:
        if self._scriptrunner is None or not is_fragment_request(initial_rerun_data):
            original_create(self, initial_rerun_data)
        elif not initial_rerun_data.is_auto_rerun:
            _later(self, hand_over, self, initial_rerun_data)
        # else: a timer tick that found the runner finishing: dropped, the next tick follows

    setattr(request_rerun, _MARK, True)
    AppSession.request_rerun = request_rerun
    AppSession._create_scriptrunner = create_scriptrunner
