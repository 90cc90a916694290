"""The errors raised while finding, reading or converting a model (shared by every loader module)."""

from __future__ import annotations


class ModelLoadError(RuntimeError):
    """A model could not be found, read or converted."""
