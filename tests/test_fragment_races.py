"""The work-arounds for Streamlit's fragment races (``ui.common.fragment_races``), on fake sessions and runners.

1. A fragment's timer tick that names a page the session has left is dropped; every other request reaches Streamlit.
2. A run of fragments only that is about to start on another page than the session's (a tick queued in the gap
   between a page switch and the next page's run) is not run if it is a timer tick, and runs on the session's page if
   it is a press; every other run starts as asked.
3. A fragment's request that finds the runner finishing never replaces it (that would drop the finished run's last
   messages): a timer tick is dropped, a press waits for the old runner to be gone and is then handed on.
4. A run of fragments that starts while runs that ended are still queued for the browser leaves those runs whole;
   what comes after them, and the queue at a full run's start, are cleared as Streamlit clears them.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
from types import SimpleNamespace

import pytest
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState, WidgetStates
from streamlit.runtime.app_session import AppSession, AppSessionState
from streamlit.runtime.forward_msg_queue import ForwardMsgQueue
from streamlit.runtime.scriptrunner.script_runner import ScriptRunner
from streamlit.runtime.scriptrunner_utils.script_requests import RerunData, ScriptRequests, ScriptRequestType

from ui.common import fragment_races

PAGE_A, PAGE_B = "a" * 32, "b" * 32
STREAMLIT_CLEAR = inspect.unwrap(AppSession._clear_queue)  # Streamlit's own, also where app.py patched it already


def _request(page: str, fragment: str = "", auto: bool = False) -> ClientState:
    return ClientState(page_script_hash=page, fragment_id=fragment, is_auto_rerun=auto)


class _Runner:
    """A script runner that accepts requests until it has stopped."""

    def __init__(self, stopped: bool = False) -> None:
        self.stopped, self.requests = stopped, []

    def request_rerun(self, rerun_data) -> bool:
        if self.stopped:
            return False
        self.requests.append(rerun_data)
        return True


@pytest.fixture
def patched(monkeypatch):
    """The three methods replaced by recorders, then wrapped by ``install`` (twice: idempotent)."""
    received, created, ran = [], [], []
    monkeypatch.setattr(AppSession, "request_rerun", lambda self, client_state: received.append(client_state))
    monkeypatch.setattr(AppSession, "_create_scriptrunner", lambda self, data: created.append(data))
    monkeypatch.setattr(ScriptRunner, "_run_script", lambda self, data: ran.append(data))
    monkeypatch.setattr(AppSession, "_clear_queue", STREAMLIT_CLEAR)
    fragment_races.install()
    fragment_races.install()
    return SimpleNamespace(received=received, created=created, ran=ran)


def _session(page: str = PAGE_B, runner: _Runner | None = None, loop=None) -> SimpleNamespace:
    return SimpleNamespace(
        _pages_manager=SimpleNamespace(current_page_script_hash=page),
        _scriptrunner=runner,
        _event_loop=loop,
        _state=AppSessionState.APP_IS_RUNNING,
    )


def test_a_tick_for_a_page_the_session_left_is_dropped(patched):
    AppSession.request_rerun(_session(PAGE_B), _request(PAGE_A, fragment="heartbeat", auto=True))
    assert patched.received == []


@pytest.mark.parametrize(
    "request_, on",
    [
        (_request(PAGE_B, fragment="heartbeat", auto=True), PAGE_B),  # a tick for the page the session is on
        (_request(PAGE_A, fragment="draw", auto=False), PAGE_B),  # a press in a fragment: a user's input, kept
        (_request(PAGE_A), PAGE_B),  # a full run (a page link, a reload): never dropped
        (_request(PAGE_A, fragment="heartbeat", auto=True), ""),  # before the session's first run
        (_request("", fragment="heartbeat", auto=True), PAGE_B),  # a tick that names no page
        (None, PAGE_B),  # Streamlit's own rerun with the previous client state
    ],
)
def test_every_other_request_reaches_streamlit(patched, request_, on):
    AppSession.request_rerun(_session(on), request_)
    assert patched.received == [request_]


def _runner(page: str = PAGE_B) -> SimpleNamespace:
    """A script runner whose session is on ``page`` (the page its last run made current)."""
    return SimpleNamespace(_pages_manager=SimpleNamespace(current_page_script_hash=page))


PRESSED = WidgetStates(widgets=[WidgetState(id="$$ID-draw", trigger_value=True)])
NOT_PRESSED = WidgetStates(widgets=[WidgetState(id="$$ID-draw", trigger_value=False), WidgetState(id="t", int_value=3)])


def test_a_tick_queued_in_the_gap_of_a_page_switch_is_not_run(patched):
    """The traced sequence, with Streamlit's own request queue: a follower's run on page A has asked to switch to B, and
    the script thread has taken that request but not yet started B's run, so the session is still on A. A heartbeat
    tick naming A arrives: it passes the request's check and is queued. B's run makes B current; when it ends, the
    queued tick would run as a fragment run on A (the browser clears the page it shows, and the session would be on A,
    dropping every later tick that names B). It is not run."""
    requests = ScriptRequests()
    requests.request_rerun(RerunData(page_script_hash=PAGE_B))  # st.switch_page(B), in the run on A
    switch = requests.on_scriptrunner_yield()  # the script thread takes it; B's run has not started
    assert switch.type == ScriptRequestType.RERUN and switch.rerun_data.page_script_hash == PAGE_B
    tick = _request(PAGE_A, fragment="heartbeat", auto=True)
    assert not fragment_races.is_stale_tick(tick, PAGE_A)  # the session is still on A: the request passes
    assert requests.request_rerun(
        RerunData(page_script_hash=tick.page_script_hash, fragment_id=tick.fragment_id, is_auto_rerun=True)
    )  # queued behind the switch
    queued = requests.on_scriptrunner_ready()  # B's run has ended (and made B the current page)
    assert queued.rerun_data.fragment_id_queue == ["heartbeat"] and queued.rerun_data.page_script_hash == PAGE_A
    ScriptRunner._run_script(_runner(PAGE_B), queued.rerun_data)
    assert patched.ran == []


@pytest.mark.parametrize("widgets", [PRESSED, None], ids=["a press folded with a later tick", "a press"])
def test_a_press_queued_for_a_page_the_session_left_runs_on_the_current_page(patched, widgets):
    """A user's press is never dropped: it runs, on the page the session (and the tab) is on."""
    auto = widgets is not None  # Streamlit keeps the newer request's is_auto_rerun, and the older one's trigger
    press = RerunData(
        page_script_hash=PAGE_A, page_name="class", fragment_id_queue=["draw"], is_auto_rerun=auto,
        widget_states=widgets,
    )  # fmt: skip
    ScriptRunner._run_script(_runner(PAGE_B), press)
    [ran] = patched.ran
    assert (ran.page_script_hash, ran.page_name, ran.fragment_id_queue) == (PAGE_B, "", ["draw"])
    assert ran.widget_states is widgets and ran.is_auto_rerun is auto


