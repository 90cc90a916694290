"""The class room in Redis: the same room as ``ui.classroom.room.Room`` (``RoomStore``), shared by every replica of a
class, so a teacher on one replica and students on another are one class (``LLM_EXPLORER_ROOM``).

Owns the room's keys in Redis and the Lua scripts that change them. Every change is one script (Redis runs a
script alone, start to end), so a draw counts exactly once whichever replica receives it, a guess that arrives
after the reveal is refused, and a request that fails midway changed nothing. Every script is safe to send twice
(a client retry after a lost reply): draws are numbered per student, a guess replaces the same guess, a new round
names the round it replaces (``replacing``), a broadcast equal to the current one changes nothing.

The keys of class ``<id>`` (``LLM_EXPLORER_CLASS_ID``; ``{<id>}`` is Redis' hash tag: a class's keys stay together
on one node of a cluster), prefix ``llmx:{<id>}:``:

- ``broadcast``: hash ``version``, ``page``, ``query`` (JSON), ``at`` (Redis' clock), ``live`` (``1``/``0``);
- ``draw``: hash ``id``, ``number``, ``experiment`` (JSON); ``draw:streams``: student -> its draws in order
  (``12,7,12``); ``draw:lens``: student -> how many; ``draw:counts``: token id -> pooled draws; ``draw:logits``: the
  prompt's logits the round draws from (float32 bytes, written with the round, read only by a press or a recount);
- ``guess``: hash ``id``, ``number``, ``experiment``, ``revealed``; ``guess:guesses``: student -> the guess;
- ``seen``: sorted set, student -> the time of its last poll, by Redis' own clock (``TIME``), so replicas whose
  clocks differ still agree on who follows now;
- ``teachers``: sorted set, the sha256 of each teacher session's token -> its last use (Redis' clock); a token
  expires ``TEACHER_TOKEN_TTL_S`` after that, and a class keeps ``MAX_TEACHER_TOKENS`` (the rule of the memory
  room; the token itself lives only in the teacher's cookie);
- ``keys:tries`` and ``keys:tries:<address>``: hash ``n`` (teacher-key tries), ``last`` (Redis' clock): the class's and
  each address's back-off (``claim_key_try``, the memory room's rule), each expiring ``KEY_TRIES_KEPT_S`` after its
  last try;
- ``teaching``: sorted set, a broadcasting teacher session -> when it was last seen (Redis' clock): more than one
  teacher broadcasting is said to each of them;
- ``fingerprint``: the first replica's startup fingerprint (``ui.classroom.fingerprint``): a replica whose own
  differs refuses to join (``ReplicaRefused``, before its first request), so one class never mixes two models,
  weights modes, teacher keys or checkouts.

What cannot be read back as the room wrote it (a key of another type, JSON that does not parse, settings
``SamplingParams`` refuses) counts as no round (or no broadcast), never an exception; a new round replaces it.
Redis out of reach raises ``RoomUnavailable`` (nothing changed); the pages say the class panel is paused.
"""

from __future__ import annotations

import functools
import hashlib
import json
import secrets
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, TypeVar
from urllib.parse import urlsplit

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from inference.api import SamplingParams
from ui.classroom import room as rules  # the key back-off's rule, read at each call (as the memory room does)
from ui.classroom.room import (
    ANY,
    MAX_DRAWS_PER_STUDENT,
    MAX_STUDENTS,
    MAX_TEACHER_TOKENS,
    TEACHER_TOKEN_TTL_S,
    Beat,
    Broadcast,
    DrawRound,
    DrawView,
    Experiment,
    GuessRound,
    RoomError,
    RoomUnavailable,
    Rounds,
    check_broadcast,
    checked_guess,
)

SEEN_KEEP_S = 3600  # followers not seen for an hour leave the seen set
TIMEOUT_S = 1.0  # a poll waits this long for Redis at most: the heartbeat ticks every 0.5 s
UNREADABLE = "this round's data cannot be read back: nothing was counted, and the teacher's next round replaces it"
_ANY = "*"  # ``replacing=ANY`` in a script's arguments (round ids are hex)

T = TypeVar("T")


class ReplicaRefused(RoomUnavailable):
    """This replica's startup fingerprint differs from the class's: it does not join (the message says what differs)."""


# -- the scripts (KEYS and ARGV as each one's comment says; every refusal is a code the caller turns into RoomError)
# Every script that writes starts with a shebang: Redis then refuses it whole when it is out of memory, before its
# first command (a script without one runs until its first write fails, keeping the writes before it).
_WRITES = "#!lua\n"

