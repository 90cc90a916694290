"""The class's own settings: the teacher key, where the room lives and the class's name in it.

Owns ``ClassSettings`` (frozen), ``ClassSettings.from_env`` (reads the three ``LLM_EXPLORER_*`` class variables, checks
each, and raises the library's ``SettingsError`` naming the variable and what it accepts), ``VARIABLES`` (docs/settings.md's
class table is tested against it) and ``current()`` / ``reload()``, read once per process like the operator's settings
(``inference.settings``), which know nothing of a class. Plain Python: no Streamlit.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from inference.api import SettingsError, settings

ROOM_SCHEMES = ("redis", "rediss", "unix")  # what ``redis.Redis.from_url`` connects to
CLASS_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")  # a class's name: part of every Redis key of its room
DEFAULT_CLASS_ID = "class"

VARIABLES: tuple[settings.Variable, ...] = (
    settings.Variable("LLM_EXPLORER_TEACHER_KEY", "none (no class mode)", "the teacher's key: class mode on"),
    settings.Variable(
        "LLM_EXPLORER_ROOM",
        "none (the room in the server's memory)",
        "where the class room lives: `redis://:password@127.0.0.1:6379/0`, shared by every replica of a class",
    ),
    settings.Variable(
        "LLM_EXPLORER_CLASS_ID", "class", "the class's name in a shared room: `7b-physics`, its keys' prefix"
    ),
)


@dataclass(frozen=True)
class ClassSettings:
    teacher_key: str | None = None  # None: no class mode
    room: str | None = None  # a Redis url; None: the room lives in this process's memory (one server, one class)
    class_id: str = DEFAULT_CLASS_ID  # the class's name in a shared room (its Redis keys' prefix)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ClassSettings:
        """The class variables of ``environ`` (default: this process's environment), checked."""
        env = os.environ if environ is None else environ

        def get(name: str) -> str:
            return env.get(settings.PREFIX + name, "").strip()

        return cls(
            teacher_key=get("TEACHER_KEY") or None,
            room=_room(get("ROOM")),
            class_id=_class_id(get("CLASS_ID").lower()),
        )


def _room(value: str) -> str | None:
    """A Redis url (``redis://[:password@]host:port/db``, ``rediss://``, ``unix://``); the message never shows
    the password."""
    if not value:
        return None
    scheme, sep, rest = value.partition("://")
    if not sep or scheme.lower() not in ROOM_SCHEMES or not rest.strip("/"):
        shown = (scheme + sep + "…") if sep else (value if "@" not in value else "…")
        raise SettingsError(
            f"{settings.PREFIX}ROOM={shown!r}: use a Redis url, redis://:password@127.0.0.1:6379/0 (or rediss://, "
            "unix://)"
        )
    return value


def _class_id(value: str) -> str:
    if not value:
        return DEFAULT_CLASS_ID
    if not CLASS_ID.fullmatch(value):
        raise SettingsError(
            f"{settings.PREFIX}CLASS_ID={value!r}: use 1 to 32 lower-case letters, digits or '-', starting with a "
            "letter or digit (e.g. 7b-physics)"
        )
    return value


current, reload = settings.read_once(ClassSettings.from_env)  # this process's class settings, read once
