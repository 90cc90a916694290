"""The derived float32 bound (inference/model/tolerances.py) against the spread the real model actually shows.

On SmolLM2-135M-Instruct, one prompt runs solo at two threads (the reference), at one
thread, and inside left-padded batches of 2, 4 and 8 rows (other matrix shapes, so other
sum orders), and through the KV cache one token at a time. Every variant must stay within
the bound; the test prints the margin. This is the one test that changes torch's thread
count (and puts it back), because measuring across thread counts is its point.
"""

from __future__ import annotations

import pytest
import torch

from inference import set_threads
from inference.serving.padding import left_pad
from tests.tolerances import logit_tolerance, max_abs_diff, model_tolerance

pytestmark = pytest.mark.real_model

PROMPT = "The cat sat on the mat because it was tired."
MATES = ["Hi", "A much longer prompt that pads every other row of the batch by quite a few tokens here"]


def test_bound_grows_with_scale_depth_and_reduction():
    base = logit_tolerance(10.0, reduction=100, depth=4, compared=1000)
    assert logit_tolerance(20.0, 100, 4, 1000) == pytest.approx(2 * base)
    assert logit_tolerance(10.0, 400, 4, 1000) == pytest.approx(2 * base)
    assert logit_tolerance(10.0, 100, 16, 1000) == pytest.approx(2 * base)
    assert logit_tolerance(10.0, 100, 4, 10**6) > base
    assert logit_tolerance(10.0, 100, 4, 1000, dtype=torch.bfloat16) == pytest.approx(base * 2.0**16)


def test_real_model_spread_across_threads_and_batch_shapes_is_within_the_bound(engine):
    ids = engine.encode_prompt(PROMPT)
    reference = engine.forward_logits(ids)  # (T, V), the suite's thread count
    tolerance = model_tolerance(engine.config, reference, context=len(ids))
    spread: dict[str, float] = {}
    before = torch.get_num_threads()
    try:
        for threads in (1, 2):
            set_threads(threads)
            spread[f"{threads} thread(s)"] = max_abs_diff(engine.forward_logits(ids), reference)
    finally:
        set_threads(before)
    for batch in (2, 4, 8):
        rows = [ids] + [engine.encode_prompt(MATES[i % 2]) for i in range(batch - 1)]
        padded, mask, positions = left_pad(rows)  # (B, T) each
        logits = engine.model(padded, positions=positions, padding_mask=mask)[0]  # row 0 is the prompt
        spread[f"batch {batch}"] = max_abs_diff(logits[-len(ids) :].float(), reference)
    cache = engine.new_cache(len(ids))
    stepwise = [engine.prefill(ids[:1], cache)] + [engine.decode_step(t, cache) for t in ids[1:]]
    spread["cache, one token at a time"] = max_abs_diff(torch.stack(stepwise), reference)
    worst = max(spread.values())
    print(
        f"bound {tolerance:.2e}; spread "
        + ", ".join(f"{k} {v:.1e}" for k, v in spread.items())
        + f"; margin {tolerance / max(worst, 1e-12):.0f}x"
    )
    assert worst <= tolerance, spread
