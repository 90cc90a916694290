"""A class on one server: the teacher key, broadcasting the teacher's view, following it, and who is who.

Owns the session side of ``ui.classroom.room.Room`` (one per server process, ``room()``):

- **The teacher key** is set by the operator (``LLM_EXPLORER_TEACHER_KEY``); with none, broadcasting is
  off (the Class page says so). A session becomes the teacher's by entering the key once in the sidebar
  or by opening the teacher-only link ``?teacher=<key>``. The link's key is read once and its history
  entry replaced (``_FORGET_LINK_JS``: ``history.replaceState``, not a new entry, so Back does not send
  it again). Keys are compared exactly, with ``hmac.compare_digest``: a key typed with spaces around it is refused
  with a message, not stripped (the operator's key never has them, so such a key is a paste slip, said at once). A
  wrong key gets a clear message and changes nothing; after ``MAX_KEY_TRIES`` different wrong keys a session is not
  asked again (the same wrong key again, or a click Streamlit delivered twice, is answered but costs no try). Across
  sessions and replicas the room's back-off holds (``RoomStore.claim_key_try``, per address and for the class); while
  the room is out of reach no key is checked (its try could not be counted; a teacher without the room could not
  broadcast anyway).
  Refusals stay on screen until read (an OK button), whatever reruns the page meanwhile. A second teacher (another
  browser) broadcasting at the same time is warned, as is the first (``RoomStore.teaching``).
- **Broadcast**: after every run of the teacher's session (``publish``), the room gets its page and the
  link parameters its view publishes (``ui.session.links.current_query``, presenter mode left out), or, with
  "Broadcast my view" off, a pause (followers keep their own view). Only a teacher session ever calls
  ``Room.broadcast`` or ``Room.pause``.
- **The heartbeat**: every tab of a class server runs one small fragment every ``POLL_S`` seconds
  (``_heartbeat``). A follower's reruns the app when the broadcast's version changed, and ``follow``
  applies it through the same validated parser a shared link goes through (``links.apply_query``),
  so a forged value would be refused exactly as in a link, then switches to the teacher's page. On a
  page that shows class rounds (``show_rounds``, ``ui.class_page.rounds``) it reruns the app when a round
  started or was revealed, so the page redraws the round the room holds. The teacher's shows the
  follower count. Stepping off is a toggle; stepping back on applies the teacher's current view at once.
- **Who a student is**: a random id per browser, kept in a cookie (``STUDENT_COOKIE``, written by a
  one-line script the first time), so a reload is the same student and draws and guesses count once.
  A teacher's browser keeps a random token the room issued when the key was proved (``TEACHER_COOKIE``,
  never the key itself), so the teacher's reload or second tab needs no key; a token lasts 12 hours after its
  last use, a class keeps the last 8 (``room.TEACHER_TOKEN_TTL_S``, ``MAX_TEACHER_TOKENS``, one rule in both
  stores), and "Leave teacher mode" revokes the session's.
- **A shared room out of reach** (``RoomUnavailable``: Redis down, ``LLM_EXPLORER_ROOM``): the class panel says it
  is paused and why (``paused``), every page keeps working, and nothing is half done; the heartbeat keeps asking,
  so following resumes by itself when the room answers again.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import math
import re
import secrets
import time

import streamlit as st

from inference.api import settings
from ui.classroom import settings as class_settings
from ui.classroom.room import Broadcast, Room, RoomStore, RoomUnavailable, Rounds
from ui.common import format as fmt
from ui.common import navigation, state
from ui.generation.walk import walk_query
from ui.session import links

TEACHER_KEY_ENV = settings.PREFIX + "TEACHER_KEY"  # its name, for the pages to show
STUDENT_COOKIE = "llmx_student"
TEACHER_COOKIE = "llmx_teacher"  # a room-issued token (not the key): a teacher's reload stays the teacher's
HEX_ID = re.compile(r"[0-9a-f]{32}")  # a student id or a teacher token
MAX_KEY_TRIES = 5
POLL_S = 0.5  # every tab's heartbeat: a follower or an open class page sees a change within this, plus a page run
RETRY_S = 5.0  # a page whose class panel was paused reruns at most this often when the room answers again
SEEN_S = 5.0  # a follower polled within this many seconds counts as following (the teacher's count)
NOT_FOLLOWED = frozenset({"present"})  # the teacher's projector layout is not the students'


@st.cache_resource(show_spinner=False)
def room() -> RoomStore:
    """The class's room, one per server process (every session of every model shares it): in this process's memory
    (the default), or in the Redis every replica of the class shares (``LLM_EXPLORER_ROOM``, the class named by
    ``LLM_EXPLORER_CLASS_ID``), which this replica joins at its first request if its startup fingerprint is the
    class's (``ui.classroom.fingerprint``). Nothing connects here: a server starts while Redis is down."""
    operator = class_settings.current()
    if operator.room is None:
        return Room()
    from ui.classroom.fingerprint import replica_fingerprint  # only a shared room needs these
    from ui.classroom.redis_room import RedisRoom
    from ui.common import models

    return RedisRoom.from_url(operator.room, operator.class_id, lambda: replica_fingerprint(models.allowlist()))