@pytest.mark.parametrize(
    "run, on",
    [
        (RerunData(page_script_hash=PAGE_A), PAGE_B),  # a whole-app run on another page: a page switch
        (RerunData(page_script_hash=PAGE_A, fragment_id_queue=["heartbeat"], is_auto_rerun=True), PAGE_A),  # its page
        (RerunData(fragment_id_queue=["heartbeat"], is_auto_rerun=True), PAGE_B),  # a run that names no page
        (RerunData(page_script_hash=PAGE_A, fragment_id_queue=["heartbeat"], is_auto_rerun=True), ""),  # first run
        (
            RerunData(page_script_hash=PAGE_A, fragment_id_queue=["h"], is_auto_rerun=True, widget_states=NOT_PRESSED),
            PAGE_A,
        ),  # a tick with the tab's widget values, on its page
    ],
)
def test_every_other_run_starts_as_asked(patched, run, on):
    ScriptRunner._run_script(_runner(on), run)
    assert patched.ran == [run]


def test_a_tick_with_the_tabs_widget_values_is_still_a_tick(patched):
    ScriptRunner._run_script(
        _runner(PAGE_B),
        RerunData(page_script_hash=PAGE_A, fragment_id_queue=["h"], is_auto_rerun=True, widget_states=NOT_PRESSED),
    )
    assert patched.ran == []


def test_a_runner_is_created_as_before_when_none_exists_or_for_a_full_run(patched):
    tick = RerunData(fragment_id="heartbeat", is_auto_rerun=True)
    full = RerunData(page_script_hash=PAGE_B)
    AppSession._create_scriptrunner(_session(runner=None), tick)  # no runner left: the tick starts one
    AppSession._create_scriptrunner(_session(runner=_Runner(stopped=True)), full)  # a full run replaces it
    assert patched.created == [tick, full]


