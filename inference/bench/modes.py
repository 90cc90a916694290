"""The weights modes the engine benchmarks name (``--modes``): what ``load_engine`` is asked for in each."""

from __future__ import annotations

MODES = {  # name -> (dtype of the activations, quant, compiled decode step)
    "fp32": ("float32", None, False),
    "fp32-compiled": ("float32", None, True),
    "bf16": ("bfloat16", None, False),
    "bf16-compiled": ("bfloat16", None, True),
    "gguf": ("float32", "gguf", False),
    "gguf-compiled": ("float32", "gguf", True),
    "int8": ("float32", "int8", False),
    "int4": ("float32", "int4", False),
}
DEFAULT_MODES = "fp32,fp32-compiled,bf16,bf16-compiled,gguf,gguf-compiled,int8,int4"
