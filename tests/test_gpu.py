"""The CUDA path, when a GPU is present (skipped otherwise; scripts/gpu-check.sh runs it on a lent GPU).

On CUDA the engine runs in bfloat16 and ``quant="gguf"`` uses torch's CUDA 4-bit kernel (its own
packing) and dense bfloat16 for 8-bit groups (torch has no CUDA 8-bit kernel). Checked against the
float32 CPU engine: the kernels must pass their self-check, and the predictions must meet the same
accuracy targets as on the CPU.
"""
from __future__ import annotations

import pytest
import torch

pytestmark = [pytest.mark.real_model,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")]


def test_cuda_kernels_pass_their_self_check():
    from inference.model.quant import kernel_problem

    assert kernel_problem(torch.device("cuda")) is None


@pytest.mark.parametrize("quant", [None, "gguf"])
def test_cuda_engine_meets_the_accuracy_targets(engine, quant):
    from inference import load_engine
    from inference.bench.accuracy import PROMPTS, compare

    cuda = load_engine(device="cuda", quant=quant)
    prompts = [engine.tokenizer.encode(p) for p in PROMPTS]
    result = compare([engine.forward_logits(ids) for ids in prompts], [cuda.forward_logits(ids) for ids in prompts],
                     f"cuda {quant}")
    assert result.top1_agreement >= 0.99 and result.mean_kl_nats <= 2e-3, result
