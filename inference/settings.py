"""The operator's settings: every ``LLM_EXPLORER_*`` environment variable, read and checked once, in one place.

Owns ``Settings`` (frozen: what the library and the app built on it run with), ``Settings.from_env``
(reads a mapping of variables, checks each value, and raises ``SettingsError`` naming the variable
and what it accepts), ``VARIABLES`` (each variable, its default and what it does; docs/settings.md's table
is tested against it) and ``current()``: this process's settings, read from the environment the first
time anything asks and kept (``reload()`` reads them again, for a test that changes the environment).
Nothing else in the project reads an ``LLM_EXPLORER_*`` variable, but the class's own three
(``ui/classroom/settings.py``: a class is the app's business, not the engine's).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TypeVar

from .number_text import NumberError, whole
from .serving.config import ServeConfig

T = TypeVar("T")  # a settings class

PREFIX = "LLM_EXPLORER_"
QUANT_CHOICES = ("gguf", "int8", "int4", "none")
SERVER_CHOICES = ("thread", "process")
SWITCHES = {"on": True, "off": False}
TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
DTYPE_CHOICES = ("float32", "fp32", "bfloat16", "bf16", "float16", "fp16")  # ``load_engine``'s names (tested)
DEVICE_PATTERN = re.compile(r"cpu|cuda(:\d+)?|mps")
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MAX_SLOTS = 256


@dataclass(frozen=True)
class Variable:
    name: str
    default: str  # as docs/settings.md writes it
    meaning: str


VARIABLES: tuple[Variable, ...] = (
    Variable(
        "LLM_EXPLORER_MODEL",
        "the embedded SmolLM2-135M-Instruct",
        "the default model's source: a `.gguf` file, a local Hugging Face folder or a hub id",
    ),
    Variable("LLM_EXPLORER_MODELS", "none", "more allowlisted models, `name=source;name=source`"),
    Variable("LLM_EXPLORER_DEVICE", "the best there is", "`cpu`, `cuda`, `cuda:N` or `mps`"),
    Variable("LLM_EXPLORER_DTYPE", "bfloat16 on CUDA, float32 elsewhere", "`float32`, `bfloat16` or `float16`"),
    Variable("LLM_EXPLORER_QUANT", "none", "the weights: `none` (dense float32, exact), `gguf`, `int8` or `int4`"),
    Variable("LLM_EXPLORER_COMPILE", "off", "`1`/`on`: the compiled decode step"),
    Variable("LLM_EXPLORER_THREADS", "every core", "torch threads for the app, set once at start"),
    Variable("LLM_EXPLORER_SERVER", "thread", "where the generation worker runs: `thread` or `process`"),
    Variable("LLM_EXPLORER_PREFIX_CACHE", "on", "`on`: reuse the K/V of prompt starts; `off`: every prompt whole"),
    Variable("LLM_EXPLORER_SLOTS", "16", "requests the generation server runs at once, 1 to 256"),
    Variable(
        "LLM_EXPLORER_KV",
        "paged:16",
        "where the generation server keeps K/V: `paged` or `paged:BLOCK` (blocks of BLOCK positions), `contiguous`",
    ),
    Variable(
        "LLM_EXPLORER_KV_POSITIONS",
        "slots × 1,024",
        "positions the paged K/V pool holds, at least 1,024; fewer than the slots reserve saves memory",
    ),
    Variable(
        "LLM_EXPLORER_CACHE",
        "~/.cache/llm-explorer",
        "where converted models are kept (made when the settings are read; one that cannot be made or written stops the app with why)",
    ),
)


class SettingsError(ValueError):
    """An ``LLM_EXPLORER_*`` variable holds a value the program cannot use (the message names it and the choices)."""


class ModelListError(SettingsError):
    """``LLM_EXPLORER_MODELS`` (or the models it adds) is malformed (the message says which entry)."""


@dataclass(frozen=True)
class Settings:
    model: str | None = None  # the default entry's source; None: the embedded SmolLM2-135M-Instruct
    models: tuple[tuple[str, str], ...] = ()  # more allowlisted models: (name, source)
    device: str | None = None  # None: CUDA, then MPS, then the CPU
    dtype: str | None = None  # None: bfloat16 on CUDA, float32 elsewhere
    quant: str | None = None  # "gguf", "int8", "int4"; None: dense weights
    compile: bool = False
    threads: int | None = None  # None: every core
    server: str = "thread"  # "thread" or "process"
    prefix_cache: bool = True
    slots: int | None = None  # None: ``ServeConfig``'s default
    kv: int | None = ServeConfig.kv_block_size  # the K/V block size; None: the slot cache (contiguous)
    kv_positions: int | None = None  # the paged pool's positions; None: every slot's whole length
    cache: Path = Path.home() / ".cache" / "llm-explorer"  # where converted models are kept

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Every ``LLM_EXPLORER_*`` variable of ``environ`` (default: this process's environment), checked."""
        env = os.environ if environ is None else environ

        def get(name: str) -> str:
            return env.get(PREFIX + name, "").strip()

        quant = _choice("QUANT", get("QUANT").lower(), QUANT_CHOICES, "none")
        return cls(
            model=get("MODEL") or None,
            models=_model_entries(get("MODELS")),
            device=_device(get("DEVICE")),
            dtype=_choice("DTYPE", get("DTYPE").lower(), DTYPE_CHOICES, None),
            quant=None if quant == "none" else quant,
            compile=_switch("COMPILE", get("COMPILE").lower()),
            threads=_whole("THREADS", get("THREADS"), 1, None, "(unset: every core)"),
            server=_choice("SERVER", get("SERVER").lower(), SERVER_CHOICES, "thread"),
            prefix_cache=SWITCHES[_choice("PREFIX_CACHE", get("PREFIX_CACHE").lower(), tuple(SWITCHES), "on")],
            slots=_whole("SLOTS", get("SLOTS"), 1, MAX_SLOTS),
            kv=_kv(get("KV").lower()),
            kv_positions=_whole(
                "KV_POSITIONS", get("KV_POSITIONS"), ServeConfig.slot_capacity, None, "(unset: slots × 1,024)"
            ),
            cache=_cache_folder(get("CACHE"), env),
        )