def paused(error: RoomUnavailable) -> str:
    """What a page says where the class room cannot answer now."""
    return (
        f"The class panel is paused: {fmt.clause(error)}. Every page works as usual on your own; the class comes back by "
        "itself when the room answers again."
    )


def teacher_key() -> str | None:
    """The operator's teacher key, or None when none is set (then nobody can broadcast)."""
    return class_settings.current().teacher_key  # read once, at start, with every other setting


def key_matches(given: str) -> bool:
    """True when ``given`` is exactly the teacher key (constant-time comparison; False when no key is set)."""
    key = teacher_key()
    return key is not None and hmac.compare_digest(given.encode(), key.encode())


def client_address() -> str:
    """Who tries a key, for the room's back-off: the tab's IP address. Where the app sees a loopback peer (a proxy on
    this machine: run-school.sh's HAProxy, which writes its own ``X-Forwarded-For`` over any the client sent), the
    last address of that header; "local" for a tab on this machine (or no browser behind the session)."""
    try:
        peer, forwarded = st.context.ip_address, st.context.headers.get("X-Forwarded-For", "")
    except Exception:  # noqa: BLE001  (no browser request behind this session, e.g. AppTest)
        return "local"
    if peer:
        try:
            local = ipaddress.ip_address(peer).is_loopback
        except ValueError:
            local = False
        if not local:
            return peer
    return forwarded.split(",")[-1].strip() or "local"


def is_teacher() -> bool:
    return bool(st.session_state.get(state.CLASS_TEACHER)) and teacher_key() is not None


def student_id() -> str:
    """This browser's id: from its cookie when it has one, else a new random one (the cookie is written)."""
    if state.CLASS_STUDENT not in st.session_state:
        cookie = _cookies().get(STUDENT_COOKIE, "")
        st.session_state[state.CLASS_STUDENT] = cookie if HEX_ID.fullmatch(cookie) else secrets.token_hex(16)
    return st.session_state[state.CLASS_STUDENT]


def _cookies() -> dict[str, str]:
    try:
        return dict(st.context.cookies)
    except Exception:  # noqa: BLE001  (no browser request behind this session, e.g. AppTest)
        return {}


def _prove(given: str) -> bool:
    """Check a key the user gave; say what happened either way (``CLASS_MESSAGE``). A try is counted in this session
    only for a wrong key not given before, and in the room (per address, and for the class) for every key checked."""
    tries = st.session_state.get(state.CLASS_TRIES, 0)
    if tries >= MAX_KEY_TRIES:
        _say("error", f"{MAX_KEY_TRIES} wrong keys: this tab does not ask again. Open a new tab to try once more.")
        return False
    if given != given.strip():
        _say(
            "error",
            "That key has spaces (or a line break) before or after it, and the teacher key has none: type it without "
            "them. It was not checked, and cost no try.",
        )
        return False
    refused = st.session_state.setdefault(state.CLASS_REFUSED_KEYS, set())
    digest = hashlib.sha256(given.encode()).hexdigest()
    if digest in refused:  # the same wrong key again, or one click delivered twice: the same answer, no new try
        _say("error", f"That is not the teacher key (you tried it already): nothing changed. {_tries_left(tries)}")
        return False
    address = client_address()
    try:
        wait = room().claim_key_try(address)
    except RoomUnavailable as error:
        _say("warning", f"The key cannot be checked now. {paused(error)}")
        return False
    if wait > 0:
        _say(
            "error",
            f"Too many wrong teacher keys lately, from your address or on this server: try again in "
            f"{math.ceil(wait)} s. This key was not checked, and cost no try.",
        )
        return False
    if key_matches(given):
        _become_teacher(address)
        return True
    refused.add(digest)
    st.session_state[state.CLASS_TRIES] = tries + 1
    _say(
        "error",
        "That is not the teacher key: nothing changed. Students can follow but not broadcast. "
        + _tries_left(tries + 1),
    )
    return False


