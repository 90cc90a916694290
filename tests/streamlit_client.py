"""A headless Streamlit user: speaks the app's websocket protocol the way the browser does.

Owns ``StreamlitSession`` (one browser tab: a websocket to ``/_stcore/stream``, the
widget states the tab would hold, the page it is on) and ``Run`` (what one script run
drew). No browser and no new dependency: the protobufs come from the installed
``streamlit.proto`` and the socket from ``websockets`` (a dependency of streamlit).

The protocol, as the frontend uses it:
- every interaction is one ``BackMsg.rerun_script`` (a ``ClientState``): the page
  (``page_name`` = the url path, e.g. ``attention``), the URL's query string (the
  app may rewrite it, ``page_info_changed``) and the value of every widget the tab
  has a state for, the changed one included;
- the server answers with ForwardMsgs: ``new_session`` (a run starts), ``delta``
  (an element at a ``delta_path``), ... and ``script_finished``; a run cut short
  by ``st.rerun()`` ends with ``FINISHED_EARLY_FOR_RERUN`` and the next run follows
  on its own, so a run is over at the first other ``script_finished``;
- a fragment with ``run_every`` announces itself (``auto_rerun``: its id and interval); the browser
  then sends ``rerun_script`` with that ``fragment_id`` on a timer (``StreamlitSession.poll``);
- every whole-app run names its page in a ``navigation`` message (page script hash -> url path), so
  a page switched by the app (``st.switch_page``) is followed like the address bar follows it;
- widget ids look like ``$$ID-<hash>-<user key>``; widgets are found here by the
  user key (``_w_prompt``, ``_w_temperature``);
- values go in the field the frontend uses: text → ``string_value``, slider →
  ``double_array_value``, number input → ``double_value``, toggle/checkbox →
  ``bool_value``, button → ``trigger_value`` (sent once, like a click).

Through a proxy, a tab is also its cookies: ``cookies`` are what the browser holds (the app's own, like
``llmx_student``, which the app writes by a script this client cannot run), and with ``load_page`` the session
first loads ``GET /`` as the browser does and keeps the cookies it sets (HAProxy's ``SERVERID``, the replica the
tab sticks to); the websocket sends them all. ``reconnect()`` is the browser's reconnect after its socket dropped
(a replica died): a new socket with the same cookies, then the page again, with the widget states the tab holds.
The cookies an app writes by a script in an ``st.iframe`` (``document.cookie = "name=value; ...; max-age=N"``) are
kept as the browser keeps them, so a tab reconnects as the student (and the teacher) the app made it.

Used by the load test (``tests/test_load.py``), the load benchmark (``scripts/bench_load.py``) and the proxy test
(``tests/test_school_proxy.py``).
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.Element_pb2 import Element
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

_EARLY_FOR_RERUN = ForwardMsg.ScriptFinishedStatus.FINISHED_EARLY_FOR_RERUN
_FRAGMENT_DONE = ForwardMsg.ScriptFinishedStatus.FINISHED_FRAGMENT_RUN_SUCCESSFULLY
_ERROR_ALERT = 1  # Alert.Format.ERROR
_TEXT_FIELDS = {"markdown": "body", "heading": "body", "text": "body", "alert": "body", "code": "code_text"}
# A cookie an app's script writes (``document.cookie = "name=value; path=/; ...; max-age=N";``, as the class mode's
# ``ui.class_page.broadcast._cookie_script`` does in an ``st.iframe``): this client keeps it, as the browser would.
_COOKIE_SCRIPT = re.compile(r'document\.cookie = "([A-Za-z0-9_]+)=([^;"]*);[^"]*?max-age=(\d+)"')


class ProtocolError(RuntimeError):
    """The server said something a browser tab could not have handled."""


@dataclass
class Run:
    """What one script run drew, in the order of its delta paths."""

    page: str
    seconds: float  # from sending the rerun to its script_finished
    elements: dict[tuple[int, ...], Element] = field(default_factory=dict)
    full: bool = True  # a whole-app run (False: only a fragment reran, ``elements`` holds its part)

    def of_type(self, kind: str) -> list[Element]:
        return [el for _, el in sorted(self.elements.items()) if el.WhichOneof("type") == kind]

    @property
    def element_ids(self) -> dict[str, str]:
        """Element id → element type, for every widget or chart of the run."""
        ids = {}
        for el in self.elements.values():
            kind = el.WhichOneof("type")
            element_id = getattr(getattr(el, kind), "id", "")
            if isinstance(element_id, str) and element_id:
                ids[element_id] = kind
        return ids

    @property
    def widget_ids(self) -> dict[str, str]:
        """User key → element id, for every keyed widget or chart of the run (ids end in ``-<key>``)."""
        return {
            element_id.split("-", 2)[2]: element_id
            for element_id in self.element_ids
            if element_id.startswith("$$ID-") and element_id.count("-") >= 2
        }

    def chart(self, key: str) -> dict:
        """The Plotly figure (as a dict) of the chart drawn with ``key=``."""
        for el in self.of_type("plotly_chart"):
            if el.plotly_chart.id.endswith("-" + key):
                return json.loads(el.plotly_chart.spec)
        raise KeyError(f"no chart with key {key!r} on {self.page}")

    def texts(self, skip_charts: frozenset[str] = frozenset(), skip_prefixes: tuple[str, ...] = ()) -> list[str]:
        """Every visible text: markdown, headings, alerts, captions and chart specs (JSON, unescaped),
        without the charts keyed ``skip_charts`` and the texts that start with one of ``skip_prefixes``."""
        out = []
        for _, el in sorted(self.elements.items()):
            kind = el.WhichOneof("type")
            if kind in _TEXT_FIELDS:
                text = getattr(getattr(el, kind), _TEXT_FIELDS[kind])
                if not text.startswith(skip_prefixes):
                    out.append(text)
            elif kind == "plotly_chart" and el.plotly_chart.id.split("-", 2)[-1] not in skip_charts:
                out.append(json.dumps(json.loads(el.plotly_chart.spec), ensure_ascii=False))
        return out

    @property
    def problems(self) -> list[str]:
        """Exceptions and error alerts shown to the user (empty when the run went well)."""
        found = [f"exception {el.exception.type}: {el.exception.message}" for el in self.of_type("exception")]
        found += [f"error: {el.alert.body}" for el in self.of_type("alert") if el.alert.format == _ERROR_ALERT]
        return found


class StreamlitSession:
    """One browser tab on a running app: open pages, type, move sliders, click buttons."""

    def __init__(
        self, base_url: str, timeout: float = 120.0, cookies: dict[str, str] | None = None, load_page: bool = False
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.cookies = dict(cookies or {})  # name -> value, sent with the websocket (and the page load)
        self.load_page = load_page
        self.timeout = timeout
        self.page = ""
        self.query_string = ""  # the address bar's query, as the app last set it (st.query_params)
        self.last: Run | None = None
        self.fragments: dict[str, float] = {}  # fragment id -> seconds between its automatic reruns (run_every)
        self._fragment_ran: dict[str, float] = {}  # fragment id -> perf_counter() of its last run (its timer's start)
        self._pages: dict[str, str] = {}  # page script hash -> url path, from the app's navigation message
        self._states: dict[str, WidgetState] = {}  # widget id -> the value this tab holds
        self._kinds: dict[str, str] = {}  # widget id -> element type, from the last run that drew it
        self._socket = self._connect()

    # -- what a user does ------------------------------------------------------------
    def open(self, page: str) -> Run:
        """Go to a page by its url path ('' = the default page), as a click in the sidebar does."""
        self.page = page
        return self._rerun()

    def set(self, key: str, value: Any) -> Run:
        """Change the widget with user key ``key`` (``_w_temperature``) to ``value``; the app reruns."""
        widget_id = self._widget_id(key)
        self._states[widget_id] = _widget_state(widget_id, self._kinds[widget_id], value)
        return self._rerun()

    def click(self, key: str) -> Run:
        """Press the button with user key ``key``."""
        widget_id = self._widget_id(key)
        state = WidgetState(id=widget_id, trigger_value=True)
        return self._rerun(extra=[state])

    def poll(self) -> Run:
        """Rerun the page's timed fragments that are due, as the browser's timers do (``st.fragment(run_every=...)``:
        each every its own interval; at least the one due first).

        A fragment that calls ``st.rerun()`` turns this into a whole-app run (``Run.full``); the app may
        also have switched the page (``st.switch_page``): ``self.page`` follows, as the address bar does.
        """
        if not self.fragments:
            raise ProtocolError(f"page {self.page!r} has no timed fragment to rerun")
        now = time.perf_counter()
        due_at = {fid: self._fragment_ran.get(fid, 0.0) + every for fid, every in self.fragments.items()}
        due = [fid for fid, at in due_at.items() if at <= now + 0.05] or [min(due_at, key=due_at.get)]
        run = None
        for fragment_id in due:
            run = self._rerun(fragment_id=fragment_id)
            self._fragment_ran[fragment_id] = time.perf_counter()
            if run.full:
                break
        return run

    def reconnect(self, within_s: float = 10.0) -> Run:
        """The browser's reconnect: new sockets (with this tab's cookies) until one opens, within ``within_s``, then
        the page again, with the widget states the tab holds (a new server session: the app reruns from them)."""
        self._socket.close()
        deadline = time.monotonic() + within_s
        while True:
            try:
                self._socket = self._connect()
                break
            except (OSError, TimeoutError, ConnectionError, InvalidStatus):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        return self._rerun()

    def close(self) -> None:
        self._socket.close()

    def _connect(self):
        """The page load (``load_page``: ``GET /``, keeping the cookies it sets), then the websocket, with the cookies."""
        if self.load_page:
            with urllib.request.urlopen(self._request(self.base_url + "/"), timeout=self.timeout) as response:
                for header in response.headers.get_all("Set-Cookie") or []:
                    self.cookies.update({name: morsel.value for name, morsel in SimpleCookie(header).items()})
        headers = {"Cookie": self._cookie_header()} if self.cookies else None
        ws_url = self.base_url.replace("http://", "ws://") + "/_stcore/stream"
        return connect(
            ws_url, subprotocols=["streamlit"], max_size=None, open_timeout=self.timeout, additional_headers=headers
        )

    def _request(self, url: str) -> urllib.request.Request:
        return urllib.request.Request(url, headers={"Cookie": self._cookie_header()} if self.cookies else {})

    def _cookie_header(self) -> str:
        return "; ".join(f"{name}={value}" for name, value in self.cookies.items())

    def __enter__(self) -> StreamlitSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the protocol ------------------------------------------------------------------
    def _widget_id(self, key: str) -> str:
        if self.last is None or key not in self.last.widget_ids:
            raise KeyError(f"no widget with key {key!r} on page {self.page!r}")
        return self.last.widget_ids[key]

    def _rerun(self, extra: list[WidgetState] | None = None, fragment_id: str = "") -> Run:
        message = BackMsg()
        message.rerun_script.page_name = self.page
        # and the page's script hash, as the browser sends it: a fragment run resolves no page from its name, so
        # a whole-app rerun it asks for (st.rerun() in a fragment) would land on the default page without it
        hashes = {path: script_hash for script_hash, path in self._pages.items()}
        if fragment_id and self.page in hashes:
            message.rerun_script.page_script_hash = hashes[self.page]
        message.rerun_script.query_string = self.query_string
        message.rerun_script.widget_states.widgets.extend(list(self._states.values()) + (extra or []))
        if fragment_id:
            message.rerun_script.fragment_id = fragment_id
            message.rerun_script.is_auto_rerun = True
        started = time.perf_counter()
        self._socket.send(message.SerializeToString())
        run = self._collect(started, fragment=bool(fragment_id))
        if run.full:
            self.last = run
            self._forget_widgets_not_drawn(run)
        return run

    def _collect(self, started: float, fragment: bool = False) -> Run:
        """Read ForwardMsgs until the run (and any st.rerun() it triggered) has finished."""
        run = Run(self.page, 0.0, full=not fragment)
        announced: dict[str, float] = {}
        deadline = started + self.timeout
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise TimeoutError(f"page {self.page!r} did not finish within {self.timeout:.0f} s")
            msg = ForwardMsg()
            msg.ParseFromString(self._socket.recv(timeout=remaining))
            kind = msg.WhichOneof("type")
            if kind == "new_session":
                run.elements.clear()  # a new run (e.g. after st.rerun()) redraws the page
                announced = {}
            elif kind == "navigation":
                self._pages = {p.page_script_hash: p.url_pathname for p in msg.navigation.app_pages}
                self.page = run.page = self._pages.get(msg.navigation.page_script_hash, self.page)
            elif kind == "auto_rerun":
                announced[msg.auto_rerun.fragment_id] = msg.auto_rerun.interval
            elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
                run.elements[tuple(msg.metadata.delta_path)] = msg.delta.new_element
                if msg.delta.new_element.WhichOneof("type") == "iframe":
                    self._run_cookie_script(msg.delta.new_element.iframe.srcdoc)
            elif kind == "page_info_changed":  # the app wrote st.query_params: the browser's URL follows
                self.query_string = msg.page_info_changed.query_string
            elif kind == "page_not_found":
                raise ProtocolError(f"page not found: {msg.page_not_found.page_name!r}")
            elif kind == "ref_hash":
                raise ProtocolError("the server sent a cached-message reference; this client caches nothing")
            elif kind == "script_finished" and msg.script_finished != _EARLY_FOR_RERUN:
                run.seconds = time.perf_counter() - started
                run.full = msg.script_finished != _FRAGMENT_DONE
                if run.full:  # a whole-app run announces every timed fragment it drew (and drops the others)
                    self.fragments = announced
                    self._fragment_ran = {fid: time.perf_counter() for fid in announced}  # their timers start now
                return run

    def _run_cookie_script(self, html: str) -> None:
        """The cookies an app's script in an iframe writes (max-age 0 deletes one), kept for the next connection."""
        for name, value, max_age in _COOKIE_SCRIPT.findall(html):
            if int(max_age) and value:
                self.cookies[name] = value
            else:
                self.cookies.pop(name, None)

    def _forget_widgets_not_drawn(self, run: Run) -> None:
        """Like the frontend: a widget that is not on the page any more loses its state."""
        self._kinds = run.element_ids
        self._states = {widget_id: state for widget_id, state in self._states.items() if widget_id in self._kinds}


def _widget_state(widget_id: str, kind: str, value: Any) -> WidgetState:
    """The WidgetState the frontend would send for ``value`` in a widget of type ``kind``."""
    state = WidgetState(id=widget_id)
    if kind in ("text_area", "text_input"):
        state.string_value = str(value)
    elif kind == "slider":
        state.double_array_value.data[:] = [float(v) for v in (value if isinstance(value, (list, tuple)) else [value])]
    elif kind == "number_input":
        state.double_value = float(value)
    elif kind == "checkbox":
        state.bool_value = bool(value)
    else:
        raise NotImplementedError(f"setting a {kind} is not supported by this client")
    return state