def _user_cache(env: Mapping[str, str]) -> Path:
    """The user's cache folder: ``XDG_CACHE_HOME``, or ``~/.cache``."""
    return Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")


def _cache_folder(value: str, env: Mapping[str, str]) -> Path:
    """``LLM_EXPLORER_CACHE`` (else ``_user_cache``'s llm-explorer), made now if it is missing (as the first model's
    load would make it) and checked: a folder this user can write, else ``SettingsError`` (that load would otherwise
    end in the operating system's own error, far from the setting)."""
    folder = Path(value).expanduser() if value else _user_cache(env) / "llm-explorer"
    named = f"{PREFIX}CACHE={value!r}" if value else f"the cache folder {str(folder)!r} ({PREFIX}CACHE unset)"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        why = f"cannot be made ({error.strerror or type(error).__name__})"
    else:
        if os.access(folder, os.W_OK | os.X_OK):
            return folder
        why = "cannot be written"
    raise SettingsError(f"{named}: the folder {why}; use a folder this user can write")


def _choice(name: str, value: str, choices: tuple[str, ...], default: str | None) -> str | None:
    if not value:
        return default
    if value not in choices:
        raise SettingsError(f"{PREFIX}{name}={value!r}: use one of {', '.join(choices)}")
    return value


def _switch(name: str, value: str) -> bool:
    if value in TRUE:
        return True
    if value in FALSE or not value:
        return False
    raise SettingsError(f"{PREFIX}{name}={value!r}: use 1 or 0 (on or off)")


def _whole(name: str, value: str, low: int, high: int | None, unset: str = "") -> int | None:
    if not value:
        return None
    try:
        return whole(value, low=low, high=high)
    except NumberError:
        span = f"from {low} to {high}" if high is not None else f"of at least {low}"
        raise SettingsError(
            f"{PREFIX}{name}={value!r}: use a whole number {span}{' ' + unset if unset else ''}"
        ) from None


def _kv(value: str) -> int | None:
    """``paged`` (blocks of 16 positions), ``paged:BLOCK`` or ``contiguous`` (None: the slot cache)."""
    if value in ("", "paged"):
        return ServeConfig.kv_block_size
    if value == "contiguous":
        return None
    if value.startswith("paged:"):
        try:
            return whole(value.removeprefix("paged:"), low=1)
        except NumberError:
            pass
    raise SettingsError(f"{PREFIX}KV={value!r}: use paged, paged:BLOCK (a block size of at least 1) or contiguous")


def _device(value: str) -> str | None:
    if not value:
        return None
    if not DEVICE_PATTERN.fullmatch(value.lower()):
        raise SettingsError(f"{PREFIX}DEVICE={value!r}: use cpu, cuda, cuda:N or mps")
    return value.lower()


def checked_model_name(name: str) -> str:
    """``name`` if it can name an allowlisted model (it travels in links), else ``ModelListError``."""
    if not MODEL_NAME.fullmatch(name):
        raise ModelListError(f"model name {name!r} must be 1-64 letters, digits, '.', '_' or '-'")
    return name


def _model_entries(value: str) -> tuple[tuple[str, str], ...]:
    entries = []
    for entry in filter(None, (part.strip() for part in value.split(";"))):
        name, sep, source = entry.partition("=")
        if not sep or not source.strip():
            raise ModelListError(f"{PREFIX}MODELS entry {entry!r} is not name=source")
        entries.append((checked_model_name(name.strip()), source.strip()))
    return tuple(entries)


def read_once(from_env: Callable[[], T]) -> tuple[Callable[[], T], Callable[[], T]]:
    """A settings module's ``current`` and ``reload``: ``current()`` is this process's settings, read from the
    environment by ``from_env`` once (the first call; raises ``SettingsError``); ``reload()`` reads it again (a test
    that changes it; a running app keeps what it started with)."""
    current = cache(from_env)

    def reload() -> T:
        current.cache_clear()
        return current()

    return current, reload


current, reload = read_once(Settings.from_env)