# A key of another type than the room writes (corrupt) is dropped by the script that writes it, as "nothing yet".
_REPAIR = """for _, key in ipairs(KEYS) do
  local kind = redis.call('TYPE', key).ok
  if kind ~= 'none' and kind ~= '%s' then redis.call('DEL', key) end
end
"""

_BROADCAST = (
    _WRITES
    + _REPAIR % "hash"
    + """-- KEYS: broadcast; ARGV: page, query (canonical JSON)
-- Unchanged (the same page and query, live) keeps the version, as the memory room does; an empty room is page '',
-- query {}, live.
local old = redis.call('HMGET', KEYS[1], 'version', 'page', 'query', 'live')
local version = tonumber(old[1]) or 0
if (old[2] or '') == ARGV[1] and (old[3] or '{}') == ARGV[2] and (old[4] or '1') == '1' then return version end
local t = redis.call('TIME')
redis.call('HSET', KEYS[1], 'version', version + 1, 'page', ARGV[1], 'query', ARGV[2], 'live', '1',
  'at', string.format('%d.%06d', t[1], t[2]))
return version + 1"""
)

_PAUSE = (
    _WRITES
    + _REPAIR % "hash"
    + """-- KEYS: broadcast
local version = tonumber(redis.call('HGET', KEYS[1], 'version')) or 0
if version > 0 and redis.call('HGET', KEYS[1], 'live') == '1' then
  local t = redis.call('TIME')
  version = version + 1
  redis.call('HSET', KEYS[1], 'version', version, 'live', '0', 'at', string.format('%d.%06d', t[1], t[2]))
end
return version"""
)

_NEW_ROUND = (
    _WRITES
    + _REPAIR % "hash"
    + """-- KEYS: the round's hash, then its other keys; ARGV: replacing (a round id, '' for none, '*' for any), new id,
-- experiment (JSON), and for a draw round its logits (bytes, stored at the last key, a string). A corrupt round counts
-- as no round, and is replaced.
local current = redis.call('HGET', KEYS[1], 'id') or ''
if ARGV[1] ~= '*' and current ~= ARGV[1] then return current end
local number = (tonumber(redis.call('HGET', KEYS[1], 'number')) or 0) + 1
redis.call('DEL', unpack(KEYS))
redis.call('HSET', KEYS[1], 'id', ARGV[2], 'number', number, 'experiment', ARGV[3], 'revealed', '0')
if ARGV[4] then redis.call('SET', KEYS[#KEYS], ARGV[4]) end
return ARGV[2]"""
)

_ADD_DRAWS = (
    _WRITES
    + """-- KEYS: draw, draw:streams, draw:lens, draw:counts; ARGV: round id, student, first, max students, max draws,
-- tokens... Returns {0, added}, {-1} round over, {-2} round full, {-3, counted} a gap, {-4} unreadable. Every check
-- comes before the first write: a refused press wrote nothing (a script's writes before an error would stay).
for _, key in ipairs(KEYS) do
  local kind = redis.call('TYPE', key).ok
  if kind ~= 'none' and kind ~= 'hash' then return {-4, 0} end
end
if redis.call('HGET', KEYS[1], 'id') ~= ARGV[1] then return {-1, 0} end
local student, first = ARGV[2], tonumber(ARGV[3])
local raw = redis.call('HGET', KEYS[3], student)
if raw and not string.match(raw, '^%d+$') then return {-4, 0} end
local have = tonumber(raw)
if have == nil then
  if redis.call('HLEN', KEYS[3]) >= tonumber(ARGV[4]) then return {-2, 0} end
  have = 0
end
if first > have then return {-3, have} end
local room, added = tonumber(ARGV[5]) - have, {}
for i = 6 + have - first, #ARGV do
  if #added >= room then break end
  local n = redis.call('HGET', KEYS[4], ARGV[i])
  if n and not string.match(n, '^%d+$') then return {-4, 0} end
  added[#added + 1] = ARGV[i]
end
for _, token in ipairs(added) do redis.call('HINCRBY', KEYS[4], token, 1) end
if #added > 0 then
  local old, text = redis.call('HGET', KEYS[2], student), table.concat(added, ',')
  if old and old ~= '' then text = old .. ',' .. text end
  redis.call('HSET', KEYS[2], student, text)
end
redis.call('HSET', KEYS[3], student, have + #added)
return {0, #added}"""
)

