"""Model configuration: the one dataclass that describes an architecture.

Owns the mapping from a Hugging Face ``config.json`` dict to our own field names
for the two families the engine runs (Llama-style and GPT-2-style). It knows
nothing about weights, devices or tokenizers.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Family = Literal["llama", "gpt2"]

LLAMA_MODEL_TYPES = {"llama", "mistral", "smollm", "smollm2"}
GPT2_MODEL_TYPES = {"gpt2"}


class UnsupportedModelError(ValueError):
    """The checkpoint describes an architecture or option the engine does not run."""


@dataclass(frozen=True)
class ModelConfig:
    family: Family = "llama"
    n_layers: int = 30
    n_heads: int = 9
    n_kv_heads: int = 3
    d_model: int = 576
    d_ff: int = 1536
    vocab_size: int = 49152
    max_seq_len: int = 8192
    head_dim: int = 64
    rope_theta: float = 100000.0
    norm_eps: float = 1e-5
    tie_embeddings: bool = True
    attention_bias: bool = False
    mlp_bias: bool = False
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = field(default_factory=tuple)
    name: str = "model"

    def __post_init__(self) -> None:
        if self.n_heads % self.n_kv_heads != 0:
            raise UnsupportedModelError(
                f"n_heads={self.n_heads} is not a multiple of n_kv_heads={self.n_kv_heads}"
            )

    @property
    def queries_per_kv(self) -> int:
        """How many query heads share one K/V head (grouped-query attention)."""
        return self.n_heads // self.n_kv_heads

    def kv_cache_bytes(self, n_tokens: int, bytes_per_value: int) -> int:
        """Bytes a KV cache needs for ``n_tokens`` positions of one sequence."""
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * bytes_per_value * n_tokens

    @classmethod
    def from_hf_dict(cls, hf: dict[str, Any], name: str = "model") -> "ModelConfig":
        """Build from a transformers ``config.json`` dict (Llama or GPT-2 family)."""
        model_type = hf.get("model_type", "")
        if model_type in LLAMA_MODEL_TYPES or "LlamaForCausalLM" in hf.get("architectures", []):
            return cls._from_llama(hf, name)
        if model_type in GPT2_MODEL_TYPES:
            return cls._from_gpt2(hf, name)
        raise UnsupportedModelError(
            f"model_type {model_type!r} is not supported: the engine runs the Llama family "
            f"({sorted(LLAMA_MODEL_TYPES)}) and the GPT-2 family"
        )

    @classmethod
    def _from_llama(cls, hf: dict[str, Any], name: str) -> "ModelConfig":
        rope = hf.get("rope_parameters") or {}
        scaling = hf.get("rope_scaling") or {}
        rope_type = rope.get("rope_type") or scaling.get("rope_type") or scaling.get("type") or "default"
        if rope_type != "default":
            raise UnsupportedModelError(f"RoPE scaling type {rope_type!r} is not supported")
        n_heads = hf["num_attention_heads"]
        return cls(
            family="llama",
            n_layers=hf["num_hidden_layers"],
            n_heads=n_heads,
            n_kv_heads=hf.get("num_key_value_heads") or n_heads,
            d_model=hf["hidden_size"],
            d_ff=hf["intermediate_size"],
            vocab_size=hf["vocab_size"],
            max_seq_len=hf.get("max_position_embeddings", 2048),
            head_dim=hf.get("head_dim") or hf["hidden_size"] // n_heads,
            rope_theta=float(rope.get("rope_theta", hf.get("rope_theta", 10000.0))),
            norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
            tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
            attention_bias=bool(hf.get("attention_bias", False)),
            mlp_bias=bool(hf.get("mlp_bias", False)),
            bos_token_id=hf.get("bos_token_id"),
            eos_token_ids=_as_id_tuple(hf.get("eos_token_id")),
            name=name,
        )

    @classmethod
    def _from_gpt2(cls, hf: dict[str, Any], name: str) -> "ModelConfig":
        d_model = hf.get("n_embd", 768)
        n_heads = hf.get("n_head", 12)
        activation = hf.get("activation_function", "gelu_new")
        if activation not in ("gelu_new", "gelu_pytorch_tanh"):
            raise UnsupportedModelError(f"GPT-2 activation {activation!r} is not supported")
        return cls(
            family="gpt2",
            n_layers=hf.get("n_layer", 12),
            n_heads=n_heads,
            n_kv_heads=n_heads,
            d_model=d_model,
            d_ff=hf.get("n_inner") or 4 * d_model,
            vocab_size=hf.get("vocab_size", 50257),
            max_seq_len=hf.get("n_positions", 1024),
            head_dim=d_model // n_heads,
            rope_theta=0.0,
            norm_eps=float(hf.get("layer_norm_epsilon", 1e-5)),
            tie_embeddings=True,
            attention_bias=True,
            mlp_bias=True,
            bos_token_id=hf.get("bos_token_id"),
            eos_token_ids=_as_id_tuple(hf.get("eos_token_id")),
            name=name,
        )


def _as_id_tuple(value: int | list[int] | None) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int):
        return (value,)
    return tuple(int(v) for v in value)