def _tries_left(tries: int) -> str:
    left = MAX_KEY_TRIES - tries
    return (
        "That was this tab's last try." if left <= 0 else f"{left} {'try' if left == 1 else 'tries'} left in this tab."
    )


def _say(kind: str, text: str) -> None:
    st.session_state[state.CLASS_MESSAGE] = (kind, text)


def _become_teacher(address: str) -> None:
    """The key is proved: this session is the teacher's, with a token for its reloads; another teacher session
    broadcasting now is said at once."""
    st.session_state[state.CLASS_TEACHER] = True
    st.session_state.setdefault(state.CLASS_BROADCASTING, True)
    st.session_state[state.CLASS_FOLLOW] = False
    st.session_state.pop(state.CLASS_KEY_MESSAGE, None)
    _say("success", "Teacher mode: students who follow see your page and settings.")
    try:
        room().key_proved(address)
        st.session_state[state.CLASS_TOKEN] = room().issue_teacher_token()
        others = room().teaching(_teaching_id(), SEEN_S) if st.session_state[state.CLASS_BROADCASTING] else 0
    except RoomUnavailable as error:  # the key is proved; only a reload will ask for it again
        st.session_state[state.CLASS_TOKEN] = None
        _say("warning", f"Teacher mode. {paused(error)} (A reload of this tab will ask for the key again.)")
        return
    if others:
        _say("warning", f"Teacher mode. {_two_teachers(others)}")


def _teaching_id() -> str:
    """Who broadcasts, in the room's count of teachers: this browser's teacher token, hashed (a reload, or a second
    tab of the same browser, is the same teacher: no warning for a reload's old session), else this session's id."""
    token = st.session_state.get(state.CLASS_TOKEN)
    if token:
        return hashlib.sha256(token.encode()).hexdigest()[:16]
    return st.session_state.setdefault(state.CLASS_TEACHING_ID, secrets.token_hex(8))


def _two_teachers(others: int) -> str:
    who = "Another teacher (another browser) is" if others == 1 else f"{others} other teachers' browsers are"
    return (
        f"{who} broadcasting now: students follow whichever view changed last. Switch **Broadcast my view** off in "
        "all but one (or leave teacher mode there)."
    )


def read_link() -> None:
    """Before the link is restored: a teacher-only link's key is checked once and its history entry replaced;
    once per session, a teacher's token in the browser's cookie makes the session the teacher's again (a reload).

    Streamlit writes a changed query string with ``history.pushState``, so deleting the key from
    ``st.query_params`` would leave the entry with the key behind (Back would send it again). Instead the key
    stays in the server's copy for this run, nothing writes the address bar (``publish`` waits while it is
    there), and ``_FORGET_LINK_JS`` replaces the entry in the browser and tells Streamlit, as Back and
    Forward do, so the next run comes without it. Should that script not run, the next run that still
    carries the key (already checked: ``state.CLASS_LINK_KEY``) drops it from the address bar the usual way.
    """
    if state.CLASS_TOKEN not in st.session_state:
        token = _cookies().get(TEACHER_COOKIE, "")
        try:
            known = bool(teacher_key() is not None and HEX_ID.fullmatch(token) and room().is_teacher_token(token))
        except RoomUnavailable:  # not checked: the run after the room is back asks again (the sidebar says so)
            known = None
            st.session_state[state.CLASS_PAUSED] = True
        if known is not None:
            st.session_state[state.CLASS_TOKEN] = token if known else None
        if known:
            st.session_state[state.CLASS_TEACHER] = True
            st.session_state[state.CLASS_FOLLOW] = False
    if "teacher" not in st.query_params:
        return
    given = st.query_params["teacher"][:256]
    if st.session_state.get(state.CLASS_LINK_KEY) == given:  # checked in an earlier run
        if not st.session_state.get(state.CLASS_FORGET_LINK):  # the script was drawn and the browser still sent the key
            del st.query_params["teacher"]
        return
    st.session_state[state.CLASS_LINK_KEY] = given
    st.session_state[state.CLASS_FORGET_LINK] = True
    if teacher_key() is None:
        st.session_state[state.CLASS_MESSAGE] = (
            "error",
            "This server has no teacher key, so the link's key was ignored.",
        )
    else:
        _prove(given)