_GUESS = (
    _WRITES
    + """-- KEYS: guess, guess:guesses; ARGV: round id, student, text, max students.
-- Returns 0 stored, -1 round over, -2 revealed, -3 round full, -4 unreadable (checked before the write).
for _, key in ipairs(KEYS) do
  local kind = redis.call('TYPE', key).ok
  if kind ~= 'none' and kind ~= 'hash' then return -4 end
end
if redis.call('HGET', KEYS[1], 'id') ~= ARGV[1] then return -1 end
if redis.call('HGET', KEYS[1], 'revealed') == '1' then return -2 end
if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 0 and redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[4]) then return -3 end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
return 0"""
)

_REVEAL = (
    _WRITES
    + _REPAIR % "hash"
    + """-- KEYS: guess; ARGV: round id
if redis.call('HGET', KEYS[1], 'id') == ARGV[1] then redis.call('HSET', KEYS[1], 'revealed', '1') end
return 0"""
)

_SEEN = (
    _WRITES
    + _REPAIR % "zset"
    + """-- KEYS: seen; ARGV: student, most kept, seconds kept
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[3]))
local extra = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[2])
if extra > 0 then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, extra - 1) end
return 0"""
)

_JOIN = (
    _WRITES
    + _REPAIR % "string"
    + """-- KEYS: fingerprint; ARGV: this replica's. Returns 0 (joined: first, or the same) or the class's fingerprint.
local have = redis.call('GET', KEYS[1])
if not have then redis.call('SET', KEYS[1], ARGV[1]) return 0 end
if have == ARGV[1] then return 0 end
return have"""
)

_ISSUE_TOKEN = (
    _WRITES
    + _REPAIR % "zset"
    + """-- KEYS: teachers; ARGV: the new token's sha256, seconds kept, most kept
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - tonumber(ARGV[2])))
redis.call('ZADD', KEYS[1], now, ARGV[1])
local extra = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[3])
if extra > 0 then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, extra - 1) end
redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2]) * 1000))
return 0"""
)

# A check only refreshes a known token's time (or drops an expired one): nothing grows, so it runs while Redis is full
# (allow-oom), and a teacher's reload still works there.
_CHECK_TOKEN = """#!lua flags=allow-oom
-- KEYS: teachers; ARGV: the token's sha256, seconds kept. Returns 1 (known, kept another TTL from now) or 0.
if redis.call('TYPE', KEYS[1]).ok ~= 'zset' then return 0 end
local used = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if used == nil then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
if now - used > tonumber(ARGV[2]) then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', now, ARGV[1])
redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2]) * 1000))
return 1"""

_CLAIM_KEY_TRY = (
    _WRITES
    + _REPAIR % "hash"
    + """-- KEYS: the address's tries, the class's; ARGV: first wait, then free tries and cap for the address, for the class,
-- then seconds kept. Returns '0' (the try goes ahead, counted in both) or the seconds left to wait (nothing counted),
-- as text (Lua numbers reach the client as integers). The rule is room.key_wait's.
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local left = 0
for i = 1, 2 do
  local n = tonumber(redis.call('HGET', KEYS[i], 'n')) or 0
  local last = tonumber(redis.call('HGET', KEYS[i], 'last')) or 0
  local free, cap = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  if n >= free then
    local wait = math.min(tonumber(ARGV[1]) * 2 ^ math.min(n - free, 64), cap)
    left = math.max(left, last + wait - now)
  end
end
if left > 0 then return string.format('%.3f', left) end
for i = 1, 2 do
  redis.call('HINCRBY', KEYS[i], 'n', 1)
  redis.call('HSET', KEYS[i], 'last', string.format('%.6f', now))
  redis.call('PEXPIRE', KEYS[i], math.ceil(tonumber(ARGV[6]) * 1000))
end
return '0'"""
)

_KEY_PROVED = (
    _WRITES
    + _REPAIR % "hash"
    + """-- KEYS: the address's tries, the class's. The address's are forgotten; the class's count loses the proved try.
redis.call('DEL', KEYS[1])
if (tonumber(redis.call('HGET', KEYS[2], 'n')) or 0) > 0 then redis.call('HINCRBY', KEYS[2], 'n', -1) end
return 0"""
)

_TEACHING = (
    _WRITES
    + _REPAIR % "zset"
    + """-- KEYS: teaching; ARGV: session, within (seconds). Returns how many other sessions were seen within it.
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - tonumber(ARGV[2])))
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2]) * 1000) + 1000)
return redis.call('ZCARD', KEYS[1]) - 1"""
)

_READ_HASHES = """#!lua flags=no-writes
-- KEYS: hashes. Returns each one's fields and values (HGETALL), read at one moment.
local out = {}
for i, key in ipairs(KEYS) do out[i] = redis.call('HGETALL', key) end
return out"""

