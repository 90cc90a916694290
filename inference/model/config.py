"""Model configuration: the one dataclass that describes an architecture.

Owns the mapping from a Hugging Face ``config.json`` dict to our own field names
for the three families the engine runs (Llama-style, GPT-2-style and Gemma 3), and
the facts derived from it (KV-cache bytes, which layers are local). It knows
nothing about weights, devices or tokenizers. Every field read from the dict is checked
(``_Fields``): a missing, ill-typed or out-of-range one is a ``ModelLoadError`` naming it,
never a raw ``KeyError`` or ``TypeError`` later.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from ..number_text import NumberError
from ..number_text import real as finite_number
from ..number_text import whole as whole_number
from .errors import ModelLoadError

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
        if self.n_heads < 1 or self.n_kv_heads < 1:
            raise UnsupportedModelError(f"n_heads={self.n_heads} and n_kv_heads={self.n_kv_heads} must be >= 1")
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

    def layer_groups(self) -> list[tuple[int | None, tuple[int, ...]]]:
        """The layers grouped by their window, as a paged cache keeps one pool per group: (window, layers) each, the
        global layers (``None``) first, each group's layers in order."""
        windows = sorted({self.window_for(i) for i in range(self.n_layers)}, key=lambda w: w or 0)
        return [(w, tuple(i for i in range(self.n_layers) if self.window_for(i) == w)) for w in windows]

    def layer_places(self) -> dict[int, tuple[int, int]]:
        """Each layer's place in ``layer_groups``: (its group, its index within the group)."""
        return {layer: (g, i) for g, (_, layers) in enumerate(self.layer_groups()) for i, layer in enumerate(layers)}

    @classmethod
    def from_hf_dict(cls, hf: dict[str, Any], name: str = "model") -> ModelConfig:
        """Build from a transformers ``config.json`` dict (Llama, GPT-2 or Gemma 3 family)."""
        if not isinstance(hf, dict):
            raise ModelLoadError(f"{name}'s config.json must hold an object of settings, got {type(hf).__name__}")
        model_type = hf.get("model_type", "")
        if not isinstance(model_type, str) or not all(isinstance(a, str) for a in _list(hf.get("architectures"))):
            raise ModelLoadError(f"{name}'s config.json: model_type and architectures must be text")
        if model_type in LLAMA_MODEL_TYPES or "LlamaForCausalLM" in _list(hf.get("architectures")):
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
        f = _Fields(hf, name)
        rope = f.table("rope_parameters")
        scaling = f.table("rope_scaling")
        rope_type = rope.get("rope_type") or scaling.get("rope_type") or scaling.get("type") or "default"
        if rope_type != "default":
            raise UnsupportedModelError(f"RoPE scaling type {rope_type!r} is not supported")
        return cls(
            family="llama",
            **_llama_style_sizes(f, 2048),
            rope_theta=_Fields(rope, name, "rope_parameters.").real("rope_theta", f.real("rope_theta", 10000.0)),
            norm_eps=f.real("rms_norm_eps", 1e-6),
            tie_embeddings=f.flag("tie_word_embeddings", False),
            attention_bias=f.flag("attention_bias", False),
            mlp_bias=f.flag("mlp_bias", False),
            bos_token_id=f.token_id("bos_token_id"),
            eos_token_ids=f.token_ids("eos_token_id"),
            name=name,
        )

    @classmethod
    def _from_gpt2(cls, hf: dict[str, Any], name: str) -> ModelConfig:
        f = _Fields(hf, name)
        d_model = f.whole("n_embd", 768)
        n_heads = f.whole("n_head", 12)
        activation = hf.get("activation_function", "gelu_new")
        if activation not in ("gelu_new", "gelu_pytorch_tanh"):
            raise UnsupportedModelError(f"GPT-2 activation {activation!r} is not supported")
        return cls(
            family="gpt2",
            n_layers=f.whole("n_layer", 12),
            n_heads=n_heads,
            n_kv_heads=n_heads,
            d_model=d_model,
            d_ff=f.whole("n_inner", None) or 4 * d_model,
            vocab_size=f.whole("vocab_size", 50257),
            max_seq_len=f.whole("n_positions", 1024),
            head_dim=f.split(d_model, n_heads),
            rope_theta=0.0,
            norm_eps=f.real("layer_norm_epsilon", 1e-5),
            tie_embeddings=True,
            attention_bias=True,
            mlp_bias=True,
            bos_token_id=f.token_id("bos_token_id"),
            eos_token_ids=f.token_ids("eos_token_id"),
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
        f = _Fields(hf, name)
        sizes = _llama_style_sizes(f, 32768)
        n_layers, d_model, head_dim = sizes["n_layers"], sizes["d_model"], sizes["head_dim"]
        pattern = f.whole("sliding_window_pattern", None) or f.whole("_sliding_window_pattern", None) or 6
        layer_types = _list(hf.get("layer_types")) or [
            "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n_layers)
        ]
        unknown = sorted(map(str, set(map(str, layer_types)) - {"sliding_attention", "full_attention"}))
        if unknown or len(layer_types) != n_layers:
            raise UnsupportedModelError(f"Gemma 3 layer_types {unknown or len(layer_types)} are not supported")
        global_rope, local_rope = _gemma3_rope(hf, f)
        window = f.whole("sliding_window", None)
        return cls(
            family="gemma3",
            **sizes,
            rope_theta=_Fields(global_rope, name, "global RoPE ").real("rope_theta"),
            norm_eps=f.real("rms_norm_eps", 1e-6),
            tie_embeddings=f.flag("tie_word_embeddings", True),
            attention_bias=f.flag("attention_bias", False),
            mlp_bias=False,
            bos_token_id=f.token_id("bos_token_id"),
            eos_token_ids=f.token_ids("eos_token_id"),
            name=name,
            sliding_window=window,
            local_layers=tuple(i for i, kind in enumerate(layer_types) if kind == "sliding_attention")
            if window
            else (),
            rope_local_theta=_Fields(local_rope, name, "local RoPE ").real("rope_theta"),
            rope_scaling=_Fields(global_rope, name, "global RoPE ").real("factor", 1.0),
            query_pre_attn_scalar=f.real("query_pre_attn_scalar", None) or float(head_dim),
            embed_scale=math.sqrt(d_model),
        )


def _llama_style_sizes(f: _Fields, max_positions: int) -> dict[str, int]:
    """The sizes Llama and Gemma 3 configs name alike (``max_positions``: the family's default context)."""
    n_heads, d_model = f.whole("num_attention_heads"), f.whole("hidden_size")
    return dict(
        n_layers=f.whole("num_hidden_layers"),
        n_heads=n_heads,
        n_kv_heads=f.whole("num_key_value_heads", None) or n_heads,
        d_model=d_model,
        d_ff=f.whole("intermediate_size"),
        vocab_size=f.whole("vocab_size"),
        max_seq_len=f.whole("max_position_embeddings", max_positions),
        head_dim=f.whole("head_dim", None) or f.split(d_model, n_heads),
    )


def _gemma3_rope(hf: dict[str, Any], f: _Fields) -> tuple[dict[str, Any], dict[str, Any]]:
    """The global and local layers' RoPE settings, from the new (per layer type) or the old config format."""
    rope = f.table("rope_parameters")
    if "full_attention" in rope or "sliding_attention" in rope:
        global_rope = dict(_Fields(rope, f.name, "rope_parameters.").table("full_attention"))
        local_rope = dict(_Fields(rope, f.name, "rope_parameters.").table("sliding_attention"))
    else:
        global_rope = {"rope_theta": hf.get("rope_theta", 1_000_000.0), **f.table("rope_scaling")}
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


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


_REQUIRED = object()
# Far above any model the engine runs, and low enough that a typo'd size (1e30 layers) is refused before a
# Transformer of that shape is laid out.
MAX_COUNT = 4096  # layers, heads, the Gemma layer pattern
MAX_SIZE = 2**24  # widths, the vocabulary, positions, the window
COUNTS = {"num_hidden_layers", "num_attention_heads", "num_key_value_heads", "n_layer", "n_head"}
COUNTS |= {"sliding_window_pattern", "_sliding_window_pattern"}


class _Fields:
    """Reads a config dict's fields, each checked: a missing, ill-typed or out-of-range one is a
    ``ModelLoadError`` naming the model, the field and what it must be. JSON text where a number
    belongs is refused (a config's numbers are JSON numbers), and so are NaN and ±inf."""

    def __init__(self, hf: dict[str, Any], name: str, prefix: str = "") -> None:
        self.hf, self.name, self.prefix = hf, name, prefix

    def _get(self, key: str, default: Any) -> Any:
        value = self.hf.get(key)
        if value is None:
            if default is _REQUIRED:
                raise ModelLoadError(f"{self.name}'s config.json has no {self.prefix}{key}")
            return default
        return value

    def _bad(self, key: str, value: Any, rule: str) -> ModelLoadError:
        return ModelLoadError(f"{self.name}'s config.json: {self.prefix}{key}={value!r}: use {rule}")

    def whole(self, key: str, default: Any = _REQUIRED, low: int = 1) -> Any:
        value = self._get(key, default)
        if value is default:
            return value
        high = MAX_COUNT if key in COUNTS else MAX_SIZE
        if low == 0:  # a token id
            high = 2**31 - 1
        rule = f"a whole number from {low} to {high:,}"
        if isinstance(value, str):
            raise self._bad(key, value, rule)
        try:
            return whole_number(value, low=low, high=high)
        except NumberError:
            raise self._bad(key, value, rule) from None

    def real(self, key: str, default: Any = _REQUIRED) -> Any:
        """A finite number > 0 (every real-valued field read here is a base, an epsilon, a factor or a scale)."""
        value = self._get(key, default)
        if value is default:
            return value
        try:
            if isinstance(value, str):
                raise NumberError(value)
            number = finite_number(value)
        except NumberError:
            raise self._bad(key, value, "a finite number above 0") from None
        if number <= 0:
            raise self._bad(key, value, "a finite number above 0")
        return number

    def flag(self, key: str, default: bool) -> bool:
        value = self._get(key, default)
        if not isinstance(value, bool):
            raise self._bad(key, value, "true or false")
        return value

    def table(self, key: str) -> dict[str, Any]:
        value = self._get(key, {})
        if not isinstance(value, dict):
            raise self._bad(key, value, "an object of settings")
        return value

    def token_id(self, key: str) -> int | None:
        return self.whole(key, None, low=0)

    def token_ids(self, key: str) -> tuple[int, ...]:
        value = self._get(key, None)
        if value is None:
            return ()
        items = value if isinstance(value, list) else [value]
        return tuple(_Fields({key: item}, self.name, self.prefix).whole(key, low=0) for item in items)

    def split(self, d_model: int, n_heads: int) -> int:
        """The head size when the config gives none: ``d_model`` shared equally between the heads."""
        if d_model % n_heads:
            raise ModelLoadError(
                f"{self.name}'s config.json: hidden size {d_model} is not a multiple of {n_heads} heads "
                "(and no head_dim is given)"
            )
        return d_model // n_heads
