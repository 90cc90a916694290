"""The reference implementations the benchmarks (and the parity tests) compare our engine against.

- transformers on our converted folder (``transformers_model``): the same weights, read
  by transformers' own model code (what the engine benchmark times).
- transformers reading a GGUF file itself (``transformers_gguf_model``): its own
  dequantization, tensor names and fix-ups, independent of ``inference.model.gguf``.
  That takes ~40-50 s for Gemma 3 270M (mostly parsing the 262,144-entry tokenizer
  metadata), so the loaded model is saved once as safetensors into a checksummed
  folder of the user cache (``cache_root()/reference``), keyed by the GGUF's sha256 and
  transformers' version; later runs load it in a few seconds.

Other references (llama.cpp on the same GGUF) plug into ``inference.bench.__main__``'s
``EXTRA_DECODE`` table; ``gguf_source`` gives them the file an engine was converted from.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from ..model.gguf import cache_root, checksummed_folder, sha256_file

REFERENCE_FORMAT = 1


def gguf_source(folder: Path) -> Path | None:
    """The GGUF file a converted folder was made from (its manifest says), or ``None`` for a plain HF folder."""
    try:
        return Path(json.loads((Path(folder) / "manifest.json").read_text())["source"])
    except (OSError, ValueError, KeyError):
        return None


def transformers_model(folder: Path, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu"):
    """transformers' own model class on one of our (HF-format) folders."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype).to(device).eval()


def transformers_gguf_folder(gguf_path: Path) -> Path:
    """A folder holding what transformers itself reads out of ``gguf_path`` (built once, checked every time)."""
    import transformers

    gguf_path = Path(gguf_path)
    source_hash = sha256_file(gguf_path)
    folder = cache_root() / "reference" / f"{gguf_path.stem}-{source_hash[:16]}-transformers-{transformers.__version__}"
    return checksummed_folder(folder, gguf_path, source_hash, lambda out: _save_gguf_reference(gguf_path, out),
                              cache_format=REFERENCE_FORMAT)


def transformers_gguf_model(gguf_path: Path, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu"):
    """transformers' model as transformers itself reads ``gguf_path`` (from the cached folder)."""
    return transformers_model(transformers_gguf_folder(gguf_path), dtype, device)


def _save_gguf_reference(gguf_path: Path, out: Path) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name,
                                                 dtype=torch.float32)
    # The weights are already dequantized to float32; only the GGUF marker keeps them from being saved.
    del model.config.quantization_config
    model.hf_quantizer = None
    model.save_pretrained(str(out))
