"""The models this server offers (an allowlist set by whoever starts it) and the session's choice.

A browser never names a file: the shared link's ``model=`` and the sidebar pick a
*name* from this list, and only the operator decides which source each name loads.
By default the list holds the two packaged models, SmolLM2-135M-Instruct (the
default) and gemma-3-270m, the second only where its package is installed
(``missing()`` names a packaged model that is not, with the command that installs it).
``LLM_EXPLORER_MODELS`` adds entries as ``name=source`` pairs separated by ``;``
(a source is what ``inference.load_engine`` accepts: a packaged model's name, a .gguf
file, a Hugging Face folder, or a hub id); ``LLM_EXPLORER_MODEL`` replaces the default
entry's source. Both are read, and their entries checked, with every other setting
(``inference.settings``).
"""

from __future__ import annotations

import os
from functools import lru_cache

import streamlit as st

from inference.api import GEMMA3_270M, SMOLLM2, ModelListError, checked_model_name, install_hint, is_installed, settings
from ui.common import state

MODEL = state.MODEL  # the session's choice (links and the sidebar name it so)
DEFAULT_NAME = SMOLLM2
PACKAGED_EXTRA = (GEMMA3_270M,)  # offered beside the default, by name, when installed
MAX_MODELS = 4  # engines kept loaded at once (fp32: ~0.5 GB for SmolLM2, ~1.1 GB for Gemma 3 270M)


def allowlist() -> dict[str, str | None]:
    """Name -> source (``None`` = the embedded default GGUF), default first, at most ``MAX_MODELS``.

    Read on every cached call of every page run (results are keyed by model): the
    list is built once per value of the two settings.
    """
    operator = settings.current()
    return dict(_parse(operator.model, operator.models)[0])


def missing() -> dict[str, str]:
    """Packaged models this server would offer but cannot (not installed): name -> how to install it."""
    operator = settings.current()
    return dict(_parse(operator.model, operator.models)[1])


Entries = tuple[tuple[str, str | None], ...]


@lru_cache(maxsize=8)
def _parse(
    default_source: str | None, extra: tuple[tuple[str, str], ...]
) -> tuple[Entries, tuple[tuple[str, str], ...]]:
    """(offered name -> source, missing packaged name -> install hint); installs are checked once per value."""
    default_name = os.path.basename(default_source.rstrip("/")) if default_source else DEFAULT_NAME
    models: dict[str, str | None] = {checked_model_name(default_name.removesuffix(".gguf")): default_source}
    installed = {name: is_installed(name) for name in PACKAGED_EXTRA}
    models.update({name: name for name in PACKAGED_EXTRA if installed[name] and name not in models})
    models.update(extra)
    if len(models) > MAX_MODELS:
        raise ModelListError(f"LLM_EXPLORER_MODELS offers {len(models)} models; at most {MAX_MODELS} are kept loaded")
    return tuple(models.items()), tuple((name, install_hint(name)) for name in PACKAGED_EXTRA if not installed[name])


def default_name() -> str:
    return next(iter(allowlist()))


def current() -> str:
    """The session's model name; the default when unset or no longer offered."""
    name = st.session_state.get(MODEL)
    if name not in allowlist():
        name = st.session_state[MODEL] = default_name()
    return name
