"""The class room: one per server process, shared by every browser session (pure Python, thread-safe).

Owns what a class shares: the teacher's broadcast (the page and the link parameters the
teacher's view publishes, with a version that grows on every change, and whether the teacher
is broadcasting at all), the class draw round (every student's draws, counted once each) and
the guess round (one guess per student), and ``rounds()``, the small summary of both rounds that
every open class page compares with what it drew (a new round, a reveal) to know it must redraw. Nothing here is keyed by anything a browser sends as a setting: the room is
reached through ``ui.class_page.broadcast.room()`` (a ``st.cache_resource``), only a session that
proved the teacher key calls the teacher's methods, and a student is named by the random
id of its browser (``ui.class_page.broadcast.student_id``).

Each draw is counted exactly once: a student's draws are numbered 0, 1, 2, … in its own
seeded stream, and ``add_draws`` keeps only the numbers not yet counted for that student
in that round (a rerun, a double click or a reload that sends the same draws again adds
nothing). A guess is stored per student, so a second guess replaces the first.

This module also owns the room's interface (``RoomStore``), which two stores implement: ``Room``, here, in the
server's memory (the default: one server, one class), and ``ui.classroom.redis_room.RedisRoom``, in Redis, shared by
every replica of a class (``LLM_EXPLORER_ROOM``). Both refuse what the other refuses with the same ``RoomError``
messages; only a shared store can be out of reach, which it says with ``RoomUnavailable``.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # the room holds the settings, never uses them: it stays plain Python
    from inference.api import SamplingParams

MAX_QUERY_ITEMS = 40  # link parameters in one broadcast (the app has ~30)
MAX_QUERY_VALUE = 4096  # characters of one broadcast value (the prompt is cut to 4,000 by the link parser)
MAX_STUDENTS = 500  # per round: a class, not the internet
MAX_DRAWS_PER_STUDENT = 1000
MAX_GUESS_CHARS = 40
# Teacher tokens, the same rule in every store: a token lasts this long after its last use (issued, or checked by a
# reload), and a class keeps at most MAX_TEACHER_TOKENS (a few teacher devices): a new one drops the one unused longest.
TEACHER_TOKEN_TTL_S = 12 * 3600  # a school day
MAX_TEACHER_TOKENS = 8
# Teacher-key tries, counted in the room (``claim_key_try``), so the limits hold across tabs, sessions and replicas (a
# session's own limit is ``broadcast.MAX_KEY_TRIES``): past its free tries, an address (one laptop, or a whole network
# behind one router) waits before each next try, twice as long each time (1 s, 2 s, 4 s, ...) up to its cap; the class
# as a whole likewise, with more free tries and a short cap, so that keys guessed from many addresses slow down too
# while the real teacher waits at most ``KEY_WAIT_CAP_CLASS_S``. A count is forgotten ``KEY_TRIES_KEPT_S`` after its
# last try.
KEY_FREE_TRIES_ADDRESS = 10  # two tabs' worth of a session's tries
KEY_FREE_TRIES_CLASS = 30  # a class of students mistyping
KEY_FIRST_WAIT_S = 1.0
KEY_WAIT_CAP_ADDRESS_S = 600.0
KEY_WAIT_CAP_CLASS_S = 30.0
KEY_TRIES_KEPT_S = 3600.0
MAX_KEY_ADDRESSES = 4096  # addresses the memory room remembers (the oldest go first)
ANY = object()  # ``new_*_round(replacing=ANY)``: start a round whatever the room holds


class RoomError(ValueError):
    """A request the room refuses (the message says why, for the page to show)."""


class RoomUnavailable(RuntimeError):
    """A shared room's store cannot answer now (Redis down, unreachable, full): nothing was counted or changed by
    the request that raised it, and the page says the class panel is paused (the message says why, no password)."""


@dataclass(frozen=True)
class Broadcast:
    """What the teacher's session shows: its page (url path) and its link parameters (``ui.session.links``)."""

    version: int
    page: str
    query: dict[str, str]
    at: float  # time.time() of the change (the follow latency benchmark reads it)
    live: bool = True  # False while the teacher has "Broadcast my view" off (or left teacher mode)


