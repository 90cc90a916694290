"""Work-arounds for Streamlit races that a fragment's timer (``run_every``) turns into a broken tab under load.

All were seen with the class heartbeat (``ui.class_page.broadcast``, a fragment on every page, ticking every 0.5 s)
on Streamlit 1.67, in the lesson browser test on a loaded machine, and traced from the websocket's messages and the
server's debug log.

**A fragment run for a page the tab left blanks the new page.** Streamlit runs a fragment on the page its request
named (``RerunData.page_script_hash``), and the browser takes a fragment run's ``new_session`` that names another page
than the one it shows for a page change: it clears the page's elements (the main script's stay, so the sidebar is
left) and redraws only the fragment. The main area stays blank, script idle and socket connected. Such a run also
makes the old page the session's current page on the server (``ScriptRunContext.reset``), so every later tick, which
names the page the tab shows, is dropped by the first check below: the tab stays blank for good (until a whole-app
run, e.g. a click). Two ways it happens, both checked:

- *At the request.* A tab on page A sends a tick naming A; the server switches the session to page B (a follower's
  ``st.switch_page``) and runs B; the tick arrives while B runs and would run after it. Fix: a timer tick that names
  another page than the session's current one is dropped at once (``is_stale_tick``); the next tick, 0.5 s later,
  names the page the tab shows.
- *In the queue.* A follower's run on page A calls ``st.switch_page(B)``; the script thread takes that request, then
  cleans up after the run (widget state, media files, ``gc.collect``: tens to hundreds of milliseconds under load)
  before B's run makes B the current page. A tick naming A that arrives in that gap passes the first check (the session
  is still on A), is queued, and runs as a fragment run on A right after B's run. Fix: when a run that reruns only
  fragments is about to start (``ScriptRunner._run_script``, in the script thread, which is the only thread that
  changes the current page) and names another page than the current one, a timer tick is not run at all and a
  user's press runs on the current page instead (``stale_fragment_run``).

**A fragment request that finds the runner finishing loses that run's end.** When a run has ended but the event loop
has not yet handled the runner's last events (its final deltas, the URL's new query, ``script_finished``), the runner
refuses new requests and ``AppSession`` starts a new runner at once; the old runner's pending events are then ignored
("Ignoring event from non-current ScriptRunner"). A follower's tab that had just applied the teacher's next step never
showed it (its URL kept ``step=1``), and its heartbeat saw nothing new. Fix: a fragment's request waits until the old
runner is gone (its ``SHUTDOWN`` handled, which comes after all its events) and is then handed to whichever runner
exists; a timer tick is simply dropped (the next one follows). Full-app reruns are left alone: they redraw everything.

**A fragment run that starts before a finished full run reached the browser loses that run's fragment blocks.** When
a run starts, Streamlit clears the session's outgoing queue of what the browser need not see any more; for a run of
fragments it drops every queued element of those fragments, also the ones a full run queued just before it, while
that full run's other elements and its "finished" stay. A heartbeat tick right after a full run, before the server
flushed the queue (tens of milliseconds under load), does this. The browser then gets a finished full run without the
heartbeat's block, removes the old block as stale, and the sidebar's next element (a student's open "I am the
teacher" panel) shifts into its place, where the tick's own block overwrites it: the panel is gone from the page until
the next full run. Seen with the server slowed at random (``scripts/chaos``; docs/testing.md says how it was traced).
Fix: the runs that ended before the new one (up to the queue's last "finished") go to the browser whole, as they do
whenever the server flushed in between; only what comes after is cleared as Streamlit clears it (``ended_runs``).

None of this ever drops a user's input: a press inside a fragment is not a timer tick (it carries its trigger even
when Streamlit folded a later tick into it), it waits rather than drops, and one that finds the session on another page
runs there.
"""

from __future__ import annotations

import dataclasses
import functools
import logging

import streamlit
from google.protobuf.message import Message
from streamlit.runtime.app_session import AppSession, AppSessionState
from streamlit.runtime.scriptrunner.script_runner import ScriptRunner

_MARK = "_llmx_works_around_fragment_races"
# The patches replace private Streamlit methods as this version wrote them: on another version they are not applied
# (a warning in the server's log says so) and tests/test_fragment_races.py fails until they are checked again.
WRITTEN_FOR = "1.67.0"
_log = logging.getLogger(__name__)
RETRY_S = 0.02  # how often a waiting fragment request looks again for the old runner's end
_TRIGGERS = frozenset({"trigger_value", "string_trigger_value", "chat_input_value", "json_trigger_value"})