def test_a_tick_that_finds_the_runner_finishing_is_dropped(patched):
    AppSession._create_scriptrunner(
        _session(runner=_Runner(stopped=True)), RerunData(fragment_id="heartbeat", is_auto_rerun=True)
    )
    assert patched.created == []


def test_a_press_waits_for_the_finishing_runner_then_goes_on(patched):
    """A fragment press that finds the runner finishing is handed on once the old runner is gone (to a new runner), or
    to a runner that accepts it; run on a real event loop."""

    async def scenario() -> tuple[list, list, list]:
        session = _session(runner=_Runner(stopped=True), loop=asyncio.get_running_loop())
        press = RerunData(fragment_id="draw", is_auto_rerun=False)
        AppSession._create_scriptrunner(session, press)
        await asyncio.sleep(5 * fragment_races.RETRY_S)
        waited = list(patched.created)  # the old runner is still there: nothing created yet
        session._scriptrunner = None  # its SHUTDOWN handled
        await asyncio.sleep(5 * fragment_races.RETRY_S)
        created = list(patched.created)
        accepting = _Runner()  # a runner that was created meanwhile and accepts requests
        session._scriptrunner = _Runner(stopped=True)
        AppSession._create_scriptrunner(session, press)
        session._scriptrunner = accepting
        await asyncio.sleep(5 * fragment_races.RETRY_S)
        return waited, created, accepting.requests

    waited, created, handed = asyncio.run(scenario())
    assert waited == []
    assert [data.fragment_id for data in created] == ["draw"]
    assert [data.fragment_id for data in handed] == ["draw"]


def test_a_waiting_press_is_dropped_when_the_session_closes(patched):
    async def scenario() -> list:
        session = _session(runner=_Runner(stopped=True), loop=asyncio.get_running_loop())
        AppSession._create_scriptrunner(session, RerunData(fragment_id="draw", is_auto_rerun=False))
        session._state, session._scriptrunner = AppSessionState.SHUTDOWN_REQUESTED, None  # the tab closed
        await asyncio.sleep(5 * fragment_races.RETRY_S)
        return list(patched.created)

    assert asyncio.run(scenario()) == []


# -- 4. runs that ended stay whole in the browser's queue --------------------------------------------------------
HEARTBEAT = "heartbeat-fragment"
DONE, FRAGMENT_DONE = ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY


def _started(page: str = PAGE_B) -> ForwardMsg:
    msg = ForwardMsg()
    msg.new_session.page_script_hash = page
    return msg


def _element(path: tuple[int, ...], text: str, fragment: str = "") -> ForwardMsg:
    msg = ForwardMsg()
    msg.metadata.delta_path[:] = path
    msg.delta.new_element.markdown.body = text
    msg.delta.fragment_id = fragment
    return msg


def _finished(status=DONE) -> ForwardMsg:
    msg = ForwardMsg()
    msg.script_finished = status
    return msg


def _full_run() -> list[ForwardMsg]:
    """A full run as Streamlit queues it: the sidebar's heartbeat block between two of the sidebar's elements."""
    return [
        _started(),
        _element((1, 1), "Follow the teacher"),
        _element((1, 2, 0), "Following the teacher", HEARTBEAT),
        _element((1, 3), "I am the teacher"),
        _finished(),
    ]


def _shown(queue: ForwardMsgQueue) -> list[tuple]:
    values = {
        "delta": lambda m: m.delta.new_element.markdown.body,
        "script_finished": lambda m: m.script_finished,
        "new_session": lambda m: m.new_session.page_script_hash,
    }
    return [(m.WhichOneof("type"), values[m.WhichOneof("type")](m)) for m in queue._queue]


def _queued(messages: list[ForwardMsg]) -> SimpleNamespace:
    """A session whose browser queue holds ``messages`` as queued one run after another (each run's start cleared the
    queue's delta index, so no delta of a later run was composed into an earlier one's)."""
    queue = ForwardMsgQueue()
    queue._queue = [copy.deepcopy(msg) for msg in messages]
    return SimpleNamespace(_browser_queue=queue)


def test_streamlit_alone_drops_a_finished_full_runs_fragment_block(monkeypatch):
    """The race itself, on Streamlit's own clear: a heartbeat run starting before the full run was flushed takes the
    heartbeat's block out of that run, whose "finished" stays (the browser then drops the old block as stale)."""
    monkeypatch.setattr(AppSession, "_clear_queue", STREAMLIT_CLEAR)
    session = _queued(_full_run())
    AppSession._clear_queue(session, [HEARTBEAT])
    assert "Following the teacher" not in [body for _, body in _shown(session._browser_queue)]
    assert ("script_finished", DONE) in _shown(session._browser_queue)


