"""The CUDA path, where a GPU is present (skipped otherwise; ``scripts/gpu-check.sh`` runs it on a lent GPU).

A lent GPU machine has no model package and no network, so these tests build their models here: the
tiny random Llama and Gemma 3 of ``tests/test_batching.py``, moved to CUDA. On CUDA the engine runs in
bfloat16 by default and ``quant="int4"`` uses torch's CUDA 4-bit kernel (its own packing). Checked: the
kernels' self-check, CUDA float32 (TF32 off) against CPU float32 within the derived bound, and
cache == recompute on CUDA in bfloat16 and on the 4-bit path. The real model's accuracy targets run
where the model package (and the ``gguf`` reader) is installed; the one-graph step on CUDA (captured
and compiled) is checked by ``inference.bench.gpu``, which ``scripts/gpu-check.sh`` runs next. This
file needs nothing the GPU machine lacks (``tests/test_gpu_check.py`` collects it with gguf,
streamlit and plotly unimportable).
"""

from __future__ import annotations

import copy

import pytest
import torch

from tests.tolerances import max_abs_diff, model_tolerance

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")
CUDA = torch.device("cuda")
IDS = [5, 60, 17, 40, 33, 2, 71, 9, 12, 44, 80, 3]


def on_cuda(engine, dtype=torch.float32):
    from inference import Engine

    model = copy.deepcopy(engine.model).to(CUDA, dtype)
    model.reset_rotary(CUDA)
    return Engine(model.eval(), engine.tokenizer)


def test_cuda_kernels_pass_their_self_check():
    from inference.model.quant import kernel_problem

    assert kernel_problem(CUDA) is None


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_cuda_float32_equals_cpu(family):
    from tests.test_batching import tiny_engine

    torch.backends.cuda.matmul.allow_tf32 = False
    cpu = tiny_engine(family)
    expected = cpu.forward_logits(IDS)
    got = on_cuda(cpu).forward_logits(IDS)
    assert max_abs_diff(got, expected) <= model_tolerance(cpu.config, expected, context=len(IDS))


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_cuda_cache_equals_recompute_in_bfloat16_and_on_4_bits(family):
    from inference.model.quant import quantize_model
    from tests.test_batching import tiny_engine

    for mode in ("bf16", "int4"):
        engine = on_cuda(tiny_engine(family), torch.bfloat16 if mode == "bf16" else torch.float32)
        if mode == "int4":
            engine.model.quantization = quantize_model(engine.model, "int4")
        cache = engine.new_cache(len(IDS))
        steps = [engine.prefill(IDS[:4], cache)] + [engine.decode_step(t, cache) for t in IDS[4:-1]]
        full = engine.forward_logits(IDS[:-1])
        bound = model_tolerance(engine.config, full, context=len(IDS), dtype=torch.bfloat16)
        assert max_abs_diff(torch.stack(steps), full[3:]) <= bound, mode


@pytest.mark.real_model
@pytest.mark.parametrize("quant", [None, "gguf"])
def test_cuda_engine_meets_the_accuracy_targets(quant):
    from inference import load_engine
    from inference.bench.accuracy import PROMPTS, compare
    from inference.model.errors import ModelLoadError

    try:
        engine = load_engine(device="cpu", dtype="float32")
    except (ModelLoadError, ImportError) as exc:  # a lent GPU machine has no model package (nor gguf)
        pytest.skip(str(exc))
    cuda = load_engine(device="cuda", quant=quant)
    prompts = [engine.tokenizer.encode(p) for p in PROMPTS]
    result = compare(
        [engine.forward_logits(ids) for ids in prompts], [cuda.forward_logits(ids) for ids in prompts], f"cuda {quant}"
    )
    assert result.top1_agreement >= 0.99 and result.mean_kl_nats <= 2e-3, result
