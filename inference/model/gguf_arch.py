"""The GGUF architectures the engine reads, each in one place: its config and its tensor names.

Per architecture (``general.architecture`` in the file's metadata): the Hugging Face
``config.json`` dict built from the metadata, the map from GGUF tensor names
(``blk.3.attn_q.weight``) to Hugging Face names (``model.layers.3.self_attn.q_proj.weight``),
and the fix-up llama.cpp's converter makes necessary (Llama: its Q/K row permutation
undone; Gemma 3: norm weights stored as 1 + w, so 1 is taken off again, as transformers
does). Reading and dequantizing the file is ``gguf.py``'s concern; renaming HF tensors
into the engine's layout is ``weights.py``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import ModelLoadError

Metadata = dict[str, Any]


@dataclass(frozen=True)
class GGUFArchitecture:
    name: str  # general.architecture
    hf_config: Callable[[Metadata], dict[str, Any]]  # metadata -> a transformers config.json dict
    tensor_names: dict[str, str]  # GGUF name part -> HF name part
    # (HF name, rows, HF config) -> rows in HF order: a reordering of whole rows, so it applies to a
    # tensor's raw quantized rows (blocks never cross rows) as well as to its dequantized values
    reorder_rows: Callable[[str, np.ndarray, dict[str, Any]], np.ndarray]
    # (HF name, dequantized values) -> the values HF expects (a change of the numbers themselves)
    fix_values: Callable[[str, np.ndarray], np.ndarray]

    def fix(self, name: str, values: np.ndarray, hf_config: dict[str, Any]) -> np.ndarray:
        """Dequantized values of tensor ``name`` as Hugging Face stores them."""
        return self.fix_values(name, self.reorder_rows(name, values, hf_config))

    def hf_name(self, gguf_name: str) -> str:
        parts = gguf_name.split(".")  # "blk.3.attn_q.weight" or "token_embd.weight"
        try:
            if parts[0] == "blk":
                return f"model.layers.{parts[1]}.{self.tensor_names[parts[2]]}.{parts[3]}"
            return f"{self.tensor_names[parts[0]]}.{parts[1]}"
        except (KeyError, IndexError):
            raise ModelLoadError(f"GGUF tensor {gguf_name!r} is not part of the {self.name!r} architecture") from None


def architecture(name: str | None) -> GGUFArchitecture:
    """The architecture called ``name``, or a clear error naming it and listing the supported ones."""
    try:
        return ARCHITECTURES[name]
    except KeyError:
        raise ModelLoadError(
            f"GGUF architecture {name!r} is not supported: the engine reads {', '.join(map(repr, ARCHITECTURES))}"
        ) from None


def _reader(meta: Metadata, arch: str) -> Callable[..., Any]:
    def get(key: str, default: Any = None) -> Any:
        return meta.get(f"{arch}.{key}", default)

    return get


def _common(meta: Metadata, arch: str) -> dict[str, Any]:
    """The fields every decoder-only GGUF names the same way."""
    get = _reader(meta, arch)
    n_heads = int(get("attention.head_count"))
    d_model = int(get("embedding_length"))
    return {
        "hidden_size": d_model,
        "intermediate_size": int(get("feed_forward_length")),
        "num_hidden_layers": int(get("block_count")),
        "num_attention_heads": n_heads,
        "num_key_value_heads": int(get("attention.head_count_kv", n_heads)),
        "max_position_embeddings": int(get("context_length", 2048)),
        "rms_norm_eps": float(get("attention.layer_norm_rms_epsilon", 1e-6)),
        "vocab_size": int(get("vocab_size", 0)) or None,  # None: read off the embedding matrix
        "bos_token_id": meta.get("tokenizer.ggml.bos_token_id"),
        "eos_token_id": meta.get("tokenizer.ggml.eos_token_id"),
        "pad_token_id": meta.get("tokenizer.ggml.padding_token_id"),
        "torch_dtype": "float32",
        "name_or_path": meta.get("general.name", "gguf model"),
    }


# -- llama ------------------------------------------------------------------------------
def _llama_config(meta: Metadata) -> dict[str, Any]:
    get = _reader(meta, "llama")
    config = _common(meta, "llama")
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        **config,
        "head_dim": int(get("rope.dimension_count", config["hidden_size"] // config["num_attention_heads"])),
        "rope_theta": float(get("rope.freq_base", 10000.0)),
    }


def _unpermute(weight: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's Q/K row order (interleaved rotary pairs) back to HF's half-split order."""
    rows = weight.shape[0]
    return (
        weight.reshape(n_heads, rows // n_heads // 2, 2, *weight.shape[1:])  # (h, hd/2, 2, in)
        .swapaxes(1, 2)  # (h, 2, hd/2, in)
        .reshape(weight.shape)
    )


def _llama_rows(name: str, rows: np.ndarray, hf_config: dict[str, Any]) -> np.ndarray:
    if name.endswith("q_proj.weight"):
        return _unpermute(rows, hf_config["num_attention_heads"])
    if name.endswith("k_proj.weight"):
        return _unpermute(rows, hf_config["num_key_value_heads"])
    return rows


def _same_rows(name: str, rows: np.ndarray, hf_config: dict[str, Any]) -> np.ndarray:
    return rows


def _same_values(name: str, values: np.ndarray) -> np.ndarray:
    return values


_LLAMA_NAMES = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",  # Llama's HF name for the norm before the MLP
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


# -- gemma3 -----------------------------------------------------------------------------
GEMMA3_SLIDING_WINDOW_PATTERN = 6  # llama.cpp's and transformers' default: every 6th layer is global
GEMMA3_LOCAL_ROPE_BASE = 10_000.0  # llama.cpp's and transformers' default for the local layers


def _gemma3_config(meta: Metadata) -> dict[str, Any]:
    get = _reader(meta, "gemma3")
    config = _common(meta, "gemma3")
    n_layers = config["num_hidden_layers"]
    head_dim = int(get("attention.key_length", config["hidden_size"] // config["num_attention_heads"]))
    pattern = get("attention.sliding_window_pattern", GEMMA3_SLIDING_WINDOW_PATTERN)
    if isinstance(pattern, list):  # newer files list, per layer, whether it is local
        local = [bool(flag) for flag in pattern]
    else:
        local = [bool((i + 1) % int(pattern)) for i in range(n_layers)]
    global_rope: dict[str, Any] = {"rope_type": "default", "rope_theta": float(get("rope.freq_base", 1_000_000.0))}
    scaling = get("rope.scaling.type")
    if scaling and scaling != "none":
        global_rope.update(rope_type=scaling, factor=float(get("rope.scaling.factor", 1.0)))
    return {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        **config,
        "head_dim": head_dim,
        "hidden_activation": "gelu_pytorch_tanh",
        # The file does not carry it; llama.cpp scales scores by 1/sqrt(head_dim) for Gemma 3 (all but 27B).
        "query_pre_attn_scalar": head_dim,
        "sliding_window": int(get("attention.sliding_window", 4096)),
        "layer_types": ["sliding_attention" if is_local else "full_attention" for is_local in local],
        "rope_parameters": {
            "full_attention": global_rope,
            "sliding_attention": {
                "rope_type": "default",
                "rope_theta": float(get("rope.freq_base_swa", GEMMA3_LOCAL_ROPE_BASE)),
            },
        },
        "final_logit_softcapping": None,
        "attn_logit_softcapping": None,
    }


def _gemma3_values(name: str, values: np.ndarray) -> np.ndarray:
    # llama.cpp stores Gemma's RMSNorm weights as 1 + w (its norm multiplies by the weight);
    # transformers' Gemma keeps w and multiplies by 1 + w.
    return values - 1 if name.endswith("norm.weight") else values


_GEMMA3_NAMES = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "attn_output": "self_attn.o_proj",
    "post_attention_norm": "post_attention_layernorm",  # Gemma's HF name for the norm *after* attention
    "ffn_norm": "pre_feedforward_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "post_ffw_norm": "post_feedforward_layernorm",
}

ARCHITECTURES: dict[str, GGUFArchitecture] = {
    "llama": GGUFArchitecture("llama", _llama_config, _LLAMA_NAMES, _llama_rows, _same_values),
    "gemma3": GGUFArchitecture("gemma3", _gemma3_config, _GEMMA3_NAMES, _same_rows, _gemma3_values),
}