_DRAW_VIEW = """#!lua flags=no-writes
-- KEYS: draw, draw:lens, draw:counts; ARGV: student. Returns the head, the pooled counts, the students with draws,
-- the draws they hold together, and the student's own count (or false where a count cannot be read).
local students, total = 0, 0
for _, n in ipairs(redis.call('HVALS', KEYS[2])) do
  local value = tonumber(n)
  if value == nil then return false end
  if value > 0 then students = students + 1 end
  total = total + value
end
return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[3]), students, total,
  redis.call('HGET', KEYS[2], ARGV[1]) or '0'}"""

_ROUND_LOGITS = """#!lua flags=no-writes
-- KEYS: draw, draw:logits; ARGV: round id. Returns the round's logits (bytes), or false: another round, or none kept.
if redis.call('HGET', KEYS[1], 'id') ~= ARGV[1] then return false end
if redis.call('TYPE', KEYS[2]).ok ~= 'string' then return false end
return redis.call('GET', KEYS[2])"""

_DRAWS_OF = """#!lua flags=no-writes
-- KEYS: draw, draw:lens; ARGV: round id, student. Returns how many of the student's draws the round counted.
if redis.call('HGET', KEYS[1], 'id') ~= ARGV[1] then return 0 end
return redis.call('HGET', KEYS[2], ARGV[2]) or 0"""

# A tab's heartbeat tick in one round trip (it was four: the rounds, the broadcast, seen, the followers). Registered
# twice: the teacher's tick (no student) reads only, so it runs while Redis is full; a follower's writes ``seen``.
_BEAT = """-- KEYS: draw, guess, broadcast, seen; ARGV: student ('' for none), within ('' for no count), most kept,
-- seconds kept. Returns the draw and guess heads, the broadcast (HGETALL each; {} for a key of another type) and
-- the followers polled within ``within`` seconds (-1: not counted), read at one moment, by Redis' clock.
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local seen = redis.call('TYPE', KEYS[4]).ok
if ARGV[1] ~= '' then
  if seen ~= 'none' and seen ~= 'zset' then redis.call('DEL', KEYS[4]) end
  redis.call('ZADD', KEYS[4], now, ARGV[1])
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now - tonumber(ARGV[4]))
  local extra = redis.call('ZCARD', KEYS[4]) - tonumber(ARGV[3])
  if extra > 0 then redis.call('ZREMRANGEBYRANK', KEYS[4], 0, extra - 1) end
  seen = 'zset'
end
local out = {}
for i = 1, 3 do
  out[i] = redis.call('TYPE', KEYS[i]).ok == 'hash' and redis.call('HGETALL', KEYS[i]) or {}
end
out[4] = -1
if ARGV[2] ~= '' then
  out[4] = seen == 'zset' and redis.call('ZCOUNT', KEYS[4], now - tonumber(ARGV[2]), '+inf') or 0
end
return out"""

_FOLLOWERS = """#!lua flags=no-writes
-- KEYS: seen; ARGV: within (seconds)
local t = redis.call('TIME')
return redis.call('ZCOUNT', KEYS[1], tonumber(t[1]) + tonumber(t[2]) / 1e6 - tonumber(ARGV[1]), '+inf')"""


def _guarded(method: Callable[..., T]) -> Callable[..., T]:
    """Redis out of reach (or refusing) becomes ``RoomUnavailable``, with the reason and without the password."""

    @functools.wraps(method)
    def call(self: RedisRoom, *args: Any, **kwargs: Any) -> T:
        try:
            self._join()
            return method(self, *args, **kwargs)
        except redis.AuthenticationError as error:
            raise RoomUnavailable(f"the class room (Redis at {self.where}) refused this server's password") from error
        except (redis.ConnectionError, redis.TimeoutError) as error:
            raise RoomUnavailable(f"the class room (Redis at {self.where}) cannot be reached") from error
        except redis.ResponseError as error:
            full = isinstance(error, redis.exceptions.OutOfMemoryError) or "maxmemory" in str(error)
            reason = "is full (maxmemory): nothing was changed" if full else f"refused the request ({error})"
            raise RoomUnavailable(f"the class room (Redis at {self.where}) {reason}") from error

    return call