def link_key_pending() -> bool:
    """True while the address bar may still hold a teacher-only link's key (nothing may write it meanwhile)."""
    return "teacher" in st.query_params


# Replaces the address bar's entry (the teacher-only link) by the same address without the key, then tells
# Streamlit the address changed as Back or Forward would (a "popstate"): its next run comes from the clean
# address, and Streamlit writes that run's query string by replacing the entry, not pushing a new one.
_FORGET_LINK_JS = """const w = window.parent, url = new URL(w.location.href);
if (url.searchParams.has("teacher")) {
  url.searchParams.delete("teacher");
  w.history.replaceState(w.history.state, "", url.toString());
  w.dispatchEvent(new PopStateEvent("popstate", {state: w.history.state}));
}"""


# -- the teacher's side -------------------------------------------------------------------------------
def publish() -> None:
    """After every run: the address bar follows the state, and a broadcasting teacher's view goes to the room
    (a teacher who is not broadcasting pauses it: followers are told, and keep their own view)."""
    if not link_key_pending():  # writing the address bar now would push the link's entry into the history
        links.publish()
    if st.session_state.get(state.CLASS_PAUSE_OWED) and not is_teacher():  # left teacher mode during an outage
        try:
            room().pause()
            st.session_state.pop(state.CLASS_PAUSE_OWED)
        except RoomUnavailable:
            st.session_state[state.CLASS_PAUSED] = True
    if not is_teacher():
        return
    try:
        if st.session_state.get(state.CLASS_BROADCASTING, True):
            query = {k: v for k, v in links.current_query().items() if k not in NOT_FOLLOWED}
            room().broadcast(navigation.current_url_path(), query)
        else:
            room().pause()
    except RoomUnavailable:  # the sidebar says so; the heartbeat reruns the app (publishing) when the room is back
        st.session_state[state.CLASS_PAUSED] = True


# -- the student's side -------------------------------------------------------------------------------
def following() -> bool:
    return teacher_key() is not None and not is_teacher() and bool(st.session_state.get(state.CLASS_FOLLOW, True))


def follow(page_url_path: str) -> None:
    """Apply the teacher's view if it changed since this follower last applied it (may switch the page).

    A version counts as applied (``state.CLASS_APPLIED``) only in a run that is on the teacher's page. A switch can be
    lost: Streamlit folds a rerun that arrives while ``st.switch_page``'s is pending into one, and keeps the
    page of the later request, so a fragment timer firing in that moment reruns the old page. Marking the
    version applied before the switch left such a follower on the old page for good (its polls saw nothing
    new); now the next run switches again. The view itself is applied once per version (``state.CLASS_ARRIVING``), so
    a repeated switch does not replay the walk twice.
    """
    if not following() or link_key_pending():  # a switch now would push the link's key into the history
        return
    try:
        broadcast = room().current()
    except RoomUnavailable:  # the heartbeat says so, and reruns the app when the room answers with a new view
        return
    if broadcast.version == 0 or broadcast.version == st.session_state.get(state.CLASS_APPLIED):
        return
    if not broadcast.live:  # paused: nothing to apply (counted as seen, so the heartbeat does not ask again)
        st.session_state[state.CLASS_APPLIED] = st.session_state[state.CLASS_ARRIVING] = broadcast.version
        return
    if st.session_state.get(state.CLASS_ARRIVING) != broadcast.version:
        st.session_state[state.CLASS_ARRIVING] = broadcast.version
        _apply(broadcast)
    target = next((spec for spec in navigation.PAGES if spec.url_path == broadcast.page), None)
    if target is not None and target.url_path != page_url_path:
        st.switch_page(target.script)
    st.session_state[state.CLASS_APPLIED] = broadcast.version


