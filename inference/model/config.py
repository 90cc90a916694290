"""Model configuration: the one dataclass that describes an architecture.

Owns the mapping from a Hugging Face ``config.json`` dict to our own field names
for the three families the engine runs (Llama-style, GPT-2-style and Gemma 3), and
the facts derived from it (KV-cache bytes, which layers are local). It knows
nothing about weights, devices or tokenizers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

Family = Literal["llama", "gpt2", "gemma3"]

LLAMA_MODEL_TYPES = {"llama", "mistral", "smollm", "smollm2"}
GPT2_MODEL_TYPES = {"gpt2"}
GEMMA3_MODEL_TYPES = {"gemma3_text"}
GEMMA3_ACTIVATIONS = {"gelu_pytorch_tanh", "gelu_tanh"}


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
    # Gemma 3 (the defaults leave Llama and GPT-2 as they are). The family itself implies
    # RMSNorm on q and k, four norms per block, GeGLU and Gemma's (1 + weight) RMSNorm.
    sliding_window: int | None = None  # keys a local layer's query sees, itself included; None: all layers global
    local_layers: tuple[int, ...] = ()  # the layers with the sliding window (and their own RoPE base)
    rope_local_theta: float | None = None  # RoPE base of the local layers
    rope_scaling: float = 1.0  # linear RoPE scaling of the global layers: positions are divided by this
    query_pre_attn_scalar: float | None = None  # scores are divided by sqrt(this); None: sqrt(head_dim)
    embed_scale: float = 1.0  # token embeddings are multiplied by this (Gemma: sqrt(d_model))

    def __post_init__(self) -> None:
        if self.n_heads % self.n_kv_heads != 0:
            raise UnsupportedModelError(f"n_heads={self.n_heads} is not a multiple of n_kv_heads={self.n_kv_heads}")
        if self.sliding_window is not None and self.sliding_window < 1:
            raise UnsupportedModelError(f"sliding_window must be >= 1, got {self.sliding_window}")
        if self.local_layers and self.sliding_window is None:
            raise UnsupportedModelError("local_layers are given but no sliding_window")
        outside = [i for i in self.local_layers if not 0 <= i < self.n_layers]
        if outside:
            raise UnsupportedModelError(f"local_layers {outside} are outside 0..{self.n_layers - 1}")
        if self.local_layers and self.rope_local_theta is None:
            raise UnsupportedModelError("local_layers are given but no rope_local_theta")
        if self.rope_scaling <= 0:
            raise UnsupportedModelError(f"rope_scaling must be > 0, got {self.rope_scaling}")

    @property
    def queries_per_kv(self) -> int:
        """How many query heads share one K/V head (grouped-query attention)."""
        return self.n_heads // self.n_kv_heads

    def kv_cache_bytes(self, n_tokens: int, bytes_per_value: int) -> int:
        """Bytes a KV cache needs for ``n_tokens`` positions of one sequence."""
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * bytes_per_value * n_tokens

    def rolling_kv_cache_bytes(self, n_tokens: int, bytes_per_value: int) -> int:
        """Bytes a KV cache would need if local layers kept only their window (a rolling buffer).

        The engine keeps every position in every layer (``kv_cache_bytes``); this is what
        a rolling buffer would hold instead: global layers all ``n_tokens``, local layers
        at most ``sliding_window`` of them.
        """
        per_layer_position = 2 * self.n_kv_heads * self.head_dim * bytes_per_value
        local = len(self.local_layers)
        kept = (self.n_layers - local) * n_tokens + local * min(n_tokens, self.sliding_window or n_tokens)
        return per_layer_position * kept

    @property
    def norms_per_block(self) -> int:
        """Norms inside one block: Gemma 3 norms before *and after* attention and the MLP."""
        return 4 if self.family == "gemma3" else 2

    @property
    def qk_norm(self) -> bool:
        """Whether queries and keys get their own RMSNorm (over head_dim) before RoPE."""
        return self.family == "gemma3"

    @property
    def score_scale_dim(self) -> float:
        """Scores are divided by the square root of this (head_dim unless the model says otherwise)."""
        return float(self.query_pre_attn_scalar or self.head_dim)

    def is_local(self, layer: int) -> bool:
        """Whether ``layer`` attends through the sliding window (a local layer)."""
        return layer in self.local_layers

    def window_for(self, layer: int) -> int | None:
        """How many keys (itself included) a query of ``layer`` may see; ``None``: all before it."""
        return self.sliding_window if self.is_local(layer) else None

    @classmethod
    def from_hf_dict(cls, hf: dict[str, Any], name: str = "model") -> ModelConfig:
        """Build from a transformers ``config.json`` dict (Llama, GPT-2 or Gemma 3 family)."""
        model_type = hf.get("model_type", "")
        if model_type in LLAMA_MODEL_TYPES or "LlamaForCausalLM" in hf.get("architectures", []):
            return cls._from_llama(hf, name)
        if model_type in GPT2_MODEL_TYPES:
            return cls._from_gpt2(hf, name)
        if model_type in GEMMA3_MODEL_TYPES:
            return cls._from_gemma3(hf, name)
        raise UnsupportedModelError(
            f"model_type {model_type!r} is not supported: the engine runs the Llama family "
            f"({sorted(LLAMA_MODEL_TYPES)}), the GPT-2 family and Gemma 3 ({sorted(GEMMA3_MODEL_TYPES)})"
        )

    @classmethod
    def _from_llama(cls, hf: dict[str, Any], name: str) -> ModelConfig:
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
    def _from_gpt2(cls, hf: dict[str, Any], name: str) -> ModelConfig:
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

    @classmethod
    def _from_gemma3(cls, hf: dict[str, Any], name: str) -> ModelConfig:
        activation = hf.get("hidden_activation") or hf.get("hidden_act") or "gelu_pytorch_tanh"
        if activation not in GEMMA3_ACTIVATIONS:
            raise UnsupportedModelError(f"Gemma 3 activation {activation!r} is not supported")
        for option in ("final_logit_softcapping", "attn_logit_softcapping"):
            if hf.get(option) is not None:
                raise UnsupportedModelError(f"Gemma 3 option {option}={hf[option]} is not supported")
        if hf.get("use_bidirectional_attention"):
            raise UnsupportedModelError("bidirectional Gemma 3 attention is not supported")
        n_layers, n_heads = hf["num_hidden_layers"], hf["num_attention_heads"]
        pattern = int(hf.get("sliding_window_pattern") or hf.get("_sliding_window_pattern") or 6)
        layer_types = hf.get("layer_types") or [
            "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n_layers)
        ]
        unknown = sorted(set(layer_types) - {"sliding_attention", "full_attention"})
        if unknown or len(layer_types) != n_layers:
            raise UnsupportedModelError(f"Gemma 3 layer_types {unknown or len(layer_types)} are not supported")
        global_rope, local_rope = _gemma3_rope(hf)
        d_model = hf["hidden_size"]
        return cls(
            family="gemma3",
            n_layers=n_layers,
            n_heads=n_heads,
            n_kv_heads=hf.get("num_key_value_heads") or n_heads,
            d_model=d_model,
            d_ff=hf["intermediate_size"],
            vocab_size=hf["vocab_size"],
            max_seq_len=hf.get("max_position_embeddings", 32768),
            head_dim=hf.get("head_dim") or d_model // n_heads,
            rope_theta=float(global_rope["rope_theta"]),
            norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
            tie_embeddings=bool(hf.get("tie_word_embeddings", True)),
            attention_bias=bool(hf.get("attention_bias", False)),
            mlp_bias=False,
            bos_token_id=hf.get("bos_token_id"),
            eos_token_ids=_as_id_tuple(hf.get("eos_token_id")),
            name=name,
            sliding_window=int(hf["sliding_window"]) if hf.get("sliding_window") else None,
            local_layers=tuple(i for i, kind in enumerate(layer_types) if kind == "sliding_attention")
            if hf.get("sliding_window")
            else (),
            rope_local_theta=float(local_rope["rope_theta"]),
            rope_scaling=float(global_rope.get("factor", 1.0)),
            query_pre_attn_scalar=float(hf.get("query_pre_attn_scalar") or (hf.get("head_dim") or d_model // n_heads)),
            embed_scale=math.sqrt(d_model),
        )


def _gemma3_rope(hf: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The global and local layers' RoPE settings, from the new (per layer type) or the old config format."""
    rope = hf.get("rope_parameters") or {}
    if "full_attention" in rope or "sliding_attention" in rope:
        global_rope = dict(rope.get("full_attention") or {})
        local_rope = dict(rope.get("sliding_attention") or {})
    else:
        global_rope = {"rope_theta": hf.get("rope_theta", 1_000_000.0), **(hf.get("rope_scaling") or {})}
        local_rope = {"rope_theta": hf.get("rope_local_base_freq", 10_000.0)}
    global_rope.setdefault("rope_theta", 1_000_000.0)
    local_rope.setdefault("rope_theta", 10_000.0)
    for kind, settings in (("global", global_rope), ("local", local_rope)):
        rope_type = settings.get("rope_type") or settings.get("type") or "default"
        if rope_type not in ("default", "linear") or (rope_type == "linear" and kind == "local"):
            raise UnsupportedModelError(f"RoPE scaling type {rope_type!r} on the {kind} layers is not supported")
        if rope_type == "default":
            settings.pop("factor", None)
    return global_rope, local_rope


def _as_id_tuple(value: int | list[int] | None) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int):
        return (value,)
    return tuple(int(v) for v in value)
