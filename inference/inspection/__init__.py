"""What the explorer reads of a model, as numpy arrays and plain dataclasses: the engine's inspection API.

Every function here takes an ``Engine`` (or an object of one: a ``Stepper``, a GGUF file) and
plain values, and returns numpy arrays, Python numbers and frozen dataclasses, never a torch
tensor, so its caller needs no torch and the results can be cached, pickled across a process
boundary and drawn as they are. The explorer reaches them through its backend
(``inference.api``); a script or a notebook may call them directly.

- ``info``: the model's facts (config, dtype, parameters, what the weights are);
- ``embeddings``: rows of the embedding matrix, their lengths and nearest neighbours (read a
  block of rows at a time, never the whole matrix: a quantized matrix is decoded only where
  read), RoPE's tables and learned positions;
- ``attention``: every layer's and head's attention maps of one traced forward, and the
  sliding window measured on a long prompt;
- ``residual``: the residual stream through every block (the block walk) and the logit lens;
- ``experiments``: the model under interventions (before and after, the lens, head importance,
  activation patching, direct logit attribution);
- ``sampling``: the sampler's recorded stages and draws on numpy logits, and its χ² test;
- ``cache``: one request's KV cache as arrays, its size, and cached against uncached timing;
- ``weights``: the GGUF file's tensors and bytes, this machine's memory speed, every weights
  mode against float32;
- ``blocks``: one stored GGUF block's codes, scales and what they decode to.
"""

from ..model.memory import release_freed_memory
from . import experiments, weights
from .attention import AttentionArrays, WindowView, attention_arrays, window_view
from .blocks import BlockLayout, StoredLayout, decode_block, kernel_held, stored_layout
from .cache import CacheBytes, CacheTiming, CacheView, cache_bytes, cache_view, measure_cache_timing
from .embeddings import EmbeddingReader
from .experiments import AttributionTerms, PatchLogits, head_means, next_token_probs, patch_column, patch_logits
from .info import ModelInfo, model_info
from .residual import (
    BLOCK_STAGES,
    FOUR_NORM_STAGES,
    BlockWalk,
    LastPosition,
    Lens,
    TracedPrompt,
    last_position,
    traced_prompt,
)
from .sampling import RecordedDraw, draw_ids, recorded_draw
from .weights import FileSummary, ModeComparison, file_summary, memory_read_speed

__all__ = [
    "AttentionArrays",
    "WindowView",
    "attention_arrays",
    "window_view",
    "CacheBytes",
    "CacheTiming",
    "CacheView",
    "cache_bytes",
    "cache_view",
    "measure_cache_timing",
    "EmbeddingReader",
    "AttributionTerms",
    "PatchLogits",
    "head_means",
    "next_token_probs",
    "patch_column",
    "patch_logits",
    "ModelInfo",
    "model_info",
    "release_freed_memory",
    "BLOCK_STAGES",
    "FOUR_NORM_STAGES",
    "BlockWalk",
    "LastPosition",
    "Lens",
    "TracedPrompt",
    "last_position",
    "traced_prompt",
    "RecordedDraw",
    "draw_ids",
    "recorded_draw",
    "FileSummary",
    "ModeComparison",
    "StoredLayout",
    "BlockLayout",
    "decode_block",
    "kernel_held",
    "stored_layout",
    "file_summary",
    "memory_read_speed",
    "experiments",
    "weights",
]