def _apply(broadcast: Broadcast) -> None:
    """The teacher's link parameters, through the link parser; the Generation walk kept or replayed."""
    own_walk = walk_query()
    links.apply_query(broadcast.query, reset_missing=True, skip=NOT_FOLLOWED)
    teacher_walk = {name: broadcast.query[name] for name in ("step", "forced") if name in broadcast.query}
    if teacher_walk != own_walk:  # a new stepper replays the teacher's walk (apply_query queued it)
        st.session_state.pop(state.GEN_STEPPER, None)
    else:  # the same walk: keep this stepper (and its cache), drop the queued replay
        for key in (state.GEN_REPLAY_STEPS, state.GEN_REPLAY_FORCED, state.GEN_REPLAY_PROMPT):
            st.session_state.pop(key, None)


def _step_on() -> None:
    st.session_state[state.CLASS_FOLLOW] = st.session_state[state.widget_key(state.CLASS_FOLLOW)]
    st.session_state.pop(state.CLASS_APPLIED, None)  # back on: apply the teacher's current view at once
    st.session_state.pop(state.CLASS_ARRIVING, None)


def show_rounds(keep: bool = False, **drawn: object) -> None:
    """A class page drew these rounds (``Rounds`` fields: ``draw_id``, ``guess_id``, ``revealed``): the heartbeat
    reruns the app when the room's differ, so the page never shows one round's text over another's chart.
    ``keep``: only the fields this run has not recorded yet (``ui.class_page.rounds.watch`` recorded the others)."""
    shown = st.session_state.setdefault(state.CLASS_ROUNDS_SHOWN, {})
    shown.update({name: value for name, value in drawn.items() if not keep or name not in shown})


def _rounds_changed(now: Rounds) -> bool:
    return any(
        getattr(now, field) != value for field, value in st.session_state.get(state.CLASS_ROUNDS_SHOWN, {}).items()
    )


@st.fragment(run_every=POLL_S)
def _heartbeat() -> None:
    """Every tab's poll: a follower's reruns the app on a new broadcast, a class page's on a new round or a
    reveal; the teacher's counts the followers, the follower's says what it follows. A room out of reach: it says
    the panel is paused, and keeps ticking, so the tab follows again as soon as the room answers."""
    try:
        _beat()
    except RoomUnavailable as error:
        st.warning(paused(error), icon=":material/cloud_off:")


def _beat() -> None:
    pending = link_key_pending()  # a rerun now could lose the script that takes the link's key out of the history
    teacher = is_teacher()
    follows = not teacher and following()
    # one read of the room per tick (one round trip to a shared room): a follower is seen, the teacher counts them
    beat = room().heartbeat(student_id() if follows else None, SEEN_S if teacher else None)
    if _rounds_changed(beat.rounds) and not pending:
        st.rerun()
    if st.session_state.get(state.CLASS_PAUSED) and not pending and _may_retry():
        st.session_state.pop(state.CLASS_PAUSED)
        st.rerun()  # the room answers again: redraw the page whose class panel (or broadcast) was paused
    if teacher:
        n = beat.followers
        broadcasting = st.session_state.get(state.CLASS_BROADCASTING, True)
        st.caption(
            f"You are the teacher. {n} student{'s' * (n != 1)} following now"
            + ("." if broadcasting else " (your view is not broadcast: they keep their own).")
        )
        others = room().teaching(_teaching_id(), SEEN_S) if broadcasting else 0
        if others:
            st.warning(_two_teachers(others), icon=":material/group:")
        return
    if not follows:
        return
    broadcast = beat.broadcast
    if broadcast.version and broadcast.version != st.session_state.get(state.CLASS_APPLIED) and not pending:
        st.rerun()
    if not broadcast.version:
        st.caption("Following the teacher: waiting for the teacher's first page.")
    elif not broadcast.live:
        st.caption(
            f"The teacher is not broadcasting right now ({_ago(broadcast.at)}): your page and settings "
            "are your own until they start again."
        )
    else:
        title = next((spec.title for spec in navigation.PAGES if spec.url_path == broadcast.page), broadcast.page)
        st.caption(f"Following the teacher: **{title}** (the teacher's view last changed {_ago(broadcast.at)}).")