class RedisRoom:
    """The class room of class ``class_id`` in the Redis behind ``client`` (thread-safe: the client pools connections)."""

    def __init__(
        self, client: redis.Redis, class_id: str, where: str = "?", fingerprint: Callable[[], dict] | None = None
    ) -> None:
        self._redis = client
        self._fingerprint = fingerprint  # computed at the first request (it hashes the model files); None: no check
        self._joined = False
        self.class_id = class_id
        self.where = where  # host:port/db, for messages (never the password)
        self.prefix = f"llmx:{{{class_id}}}:"
        register = client.register_script
        self._broadcast, self._pause = register(_BROADCAST), register(_PAUSE)
        self._new_round, self._add_draws = register(_NEW_ROUND), register(_ADD_DRAWS)
        self._guess, self._reveal = register(_GUESS), register(_REVEAL)
        self._seen, self._followers = register(_SEEN), register(_FOLLOWERS)
        self._join_script = register(_JOIN)
        self._issue_token, self._check_token = register(_ISSUE_TOKEN), register(_CHECK_TOKEN)
        self._read_hashes, self._draws_of = register(_READ_HASHES), register(_DRAWS_OF)
        self._round_logits = register(_ROUND_LOGITS)
        self._draw_view = register(_DRAW_VIEW)
        self._claim_key_try, self._key_proved = register(_CLAIM_KEY_TRY), register(_KEY_PROVED)
        self._teaching = register(_TEACHING)
        self._beat_read, self._beat_seen = register("#!lua flags=no-writes\n" + _BEAT), register(_WRITES + _BEAT)
        self._scripts = [value for value in vars(self).values() if isinstance(value, redis.commands.core.Script)]

    @classmethod
    def from_url(cls, url: str, class_id: str, fingerprint: Callable[[], dict] | None = None) -> RedisRoom:
        """A room on the Redis at ``url`` (``redis://:password@host:port/db``); connects on first use, not here, so a
        server starts while Redis is down (its class panel says so until Redis is back)."""
        client = redis.Redis.from_url(
            url,
            socket_timeout=TIMEOUT_S,
            socket_connect_timeout=TIMEOUT_S,
            retry=Retry(ExponentialBackoff(cap=0.2, base=0.05), 1),  # one retry, on a fresh connection (a restart)
            retry_on_error=[redis.ConnectionError],
            health_check_interval=30,
        )
        return cls(client, class_id, where=_where(url), fingerprint=fingerprint)

    def key(self, name: str) -> str:
        return self.prefix + name

    def _join(self) -> None:
        """Before this replica's first request: load the scripts (Redis refuses to load one while it is full, so a
        full Redis still answers the read-only ones), then write this replica's fingerprint, or check it against the
        class's. (A restarted Redis forgets the scripts; the client loads each again when Redis says so.)"""
        if self._joined:
            return
        for script in self._scripts:
            self._redis.script_load(script.script)
        if self._fingerprint is None:
            self._joined = True
            return
        try:
            ours = self._fingerprint()
        except Exception as error:  # noqa: BLE001  (a model file that cannot be read: say so, in the class panel)
            raise RoomUnavailable(f"this replica's startup fingerprint cannot be computed ({error})") from error
        text = json.dumps(ours, sort_keys=True)
        theirs = self._join_script(keys=[self.key("fingerprint")], args=[text])
        if theirs == 0:
            self._joined = True
            return
        try:
            known = json.loads(theirs)
            if not isinstance(known, dict):
                raise ValueError("not a fingerprint")
        except ValueError:  # corrupt: as if none was written
            self._redis.set(self.key("fingerprint"), text)
            self._joined = True
            return
        from ui.classroom.fingerprint import differences

        raise ReplicaRefused(
            f"this replica cannot join class {self.class_id!r}: {', '.join(differences(ours, known)) or 'its settings'} "
            "differ from those of the class's other replicas. Start every replica from the same checkout, model "
            "files and settings (scripts/run-school.sh clears a class's fingerprint when it starts the school)"
        )

    # -- the teacher's reloads -------------------------------------------------------------------------
    @_guarded
    def issue_teacher_token(self) -> str:
        """As ``Room.issue_teacher_token``: valid ``TEACHER_TOKEN_TTL_S`` after its last use, ``MAX_TEACHER_TOKENS``
        per class."""
        token = secrets.token_hex(16)
        self._issue_token(keys=[self.key("teachers")], args=[_hashed(token), TEACHER_TOKEN_TTL_S, MAX_TEACHER_TOKENS])
        return token

    @_guarded
    def is_teacher_token(self, token: str) -> bool:
        """True for a token this class issued, used within ``TEACHER_TOKEN_TTL_S``, not revoked; a check is a use."""
        return bool(self._check_token(keys=[self.key("teachers")], args=[_hashed(token), TEACHER_TOKEN_TTL_S]))

    @_guarded
    def revoke_teacher_token(self, token: str) -> None:
        self._redis.zrem(self.key("teachers"), _hashed(token))

    # -- teacher-key tries -----------------------------------------------------------------------------
    def _key_try_keys(self, address: str) -> list[str]:
        return [self.key(f"keys:tries:{rules.key_address(address)}"), self.key("keys:tries")]

    @_guarded
    def claim_key_try(self, address: str) -> float:
        """As ``Room.claim_key_try``: 0 (the try goes ahead, counted for the address and the class) or the seconds left
        to wait; one script, so replicas at once never let two tries through where one may go."""
        limits = [rules.KEY_FIRST_WAIT_S, rules.KEY_FREE_TRIES_ADDRESS, rules.KEY_WAIT_CAP_ADDRESS_S]
        limits += [rules.KEY_FREE_TRIES_CLASS, rules.KEY_WAIT_CAP_CLASS_S, rules.KEY_TRIES_KEPT_S]
        left = self._claim_key_try(keys=self._key_try_keys(address), args=limits)
        return float(left.decode() if isinstance(left, bytes) else left)

    @_guarded
    def key_proved(self, address: str) -> None:
        self._key_proved(keys=self._key_try_keys(address))

    @_guarded
    def teaching(self, session: str, within_s: float) -> int:
        """As ``Room.teaching``, by Redis' clock: the other teacher sessions broadcasting within ``within_s``."""
        return int(self._teaching(keys=[self.key("teaching")], args=[session, within_s]))

    # -- who follows -----------------------------------------------------------------------------------
    @_guarded
    def seen(self, student: str) -> None:
        self._seen(keys=[self.key("seen")], args=[student, MAX_STUDENTS, SEEN_KEEP_S])

    @_guarded
    def followers(self, within_s: float) -> int:
        return int(self._followers(keys=[self.key("seen")], args=[within_s]))

    # -- the teacher's view ----------------------------------------------------------------------------
    @_guarded
    def broadcast(self, page: str, query: dict[str, str]) -> int:
        check_broadcast(page, query)
        return int(self._broadcast(keys=[self.key("broadcast")], args=[page, _canonical(query)]))

    @_guarded
    def pause(self) -> int:
        return int(self._pause(keys=[self.key("broadcast")]))

    @_guarded
    def current(self) -> Broadcast:
        try:
            return _broadcast_of(self._redis.hgetall(self.key("broadcast")))
        except redis.ResponseError as error:
            if "WRONGTYPE" not in str(error):
                raise
            return Broadcast(0, "", {}, 0.0)  # corrupt: no broadcast yet

    @_guarded
    def rounds(self) -> Rounds:
        """The rounds' ids, each checked as ``draw_round``/``guess_round`` check their head (a round whose head cannot
        be read is no round here either); one round trip, the two heads only (every open class page polls this)."""
        return self._read([self.key("draw"), self.key("guess")], _rounds_of, Rounds(None, None, False))

    @_guarded
    def heartbeat(self, student: str | None, within_s: float | None) -> Beat:
        """One tick of a tab's heartbeat in one round trip (one script): ``student`` (a follower) seen, then the rounds,
        the broadcast and the followers within ``within_s`` (None: not counted), read at one moment. What cannot be
        read back counts as no round, no broadcast, as ``rounds`` and ``current`` say."""
        keys = [self.key(name) for name in ("draw", "guess", "broadcast", "seen")]
        script = self._beat_read if student is None else self._beat_seen
        args = [student or "", "" if within_s is None else within_s, MAX_STUDENTS, SEEN_KEEP_S]
        draw, guess, shown, followers = script(keys=keys, args=args)
        rounds = _rounds_of(*(dict(zip(flat[::2], flat[1::2])) for flat in (draw, guess)))
        return Beat(rounds, _broadcast_of(dict(zip(shown[::2], shown[1::2]))), None if followers < 0 else followers)

    # -- draw for the class ----------------------------------------------------------------------------
    def _draw_keys(self) -> list[str]:
        return [self.key(name) for name in ("draw", "draw:streams", "draw:lens", "draw:counts")]

    @_guarded
    def new_draw_round(
        self, experiment: Experiment, replacing: str | None | object = ANY, logits: bytes | None = None
    ) -> str:
        keys = self._draw_keys() + [self.key("draw:logits")]  # dropped with the old round, set with the new
        return self._start(keys, experiment, replacing, logits)

    @_guarded
    def round_logits(self, round_id: str) -> bytes | None:
        """As ``Room.round_logits``: read with the round's id at one moment (a new round's logits never pass for
        the old one's)."""
        return self._round_logits(keys=[self.key("draw"), self.key("draw:logits")], args=[round_id]) or None

    @_guarded
    def draw_round(self) -> DrawRound | None:
        def build(head: dict, streams: dict, lens: dict, counts: dict) -> DrawRound | None:
            streams, lens, known = _text(streams), _text(lens), _head(_text(head))
            if known is None:
                return None
            draws = {student: _tokens(streams.get(student, "")) for student in lens}
            if any(len(draws[student]) != int(n) for student, n in lens.items()):
                raise ValueError("a student's count is not its stream's length")
            pooled = {int(token): int(n) for token, n in _text(counts).items()}
            if sum(pooled.values()) != sum(map(len, draws.values())):
                raise ValueError("the pooled counts are not the streams' sum")
            return DrawRound(*known[:2], draws, known[2], pooled)

        return self._read(self._draw_keys(), build, default=None)

    @_guarded
    def draw_view(self, student: str) -> DrawView | None:
        """The round's head, pooled counts and counts per student only (one read-only script): what a class page
        polls every ``REFRESH_S``, without the streams a school-size round makes megabytes of."""
        keys = [self.key("draw"), self.key("draw:lens"), self.key("draw:counts")]
        try:
            reply = self._draw_view(keys=keys, args=[student])
            if not reply:
                return None  # a count that cannot be read: no round
            head, counts, students, total, mine = reply
            known = _head(_text(dict(zip(head[::2], head[1::2]))))
            if known is None:
                return None
            pooled = Counter({int(token): int(n) for token, n in _text(dict(zip(counts[::2], counts[1::2]))).items()})
            if sum(pooled.values()) != int(total):
                return None  # the pooled counts are not the students' sum
            return DrawView(*known[:2], known[2], pooled, int(students), int(mine))
        except ValueError:
            return None
        except redis.ResponseError as error:
            if "WRONGTYPE" not in str(error):
                raise
            return None

    @_guarded
    def draws_of(self, round_id: str, student: str) -> int:
        try:
            counted = self._draws_of(keys=[self.key("draw"), self.key("draw:lens")], args=[round_id, student])
            return int(counted or 0)
        except ValueError:  # corrupt: as if none counted (a press then finds the round unreadable)
            return 0
        except redis.ResponseError as error:
            if "WRONGTYPE" not in str(error):
                raise
            return 0

    @_guarded
    def add_draws(self, round_id: str, student: str, first: int, tokens: list[int]) -> int:
        code, value = self._add_draws(
            keys=self._draw_keys(),
            args=[round_id, student, int(first), MAX_STUDENTS, MAX_DRAWS_PER_STUDENT, *(int(t) for t in tokens)],
        )
        if code == -1:
            raise RoomError("this draw round is over: the teacher started a new one")
        if code == -2:
            raise RoomError(f"the round already has {MAX_STUDENTS} students")
        if code == -3:
            raise RoomError(f"draw {first} comes after draw {value}, which was never counted")
        if code == -4:
            raise RoomError(UNREADABLE)
        return int(value)

    # -- guess the next token --------------------------------------------------------------------------
    def _guess_keys(self) -> list[str]:
        return [self.key("guess"), self.key("guess:guesses")]

    @_guarded
    def new_guess_round(self, experiment: Experiment, replacing: str | None | object = ANY) -> str:
        return self._start(self._guess_keys(), experiment, replacing)

    @_guarded
    def guess_round(self) -> GuessRound | None:
        def build(head: dict, guesses: dict) -> GuessRound | None:
            known = _head(_text(head))
            if known is None:
                return None
            return GuessRound(*known[:2], _text(guesses), _text(head).get("revealed") == "1", known[2])

        return self._read(self._guess_keys(), build, default=None)

    @_guarded
    def guess(self, round_id: str, student: str, text: str) -> None:
        text = checked_guess(text)
        code = self._guess(keys=self._guess_keys(), args=[round_id, student, text, MAX_STUDENTS])
        if code == -1:
            raise RoomError("this guess round is over: the teacher started a new one")
        if code == -2:
            raise RoomError("the answer is out: guesses are closed until the next round")
        if code == -3:
            raise RoomError(f"the round already has {MAX_STUDENTS} guesses")
        if code == -4:
            raise RoomError(UNREADABLE)

    @_guarded
    def reveal(self, round_id: str) -> None:
        self._reveal(keys=[self.key("guess")], args=[round_id])

    # -- helpers ---------------------------------------------------------------------------------------
    def _start(
        self, keys: list[str], experiment: Experiment, replacing: str | None | object, logits: bytes | None = None
    ) -> str:
        if replacing is None:  # the page showed no round: one that is stored but cannot be read counts as none
            replacing = self._unreadable_round(keys[0])
        shown = _ANY if replacing is ANY else (replacing or "")
        args = [shown, secrets.token_hex(6), _experiment_json(experiment)] + ([logits] if logits is not None else [])
        started = self._new_round(keys=keys, args=args)
        return started.decode() if isinstance(started, bytes) else str(started)

    def _unreadable_round(self, head_key: str) -> bytes | None:
        """The id of the round stored at ``head_key`` when it cannot be read (the pages show it as no round), else None.
        A teacher's press on a page that showed no round replaces exactly that round: if another press replaced it
        meanwhile, the script finds that one and starts none (as for any press delivered twice)."""

        def stored(head: dict) -> bytes | None:  # the raw id, as the script compares it (it may not even be text)
            try:
                readable = _head(_text(head)) is not None
            except ValueError:
                readable = False
            return None if readable else head.get(b"id")

        return self._read([head_key], stored, default=None)

    def _read(self, keys: list[str], build: Callable[..., T], default: T) -> T:
        """The hashes ``keys`` read by one read-only script (one consistent snapshot, one round trip, allowed while
        Redis is full), built into the value; what cannot be built (corrupt data) is ``default``. Redis out of reach
        raises (``_guarded`` says so)."""
        try:
            replies = self._read_hashes(keys=keys)
            return build(*(dict(zip(flat[::2], flat[1::2])) for flat in replies))
        except (ValueError, KeyError, TypeError, redis.ResponseError) as error:
            if isinstance(error, redis.ResponseError) and "WRONGTYPE" not in str(error):
                raise
            return default


