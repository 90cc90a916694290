"""The models this server offers (an allowlist set by whoever starts it) and the session's choice.

A browser never names a file: the shared link's ``model=`` and the sidebar pick a
*name* from this list, and only the operator decides which source each name loads.
By default the list holds the two packaged models, SmolLM2-135M-Instruct (the
default) and gemma-3-270m, the second only where its package is installed
(``missing()`` names a packaged model that is not, with the command that installs it).
``LLM_EXPLORER_MODELS`` adds entries as ``name=source`` pairs separated by ``;``
(a source is what ``inference.load_engine`` accepts: a packaged model's name, a .gguf
file, a Hugging Face folder, or a hub id); ``LLM_EXPLORER_MODEL`` replaces the default
entry's source.
"""
from __future__ import annotations

import os
import re
from functools import lru_cache

import streamlit as st

from inference.model.packages import GEMMA3_270M, SMOLLM2, install_hint, is_installed

MODEL = "model"  # session key: the chosen model's name (one of ``allowlist()``)
DEFAULT_NAME = SMOLLM2
PACKAGED_EXTRA = (GEMMA3_270M,)  # offered beside the default, by name, when installed
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MAX_MODELS = 4  # engines kept loaded at once (fp32: ~0.5 GB for SmolLM2, ~1.1 GB for Gemma 3 270M)


class ModelListError(ValueError):
    """``LLM_EXPLORER_MODELS`` is malformed (the message says which entry)."""


def allowlist() -> dict[str, str | None]:
    """Name -> source (``None`` = the embedded default GGUF), default first, at most ``MAX_MODELS``.

    Read on every cached call of every page run (results are keyed by model): the
    parse is cached per value of the two environment variables.
    """
    return dict(_parse(os.environ.get("LLM_EXPLORER_MODEL") or None, os.environ.get("LLM_EXPLORER_MODELS", ""))[0])


def missing() -> dict[str, str]:
    """Packaged models this server would offer but cannot (not installed): name -> how to install it."""
    return dict(_parse(os.environ.get("LLM_EXPLORER_MODEL") or None, os.environ.get("LLM_EXPLORER_MODELS", ""))[1])


Entries = tuple[tuple[str, str | None], ...]


@lru_cache(maxsize=8)
def _parse(default_source: str | None, extra: str) -> tuple[Entries, tuple[tuple[str, str], ...]]:
    """(offered name -> source, missing packaged name -> install hint); installs are checked once per value."""
    default_name = os.path.basename(default_source.rstrip("/")) if default_source else DEFAULT_NAME
    models: dict[str, str | None] = {_checked_name(default_name.removesuffix(".gguf")): default_source}
    installed = {name: is_installed(name) for name in PACKAGED_EXTRA}
    models.update({name: name for name in PACKAGED_EXTRA if installed[name] and name not in models})
    for entry in filter(None, (part.strip() for part in extra.split(";"))):
        name, sep, source = entry.partition("=")
        if not sep or not source.strip():
            raise ModelListError(f"LLM_EXPLORER_MODELS entry {entry!r} is not name=source")
        models[_checked_name(name.strip())] = source.strip()
    if len(models) > MAX_MODELS:
        raise ModelListError(f"LLM_EXPLORER_MODELS offers {len(models)} models; at most {MAX_MODELS} are kept loaded")
    return tuple(models.items()), tuple((name, install_hint(name)) for name in PACKAGED_EXTRA if not installed[name])


def _checked_name(name: str) -> str:
    if not NAME_PATTERN.fullmatch(name):
        raise ModelListError(f"model name {name!r} must be 1-64 letters, digits, '.', '_' or '-'")
    return name


def default_name() -> str:
    return next(iter(allowlist()))


def current() -> str:
    """The session's model name; the default when unset or no longer offered."""
    name = st.session_state.get(MODEL)
    if name not in allowlist():
        name = st.session_state[MODEL] = default_name()
    return name