def _may_retry() -> bool:
    """At most one rerun per ``RETRY_S`` for a paused panel: a room that answers reads but refuses writes (full)
    must not rerun a teacher's page on every tick."""
    now = time.monotonic()
    if now - st.session_state.get(state.CLASS_RETRIED, float("-inf")) < RETRY_S:
        return False
    st.session_state[state.CLASS_RETRIED] = now
    return True


def _ago(at: float) -> str:
    seconds = max(0.0, time.time() - at)
    return "just now" if seconds < 2 else (f"{seconds:.0f} s ago" if seconds < 120 else f"{seconds / 60:.0f} min ago")


def _follow_help() -> str:
    return (
        f"Your page and settings follow the teacher's: your tab asks the server every {POLL_S:g} s, then reruns "
        "on the teacher's view. Switch off to explore on your own; switch on again to catch up."
    )


def _unlock() -> None:
    given = st.session_state.get(state.CLASS_KEY_BOX, "")
    st.session_state[state.CLASS_KEY_BOX] = ""  # the key is not kept in the widget
    if not given.strip():  # nothing typed (or a click delivered twice, the box already cleared): not a try
        if not is_teacher():
            st.session_state[state.CLASS_KEY_MESSAGE] = ("info", "Type the teacher key first.")
        return
    if not _prove(given):  # the answer goes inside the panel, which a held message opens (render_sidebar)
        st.session_state[state.CLASS_KEY_MESSAGE] = st.session_state.pop(state.CLASS_MESSAGE)


def _notice(slot: str, ok_key: str) -> None:
    """The message held in ``slot`` (kind, text). A success is shown once; anything else (a refusal, a warning, a
    hint) stays, run after run, until its OK is pressed or the next try replaces it: whatever reruns the page (a
    heartbeat, a cookie script, a fragment) never wipes it unread."""
    message = st.session_state.get(slot)
    if not message:
        return
    kind, text = message
    getattr(st, kind)(text)
    if kind == "success":
        st.session_state.pop(slot)
    else:
        st.button("OK", key=ok_key, on_click=_dismiss, args=(slot,), type="tertiary", help="Hide this message")


def _dismiss(slot: str) -> None:
    st.session_state.pop(slot, None)


def _store_broadcasting() -> None:
    st.session_state[state.CLASS_BROADCASTING] = st.session_state[state.widget_key(state.CLASS_BROADCASTING)]
    if not st.session_state[state.CLASS_BROADCASTING] and is_teacher():
        try:
            room().pause()  # at once, not only after this run
        except RoomUnavailable:  # the run after this callback pauses it (publish), once the room answers
            pass


def _leave() -> None:
    st.session_state[state.CLASS_TEACHER] = False
    token, st.session_state[state.CLASS_TOKEN] = st.session_state.get(state.CLASS_TOKEN), None
    st.session_state[state.CLASS_MESSAGE] = ("info", "You left teacher mode: your view is no longer broadcast.")
    try:
        if token:
            room().revoke_teacher_token(token)
        room().pause()
    except RoomUnavailable as error:  # this tab is no teacher's now; the room is told when it answers (publish)
        st.session_state[state.CLASS_PAUSE_OWED] = st.session_state[state.CLASS_PAUSED] = True
        st.session_state[state.CLASS_MESSAGE] = (
            "warning",
            f"You left teacher mode. {paused(error)} Until then followers keep your last view; then they are told "
            "you stopped broadcasting.",
        )


