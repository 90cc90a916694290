"""Sentences of the Quantization page, each computed from the block on screen and the file's own counts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ui.common import format as fmt

BITS_WORD = {4: "four-bit", 5: "five-bit", 6: "six-bit", 8: "eight-bit"}
# What one block of each type holds besides its codes, in words (the layouts of ggml's block structs).
SHARED = {
    "Q4_0": "one scale d",
    "Q4_1": "one scale d and one offset m",
    "Q5_0": "one scale d",
    "Q8_0": "one scale d",
    "Q4_K": "two numbers d and dmin and give each of their 8 groups of 32 a six-bit scale and a six-bit min",
    "Q6_K": "one scale d and give each of their 16 groups of 16 a signed eight-bit scale",
}
WEIGHTS_PER_BLOCK = {"Q4_0": 32, "Q4_1": 32, "Q5_0": 32, "Q8_0": 32, "Q4_K": 256, "Q6_K": 256}
CODE_BITS = {"Q4_0": 4, "Q4_1": 4, "Q5_0": 5, "Q8_0": 8, "Q4_K": 4, "Q6_K": 6}


def _a(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def type_phrase(type_name: str) -> str:
    """One block type in words: 'Q5_0: blocks of 32 weights share one scale d, each weight a five-bit code'."""
    unit = "super-blocks" if WEIGHTS_PER_BLOCK[type_name] == 256 else "blocks"
    return (
        f"**{type_name}**: {unit} of {WEIGHTS_PER_BLOCK[type_name]} weights share {SHARED[type_name]}; each weight "
        f"keeps {_a(BITS_WORD[CODE_BITS[type_name]])} code"
    )


def intro_sentence(weights_by_type: Mapping[str, int]) -> str:
    """How this model's file stores its weights: the block types it holds, by share of the weights (float tensors
    such as the norms included in the shares), each described as it is laid out."""
    quantized = {t: n for t, n in weights_by_type.items() if t in SHARED}
    if not quantized:
        return (
            "This model's file stores its weights as plain floats: there are no blocks of codes to show. The "
            "comparison below quantizes them on load (int8, int4)."
        )
    total = sum(weights_by_type.values())
    order = sorted(quantized, key=lambda t: -quantized[t])
    kinds = list(order) + ["float"]
    rest = total - sum(quantized.values())
    share_of = dict(zip(kinds, fmt.whole_pct([quantized[t] for t in order] + [rest])))
    phrases = [f"{type_phrase(t)} ({share_of[t]} of the weights)" for t in order]
    floats = f"; the remaining {share_of['float']} (norms and the like) stay float32" if rest else ""
    if len(order) == 1:
        return f"This model's file stores its weights in one block type, {phrases[0]}{floats}."
    return (
        f"This model's file mixes {len(order)} block types: " + "; ".join(phrases) + f"{floats}. Pick one "
        "below to see a real block of it."
    )


def block_sentence(
    type_name: str,
    n_weights: int,
    n_bytes: int,
    codes: Sequence[int],
    code_bits: int,
    fields: Mapping[str, float],
    sub_codes: Mapping[str, Sequence[int]],
    rule: str,
) -> str:
    """What the block on screen holds: its bytes, bits per weight, its codes' span and its own scales."""
    codes = np.asarray(codes)
    stored = ", ".join(f"{name} = {value:.6g}" for name, value in fields.items())
    subs = "; ".join(f"its {len(v)} {name}s {int(np.min(v))}–{int(np.max(v))}" for name, v in sub_codes.items())
    return (
        f"The file keeps these {n_weights} weights in **{n_bytes} bytes** — {fmt.fixed(8 * n_bytes / n_weights, 2)} "
        f"bits per weight, against 32 for float32 — as {n_weights} {BITS_WORD[code_bits]} codes (here "
        f"{int(codes.min())} to {int(codes.max())}), {stored} (fp16)" + (f", {subs}" if subs else "") + f": {rule}."
    )


def check_sentence(decoded: np.ndarray, reference: np.ndarray) -> str:
    """The block decoded here from its bytes against the ``gguf`` package's own dequantization of the same bytes."""
    difference = float(np.abs(np.asarray(decoded, np.float64) - np.asarray(reference, np.float64)).max())
    if difference == 0:
        return (
            "Decoded here from these bytes, and by the `gguf` package's own `dequantize` from the same bytes: the "
            "same numbers, bit for bit."
        )
    return (
        f"Decoded here from these bytes against the `gguf` package's own `dequantize`: they differ by up to "
        f"{difference:.2e}."
    )