@dataclass(frozen=True)
class Experiment:
    """The distribution a round draws from or guesses at: the teacher's model, prompt and sampling settings."""

    model: str
    prompt: str
    chat: bool
    params: SamplingParams  # the teacher's sampling settings, canonical (``SamplingParams.canonical``): a cache key


@dataclass(frozen=True)
class Rounds:
    """Which rounds the room holds now: what a class page compares with the rounds it drew."""

    draw_id: str | None
    guess_id: str | None
    revealed: bool


@dataclass(frozen=True)
class Beat:
    """What one tick of a tab's heartbeat reads, at one moment (``RoomStore.heartbeat``): the rounds, the broadcast,
    and (for the teacher's tab) how many follow."""

    rounds: Rounds
    broadcast: Broadcast
    followers: int | None  # None: not asked


@dataclass
class DrawRound:
    round_id: str  # random: part of every student's seed, so a new round draws new numbers
    experiment: Experiment
    draws: dict[str, list[int]] = field(default_factory=dict)  # student id -> token ids, draw 0, 1, 2, …
    number: int = 1  # 1, 2, 3, … on this server: what the class calls it ("draw round 2")
    pooled: dict[int, int] | None = None  # token id -> draws, as a shared store keeps it; None: from ``draws``

    def counts(self) -> Counter:
        if self.pooled is not None:
            return Counter(self.pooled)
        return Counter(token for tokens in self.draws.values() for token in tokens)


@dataclass(frozen=True)
class DrawView:
    """What one student's class view of a draw round needs, without every student's stream: the pooled counts, how
    many students drew, and how many draws are the student's own (``RoomStore.draw_view``; the page polls it)."""

    round_id: str
    experiment: Experiment
    number: int
    pooled: Counter  # token id -> draws, every student's
    students: int  # students with at least one draw
    mine: int  # the asking student's draws


@dataclass
class GuessRound:
    round_id: str
    experiment: Experiment
    guesses: dict[str, str] = field(default_factory=dict)  # student id -> the guessed text
    revealed: bool = False
    number: int = 1  # 1, 2, 3, … on this server ("guess round 2")


class RoomStore(Protocol):
    """What a room does, whichever store holds it (``Room`` in memory, ``RedisRoom`` shared): the methods below."""

    def issue_teacher_token(self) -> str: ...
    def is_teacher_token(self, token: str) -> bool: ...
    def revoke_teacher_token(self, token: str) -> None: ...
    def claim_key_try(self, address: str) -> float: ...
    def key_proved(self, address: str) -> None: ...
    def teaching(self, session: str, within_s: float) -> int: ...
    def seen(self, student: str) -> None: ...
    def followers(self, within_s: float) -> int: ...
    def broadcast(self, page: str, query: dict[str, str]) -> int: ...
    def pause(self) -> int: ...
    def current(self) -> Broadcast: ...
    def rounds(self) -> Rounds: ...
    def heartbeat(self, student: str | None, within_s: float | None) -> Beat: ...
    def new_draw_round(
        self, experiment: Experiment, replacing: str | None | object = ANY, logits: bytes | None = None
    ) -> str: ...
    def round_logits(self, round_id: str) -> bytes | None: ...
    def draw_round(self) -> DrawRound | None: ...
    def draw_view(self, student: str) -> DrawView | None: ...
    def draws_of(self, round_id: str, student: str) -> int: ...
    def add_draws(self, round_id: str, student: str, first: int, tokens: list[int]) -> int: ...
    def new_guess_round(self, experiment: Experiment, replacing: str | None | object = ANY) -> str: ...
    def guess_round(self) -> GuessRound | None: ...
    def guess(self, round_id: str, student: str, text: str) -> None: ...
    def reveal(self, round_id: str) -> None: ...


def check_broadcast(page: str, query: dict[str, str]) -> None:
    """A broadcast is a url path and link parameters (short names, text values), or ``RoomError``."""
    if not isinstance(page, str) or len(page) > 64:
        raise RoomError("the page must be a url path")
    if len(query) > MAX_QUERY_ITEMS or any(
        not isinstance(k, str) or not isinstance(v, str) or len(k) > 64 or len(v) > MAX_QUERY_VALUE
        for k, v in query.items()
    ):
        raise RoomError("a broadcast carries link parameters only (short names, text values)")