def render_sidebar() -> None:
    """The class panel, at the top of the sidebar (under the page list): the teacher's broadcast toggle and
    follower count, or the student's follow toggle and "I am the teacher"; nothing when class mode is off
    (the Class page says how to turn it on). Also every tab's heartbeat, and the scripts that keep this
    browser's ids in its cookies and take a teacher-only link's key out of its history."""
    st.session_state.pop(state.CLASS_ROUNDS_SHOWN, None)  # the page of this run says which rounds it draws
    st.session_state.pop(state.CLASS_PAUSED_SHOWN, None)  # and whether it said the class panel is paused
    with st.sidebar:
        scripts = _forget_link_script()
        if teacher_key() is None:
            _scripts(scripts)
            _notice(state.CLASS_MESSAGE, state.CLASS_MESSAGE_OK)
            return
        _scripts(scripts + _cookie_script())
        # a held message goes under the class controls: they stay in view on a 1366x768 laptop whatever it says
        if is_teacher():
            st.session_state.setdefault(state.CLASS_BROADCASTING, True)
            st.session_state[state.widget_key(state.CLASS_BROADCASTING)] = st.session_state[state.CLASS_BROADCASTING]
            st.toggle(
                "Broadcast my view",
                key=state.widget_key(state.CLASS_BROADCASTING),
                on_change=_store_broadcasting,
                help=f"Students who follow get your page, prompt, model and settings: their tabs ask every "
                f"{POLL_S:g} s, then rerun on your view. Off: they keep their own view and are told so.",
            )
            _heartbeat()  # the follower count, live
            st.button("Leave teacher mode", key=state.CLASS_LEAVE, on_click=_leave, type="tertiary")
            _notice(state.CLASS_MESSAGE, state.CLASS_MESSAGE_OK)
            return
        st.session_state[state.widget_key(state.CLASS_FOLLOW)] = bool(st.session_state.get(state.CLASS_FOLLOW, True))
        st.toggle(
            "Follow the teacher", key=state.widget_key(state.CLASS_FOLLOW), on_change=_step_on, help=_follow_help()
        )
        _heartbeat()
        # The panel's open state is the browser's (keyed, kept across redraws; no rerun on a click): held by the
        # server (a widget), a following student's panel once closed right after the click and stayed closed.
        # A held answer to a key opens it.
        held = state.CLASS_KEY_MESSAGE in st.session_state
        with st.expander("I am the teacher", key=state.CLASS_TEACHER_PANEL, expanded=held):
            _notice(state.CLASS_KEY_MESSAGE, state.CLASS_KEY_MESSAGE_OK)
            if st.session_state.get(state.CLASS_TRIES, 0) >= MAX_KEY_TRIES:
                st.caption(f"{MAX_KEY_TRIES} wrong keys: this tab does not ask again.")
            else:
                st.text_input("Teacher key", type="password", key=state.CLASS_KEY_BOX, max_chars=256)
                st.button("Unlock teacher mode", key=state.CLASS_UNLOCK, on_click=_unlock)
        _notice(state.CLASS_MESSAGE, state.CLASS_MESSAGE_OK)


def _forget_link_script() -> list[str]:
    """The script that takes a teacher-only link's key out of the browser's history, once (see ``read_link``)."""
    return [_FORGET_LINK_JS] if st.session_state.pop(state.CLASS_FORGET_LINK, False) else []


def _cookie_script() -> list[str]:
    """Statements writing this browser's student id (and a teacher's token) into its cookies when they are not
    there yet; values are 32 hex digits or empty (HEX_ID / secrets.token_hex): safe inside the script."""
    wanted = {STUDENT_COOKIE: student_id(), TEACHER_COOKIE: st.session_state.get(state.CLASS_TOKEN) or ""}
    have = _cookies()
    changes = {name: value for name, value in wanted.items() if have.get(name, "") != value and (value or name in have)}
    return [
        f'window.parent.document.cookie = "{name}={value}; path=/; SameSite=Strict; '
        f'max-age={31536000 if value else 0}";'
        for name, value in changes.items()
    ]


def _scripts(statements: list[str]) -> None:
    if statements:
        st.iframe(f"<script>{chr(10).join(statements)}</script>", height=1, alt="Class mode's browser bookkeeping")