def test_a_fragment_run_leaves_the_runs_that_ended_whole(patched):
    session = _queued(_full_run())
    before = _shown(session._browser_queue)
    AppSession._clear_queue(session, [HEARTBEAT])
    assert _shown(session._browser_queue) == before  # every element, in order, and "finished" as it was
    session._browser_queue.enqueue(_started())  # the heartbeat's own run follows them (no delta composed into them)
    session._browser_queue.enqueue(_element((1, 2, 0), "Following the teacher, again", HEARTBEAT))
    assert _shown(session._browser_queue)[: len(before)] == before
    assert _shown(session._browser_queue)[-1] == ("delta", "Following the teacher, again")


def test_after_the_last_finished_and_at_a_full_runs_start_the_queue_is_cleared_as_streamlit_clears_it(patched):
    ended = [*_full_run()[:-1], _finished(FRAGMENT_DONE)]
    after = [_started(), _element((1, 2, 0), "half a heartbeat", HEARTBEAT), _element((0, 0), "half a page")]
    for fragments in ([HEARTBEAT], None):
        ours, theirs = _queued(ended + after), _queued(after if fragments else ended + after)
        AppSession._clear_queue(ours, fragments)
        STREAMLIT_CLEAR(theirs, fragments)
        expected = ([*map(_shown_one, ended)] if fragments else []) + _shown(theirs._browser_queue)
        assert _shown(ours._browser_queue) == expected, fragments
    empty = _queued([])
    AppSession._clear_queue(empty, [HEARTBEAT])
    assert empty._browser_queue._queue == []


def _shown_one(msg: ForwardMsg) -> tuple:
    return _shown(SimpleNamespace(_queue=[msg]))[0]


def test_the_patch_reads_attributes_streamlit_has():
    """The attributes the patch reads exist on Streamlit's classes (an upgrade that renames one fails here, not
    silently in a class)."""
    from streamlit.runtime.pages_manager import PagesManager

    assert hasattr(PagesManager, "current_page_script_hash")
    names = AppSession.__init__.__code__.co_names
    assert {"_pages_manager", "_scriptrunner", "_event_loop", "_state"} <= set(names)
    assert hasattr(AppSession, "_create_scriptrunner")
    assert "_pages_manager" in ScriptRunner.__init__.__code__.co_names
    assert list(inspect.signature(ScriptRunner._run_script).parameters) == ["self", "rerun_data"]
    assert list(inspect.signature(STREAMLIT_CLEAR).parameters) == ["self", "fragment_ids_this_run"]
    assert "_browser_queue" in names and "_queue" in ForwardMsgQueue.__init__.__code__.co_names


def test_the_patches_are_written_for_the_streamlit_that_runs():
    """An upgrade of Streamlit fails here until the patches are checked against it and WRITTEN_FOR follows."""
    import streamlit

    assert streamlit.__version__ == fragment_races.WRITTEN_FOR, (
        f"Streamlit {streamlit.__version__} is pinned, the fragment-race patches were written for "
        f"{fragment_races.WRITTEN_FOR}: check them against this version, then update WRITTEN_FOR"
    )


def test_on_another_streamlit_the_patches_are_not_applied_and_a_warning_says_so(monkeypatch, caplog):
    sentinel = [lambda self, client_state: None, lambda self, data: None, lambda self, data: None, STREAMLIT_CLEAR]
    monkeypatch.setattr(AppSession, "request_rerun", sentinel[0])
    monkeypatch.setattr(AppSession, "_create_scriptrunner", sentinel[1])
    monkeypatch.setattr(ScriptRunner, "_run_script", sentinel[2])
    monkeypatch.setattr(AppSession, "_clear_queue", sentinel[3])
    with caplog.at_level("WARNING", logger=fragment_races.__name__):
        assert fragment_races.install(version="1.99.0") is False
    patched = [AppSession.request_rerun, AppSession._create_scriptrunner, ScriptRunner._run_script]
    assert [*patched, AppSession._clear_queue] == sentinel
    assert "Streamlit 1.99.0" in caplog.text and "not applied" in caplog.text
    assert fragment_races.install() is True and AppSession.request_rerun is not sentinel[0]  # the pinned one: applied