def _hashed(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _broadcast_of(fields: dict) -> Broadcast:
    """The broadcast hash read back (bytes); one that cannot be read (or none yet) is version 0."""
    try:
        fields = _text(fields)
        version = int(fields.get("version", 0))
        if not version:
            return Broadcast(0, "", {}, 0.0)
        query = json.loads(fields["query"])
        if not isinstance(query, dict) or not all(isinstance(v, str) for v in query.values()):
            raise ValueError("the query is not link parameters")
        return Broadcast(version, fields["page"], query, float(fields["at"]), fields["live"] == "1")
    except (ValueError, KeyError, TypeError):
        return Broadcast(0, "", {}, 0.0)


def _rounds_of(draw: dict, guess: dict) -> Rounds:
    """The two rounds' heads read back (bytes) as ``Rounds``; a head that cannot be read is no round."""
    try:
        draw_head, guess_head = _head(_text(draw)), _head(_text(guess))
        return Rounds(
            draw_head[0] if draw_head else None,
            guess_head[0] if guess_head else None,
            bool(guess_head) and _text(guess).get("revealed") == "1",
        )
    except (ValueError, KeyError, TypeError):
        return Rounds(None, None, False)


def _where(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return parts.path
    return f"{parts.hostname or 'localhost'}:{parts.port or 6379}{parts.path or '/0'}"


def _canonical(query: dict[str, str]) -> str:
    return json.dumps(query, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _text(fields: dict) -> dict[str, str]:
    return {key.decode(): value.decode() for key, value in fields.items()}


def _id(value: bytes | str | None) -> str | None:
    """A round id as the room wrote it (hex), else None (no round)."""
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    return value if value and all(c in "0123456789abcdef" for c in value) else None


def _head(fields: dict[str, str]) -> tuple[str, Experiment, int] | None:
    """A round's id, experiment and number as the room wrote them, or None (no round, or one that cannot be read)."""
    round_id = _id(fields.get("id"))
    if round_id is None:
        return None
    try:
        number = int(fields["number"])
        return (round_id, _experiment(fields["experiment"]), number) if number > 0 else None
    except (ValueError, KeyError, TypeError):
        return None


def _tokens(text: str) -> list[int]:
    return [int(token) for token in text.split(",")] if text else []


def _experiment_json(experiment: Experiment) -> str:
    params = experiment.params
    return json.dumps(
        {
            "model": experiment.model,
            "prompt": experiment.prompt,
            "chat": experiment.chat,
            "params": asdict(params) if isinstance(params, SamplingParams) else None,
        }
    )


def _experiment(text: str) -> Experiment:
    """An experiment read back; ``ValueError`` (or ``TypeError``/``KeyError``) when it is not one the room wrote."""
    data = json.loads(text)
    if not isinstance(data["model"], str) or not isinstance(data["prompt"], str) or not isinstance(data["chat"], bool):
        raise ValueError("not an experiment")
    params = SamplingParams(**data["params"]) if data["params"] is not None else SamplingParams()
    return Experiment(data["model"], data["prompt"], data["chat"], params)
