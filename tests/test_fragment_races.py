"""The work-arounds for two Streamlit fragment races (``ui.shell.fragment_races``), on fake sessions and runners.

1. A fragment's timer tick that names a page the session has left is dropped; every other request reaches Streamlit.
2. A fragment's request that finds the runner finishing never replaces it (that would drop the finished run's last
   messages): a timer tick is dropped, a press waits for the old runner to be gone and is then handed on.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.runtime.app_session import AppSession, AppSessionState
from streamlit.runtime.scriptrunner_utils.script_requests import RerunData

from ui.shell import fragment_races

PAGE_A, PAGE_B = "a" * 32, "b" * 32


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
    """Both methods replaced by recorders, then wrapped by ``install`` (twice: idempotent)."""
    received, created = [], []
    monkeypatch.setattr(AppSession, "request_rerun", lambda self, client_state: received.append(client_state))
    monkeypatch.setattr(AppSession, "_create_scriptrunner", lambda self, data: created.append(data))
    fragment_races.install()
    fragment_races.install()
    return SimpleNamespace(received=received, created=created)


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


def test_the_patch_reads_attributes_streamlit_has():
    """The attributes the patch reads exist on Streamlit's classes (an upgrade that renames one fails here, not
    silently in a class)."""
    from streamlit.runtime.pages_manager import PagesManager

    assert hasattr(PagesManager, "current_page_script_hash")
    names = AppSession.__init__.__code__.co_names
    assert {"_pages_manager", "_scriptrunner", "_event_loop", "_state"} <= set(names)
    assert hasattr(AppSession, "_create_scriptrunner")