def key_wait(tries: int, free: int, cap: float) -> float:
    """Seconds to wait after the last of ``tries`` key tries before the next (0 while the free tries last)."""
    return 0.0 if tries < free else min(KEY_FIRST_WAIT_S * 2 ** min(tries - free, 64), cap)


def key_address(address: str) -> str:
    """An address as the rooms key it: printable, at most 64 characters (an IPv6 address is 39)."""
    return "".join(c if c.isalnum() or c in ".:-_" else "_" for c in address[:64]) or "unknown"


def checked_guess(text: str) -> str:
    """A guess as the room keeps it (stripped), or ``RoomError`` when it is not one short word's worth."""
    text = text.strip()
    if not text or len(text) > MAX_GUESS_CHARS:
        raise RoomError(f"a guess is one word of 1 to {MAX_GUESS_CHARS} characters")
    return text


class Room:
    """The teacher's broadcast and the class's rounds in this process's memory (every method takes the one lock)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._broadcast = Broadcast(0, "", {}, 0.0)
        self._draws: DrawRound | None = None
        self._draw_logits: bytes | None = None  # the draw round's logits, as ``new_draw_round`` was given them
        self._guesses: GuessRound | None = None
        self._seen: dict[str, float] = {}  # follower id -> time.monotonic() of its last poll
        self._teacher_tokens: dict[str, float] = {}  # token (in a teacher's cookie) -> time.monotonic() of its last use
        self._key_tries: dict[str, tuple[int, float]] = {}  # address -> (tries, time.monotonic() of the last)
        self._class_tries = (0, 0.0)  # every address's together
        self._teaching: dict[str, float] = {}  # a broadcasting teacher session -> time.monotonic() it was last seen

    # -- the teacher's reloads -------------------------------------------------------------------------
    def issue_teacher_token(self) -> str:
        """A random token for a session that proved the teacher key, so a reload of its browser needs no key (valid
        ``TEACHER_TOKEN_TTL_S`` after its last use; the class's oldest goes past ``MAX_TEACHER_TOKENS``)."""
        token = secrets.token_hex(16)
        with self._lock:
            now = self._drop_expired_tokens()
            self._teacher_tokens[token] = now
            while len(self._teacher_tokens) > MAX_TEACHER_TOKENS:
                del self._teacher_tokens[min(self._teacher_tokens, key=self._teacher_tokens.get)]
        return token

    def is_teacher_token(self, token: str) -> bool:
        """True for a token this class issued, used within ``TEACHER_TOKEN_TTL_S``, not revoked; a check is a use."""
        with self._lock:
            now = self._drop_expired_tokens()
            known = next((k for k in self._teacher_tokens if hmac.compare_digest(token.encode(), k.encode())), None)
            if known is not None:
                self._teacher_tokens[known] = now
            return known is not None

    def revoke_teacher_token(self, token: str) -> None:
        with self._lock:
            self._teacher_tokens.pop(token, None)

    # -- teacher-key tries -----------------------------------------------------------------------------
    def claim_key_try(self, address: str) -> float:
        """A key try from ``address``: 0 when it may go ahead (counted for the address and the class), else the seconds
        left to wait (nothing counted). The rule: ``key_wait``, with the ``KEY_*`` constants above."""
        address = key_address(address)
        with self._lock:
            now = time.monotonic()
            for known in [a for a, (_, last) in self._key_tries.items() if now - last > KEY_TRIES_KEPT_S]:
                del self._key_tries[known]
            if now - self._class_tries[1] > KEY_TRIES_KEPT_S:
                self._class_tries = (0, 0.0)
            mine, every = self._key_tries.get(address, (0, 0.0)), self._class_tries
            left = max(
                mine[1] + key_wait(mine[0], KEY_FREE_TRIES_ADDRESS, KEY_WAIT_CAP_ADDRESS_S) - now,
                every[1] + key_wait(every[0], KEY_FREE_TRIES_CLASS, KEY_WAIT_CAP_CLASS_S) - now,
            )
            if left > 0:
                return left
            self._key_tries.pop(address, None)
            self._key_tries[address] = (mine[0] + 1, now)
            self._class_tries = (every[0] + 1, now)
            while len(self._key_tries) > MAX_KEY_ADDRESSES:
                del self._key_tries[next(iter(self._key_tries))]
            return 0.0

    def key_proved(self, address: str) -> None:
        """The try ``address`` claimed gave the right key: its address's tries are forgotten, and the class's count
        loses that one try (it was no wrong key)."""
        with self._lock:
            self._key_tries.pop(key_address(address), None)
            self._class_tries = (max(0, self._class_tries[0] - 1), self._class_tries[1])

    def teaching(self, session: str, within_s: float) -> int:
        """Teacher session ``session`` is broadcasting now; how many other teacher sessions were within ``within_s``
        seconds (more than one teacher broadcasting: students follow whichever view changed last)."""
        with self._lock:
            now = time.monotonic()
            self._teaching[session] = now
            for known in [s for s, seen in self._teaching.items() if now - seen > within_s]:
                del self._teaching[known]
            return len(self._teaching) - 1

    def _drop_expired_tokens(self) -> float:
        now = time.monotonic()
        for token in [t for t, used in self._teacher_tokens.items() if now - used > TEACHER_TOKEN_TTL_S]:
            del self._teacher_tokens[token]
        return now

    # -- who follows -----------------------------------------------------------------------------------
    def seen(self, student: str) -> None:
        """A follower polled (its heartbeat); the oldest entries go when more than ``MAX_STUDENTS`` are kept."""
        with self._lock:
            self._seen_locked(student)

    def _seen_locked(self, student: str) -> None:
        self._seen.pop(student, None)
        self._seen[student] = time.monotonic()
        while len(self._seen) > MAX_STUDENTS:
            self._seen.pop(next(iter(self._seen)))

    def followers(self, within_s: float) -> int:
        """Followers that polled within the last ``within_s`` seconds."""
        now = time.monotonic()
        with self._lock:
            return sum(now - at <= within_s for at in self._seen.values())

    # -- the teacher's view ----------------------------------------------------------------------------
    def broadcast(self, page: str, query: dict[str, str]) -> int:
        """Publish the teacher's page and link parameters; the version grows only when they (or ``live``) changed."""
        check_broadcast(page, query)
        with self._lock:
            old = self._broadcast
            if page != old.page or query != old.query or not old.live:
                self._broadcast = Broadcast(old.version + 1, page, dict(query), time.time())
            return self._broadcast.version

    def pause(self) -> int:
        """The teacher stopped broadcasting: followers keep their own view (the version grows once)."""
        with self._lock:
            old = self._broadcast
            if old.live and old.version:
                self._broadcast = Broadcast(old.version + 1, old.page, old.query, time.time(), live=False)
            return self._broadcast.version

    def current(self) -> Broadcast:
        with self._lock:
            return self._broadcast

    def rounds(self) -> Rounds:
        """The current rounds' ids and whether the guesses are revealed (cheap: every open class page polls it)."""
        return self.heartbeat(None, None).rounds

    def heartbeat(self, student: str | None, within_s: float | None) -> Beat:
        """One tick of a tab's heartbeat: ``student`` (a follower) polled (``seen``); the rounds, the broadcast, and
        the followers within ``within_s`` seconds (None: not counted), all read under the lock, at one moment."""
        with self._lock:
            if student is not None:
                self._seen_locked(student)
            guesses = self._guesses
            rounds = Rounds(
                self._draws.round_id if self._draws else None,
                guesses.round_id if guesses else None,
                bool(guesses and guesses.revealed),
            )
            now = time.monotonic()
            followers = None if within_s is None else sum(now - at <= within_s for at in self._seen.values())
            return Beat(rounds, self._broadcast, followers)

    # -- draw for the class ----------------------------------------------------------------------------
    def new_draw_round(
        self, experiment: Experiment, replacing: str | None | object = ANY, logits: bytes | None = None
    ) -> str:
        """Start a class draw on ``experiment`` (the previous round's draws are dropped); its id.

        ``replacing`` is the round the teacher's page showed when the button was pressed (None: no round):
        when the room holds another one by now, that press already started it (a click Streamlit delivered
        twice) and nothing changes. ``logits`` are the prompt's next-token logits the round draws from (float32
        bytes, ``round_logits`` gives them back): every draw and every recount of a draw reads these, so a student's
        draws are the same numbers whichever engine path (eager, compiled, batched) would compute the prompt now.
        """
        with self._lock:
            if replacing is not ANY and (self._draws.round_id if self._draws else None) != replacing:
                return self._draws.round_id if self._draws else ""
            number = self._draws.number + 1 if self._draws else 1
            self._draws = DrawRound(_round_id(), experiment, number=number)
            self._draw_logits = logits
            return self._draws.round_id

    def round_logits(self, round_id: str) -> bytes | None:
        """The logits draw round ``round_id`` draws from (None: another round now, or one started without them)."""
        with self._lock:
            if self._draws is None or self._draws.round_id != round_id:
                return None
            return self._draw_logits

    def draw_round(self) -> DrawRound | None:
        """A copy of the current draw round (safe to read while students keep drawing)."""
        with self._lock:
            if self._draws is None:
                return None
            return DrawRound(
                self._draws.round_id,
                self._draws.experiment,
                {student: list(tokens) for student, tokens in self._draws.draws.items()},
                self._draws.number,
            )

    def draw_view(self, student: str) -> DrawView | None:
        """The current draw round as ``student``'s class view shows it (None: no round)."""
        rnd = self.draw_round()  # a copy, taken under the lock; counted outside it
        if rnd is None:
            return None
        students = sum(bool(tokens) for tokens in rnd.draws.values())
        return DrawView(
            rnd.round_id, rnd.experiment, rnd.number, rnd.counts(), students, len(rnd.draws.get(student, ()))
        )

    def draws_of(self, round_id: str, student: str) -> int:
        """How many of ``student``'s draws the round has counted (its next draw's number)."""
        with self._lock:
            if self._draws is None or self._draws.round_id != round_id:
                return 0
            return len(self._draws.draws.get(student, ()))

    def add_draws(self, round_id: str, student: str, first: int, tokens: list[int]) -> int:
        """Count ``student``'s draws ``first``, ``first`` + 1, … of round ``round_id``, each once.

        Draws already counted are skipped (the same numbers sent twice add nothing); a gap (draws
        after ones never sent) is refused. Returns how many were added.
        """
        with self._lock:
            current = self._draws
            if current is None or current.round_id != round_id:
                raise RoomError("this draw round is over: the teacher started a new one")
            mine = current.draws.get(student)
            if mine is None and len(current.draws) >= MAX_STUDENTS:
                raise RoomError(f"the round already has {MAX_STUDENTS} students")
            mine = current.draws.setdefault(student, [])
            if first > len(mine):
                raise RoomError(f"draw {first} comes after draw {len(mine)}, which was never counted")
            new = tokens[len(mine) - first :]
            new = new[: max(0, MAX_DRAWS_PER_STUDENT - len(mine))]
            mine.extend(int(t) for t in new)
            return len(new)

    # -- guess the next token --------------------------------------------------------------------------
    def new_guess_round(self, experiment: Experiment, replacing: str | None | object = ANY) -> str:
        """Start a guess round on ``experiment`` (the previous round's guesses are dropped); ``replacing`` as for
        ``new_draw_round``."""
        with self._lock:
            if replacing is not ANY and (self._guesses.round_id if self._guesses else None) != replacing:
                return self._guesses.round_id if self._guesses else ""
            number = self._guesses.number + 1 if self._guesses else 1
            self._guesses = GuessRound(_round_id(), experiment, number=number)
            return self._guesses.round_id

    def guess_round(self) -> GuessRound | None:
        with self._lock:
            if self._guesses is None:
                return None
            g = self._guesses
            return GuessRound(g.round_id, g.experiment, dict(g.guesses), g.revealed, g.number)

    def guess(self, round_id: str, student: str, text: str) -> None:
        """Store ``student``'s guess (replacing an earlier one) while the round is not revealed."""
        text = checked_guess(text)
        with self._lock:
            current = self._guesses
            if current is None or current.round_id != round_id:
                raise RoomError("this guess round is over: the teacher started a new one")
            if current.revealed:
                raise RoomError("the answer is out: guesses are closed until the next round")
            if student not in current.guesses and len(current.guesses) >= MAX_STUDENTS:
                raise RoomError(f"the round already has {MAX_STUDENTS} guesses")
            current.guesses[student] = text

    def reveal(self, round_id: str) -> None:
        with self._lock:
            if self._guesses is not None and self._guesses.round_id == round_id:
                self._guesses.revealed = True


def _round_id() -> str:
    return secrets.token_hex(6)