def _names_another_page(named: str, current_page_hash: str) -> bool:
    """Whether a request or run names a page, and another than the one the session is on."""
    return bool(named and current_page_hash and named != current_page_hash)


def is_stale_tick(client_state, current_page_hash: str) -> bool:
    """Whether a rerun request is a fragment's timer tick for a page the session has left."""
    return bool(
        client_state is not None
        and client_state.fragment_id
        and client_state.is_auto_rerun
        and _names_another_page(client_state.page_script_hash, current_page_hash)
    )


def is_fragment_request(rerun_data) -> bool:
    return bool(rerun_data.fragment_id or rerun_data.fragment_id_queue)


def stale_fragment_run(rerun_data, current_page_hash: str) -> bool:
    """Whether a run about to start reruns only fragments, on another page than the one the session is on."""
    return bool(rerun_data.fragment_id_queue and _names_another_page(rerun_data.page_script_hash, current_page_hash))


def is_timer_tick(rerun_data) -> bool:
    """Whether a run was asked for by fragments' timers only: automatic, and no button or other trigger pressed in it
    (Streamlit keeps the newer request's ``is_auto_rerun`` when it folds two, but keeps the older one's trigger)."""
    return bool(rerun_data.is_auto_rerun) and not _pressed(rerun_data.widget_states)


def _pressed(widget_states) -> bool:
    for state in widget_states.widgets if widget_states is not None else ():
        kind = state.WhichOneof("value")
        if kind in _TRIGGERS:
            value = getattr(state, kind)
            if value.ListFields() if isinstance(value, Message) else value:
                return True
    return False


def ended_runs(messages: list) -> int:
    """How many of a session's queued messages belong to runs that have ended: those up to its last "finished"."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].WhichOneof("type") == "script_finished":
            return index + 1
    return 0


def _later(session: AppSession, callback, *args) -> None:
    """``callback(*args)`` on the session's event loop in ``RETRY_S`` (safe from any thread)."""
    session._event_loop.call_soon_threadsafe(session._event_loop.call_later, RETRY_S, callback, *args)


def install(version: str | None = None) -> bool:
    """Patch ``AppSession.request_rerun``, ``AppSession._create_scriptrunner``, ``AppSession._clear_queue`` and
    ``ScriptRunner._run_script`` once per process (idempotent), on the Streamlit version they were written for only
    (``version``: the running one unless given); whether the patches are in place."""
    if getattr(AppSession.request_rerun, _MARK, False):
        return True
    running = version or streamlit.__version__
    if running != WRITTEN_FOR:
        _log.warning(
            "Streamlit %s is running, and the fragment-race work-arounds (ui/common/fragment_races.py) were written for "
            "%s: they are not applied. Check them against this version's AppSession and ScriptRunner, then update "
            "WRITTEN_FOR.",
            running,
            WRITTEN_FOR,
        )
        return False
    original_request = AppSession.request_rerun
    original_create = AppSession._create_scriptrunner
    original_run = ScriptRunner._run_script
    original_clear = AppSession._clear_queue

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

    @functools.wraps(original_run)
    def run_script(self: ScriptRunner, rerun_data) -> None:
        current = self._pages_manager.current_page_script_hash  # read as the run starts, in its own thread
        if stale_fragment_run(rerun_data, current):
            if is_timer_tick(rerun_data):
                return  # not run: no new_session for a page the tab does not show; the runner takes its next request
            rerun_data = dataclasses.replace(rerun_data, page_script_hash=current, page_name="")
        original_run(self, rerun_data)

    @functools.wraps(original_clear)
    def clear_queue(self: AppSession, fragment_ids_this_run: list[str] | None = None) -> None:
        queue = self._browser_queue
        ended = ended_runs(queue._queue) if fragment_ids_this_run else 0
        if not ended:  # a full run (which redraws everything), or nothing ended in the queue: as Streamlit does
            original_clear(self, fragment_ids_this_run)
            return
        kept, queue._queue = queue._queue[:ended], queue._queue[ended:]
        original_clear(self, fragment_ids_this_run)  # the rest, as Streamlit clears it (its delta index reset)
        queue._queue = kept + queue._queue

    setattr(request_rerun, _MARK, True)
    AppSession.request_rerun = request_rerun
    AppSession._create_scriptrunner = create_scriptrunner
    AppSession._clear_queue = clear_queue
    ScriptRunner._run_script = run_script
    return True
