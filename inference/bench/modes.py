"""The weights modes the engine benchmarks name (``--modes``): what ``load_engine`` is asked for in each.

A quantized mode may name the kernel for its weight groups after an ``@`` (``gguf-compiled@groups``,
``inference.model.kernels.KERNELS``); without one the engine picks this CPU's.
"""

from __future__ import annotations

from ..model.kernels import KERNELS

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
MODES.update({f"{mode}@{kernel}": MODES[mode] for mode in ("gguf", "gguf-compiled") for kernel in KERNELS})
DEFAULT_MODES = "fp32,fp32-compiled,bf16,bf16-compiled,gguf,gguf-compiled,int8,int4"


def kernel_of(mode: str) -> str | None:
    """The kernel a mode names (``gguf@groups`` -> "groups"), None for this CPU's."""
    return mode.partition("@")[2] or None
