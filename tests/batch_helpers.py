"""Tiny random engines for batching tests: built from ``ModelConfig`` + ``Transformer``, no files.

Prompts are token-id lists, so no real tokenizer is needed; ``IdTokenizer`` is just
enough for the engine and the streaming decoder (text = the ids, space separated).
"""
from __future__ import annotations

import pytest
import torch

from inference.config import ModelConfig
from inference.engine import Engine
from inference.model import Transformer
from inference.sampling import SamplingParams, sample

VOCAB = 97


@pytest.fixture(autouse=True, scope="module")
def single_thread():
    """Tiny models run many times faster on one thread, and this machine's cores are shared."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


class _HFStub:
    eos_token_id = None


class IdTokenizer:
    hf = _HFStub()

    def decode(self, ids: list[int]) -> str:
        return "".join(f" {i}" for i in ids)


def tiny_engine(family: str, eos_ids: tuple[int, ...] = ()) -> Engine:
    """A 2-layer random model of ``family`` ("llama" with GQA, or "gpt2") behind an ``Engine``."""
    config = ModelConfig(
        family=family, n_layers=2, n_heads=4, n_kv_heads=2 if family == "llama" else 4, d_model=64, d_ff=128,
        vocab_size=VOCAB, max_seq_len=256, head_dim=16, rope_theta=10000.0, tie_embeddings=family == "gpt2",
        attention_bias=family == "gpt2", mlp_bias=family == "gpt2", eos_token_ids=eos_ids, name=f"tiny-{family}",
    )
    generator = torch.Generator().manual_seed(0)
    model = Transformer(config)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.2)
    return Engine(model.eval(), IdTokenizer())


def greedy(max_new_tokens: int, stop_on_eos: bool = True) -> SamplingParams:
    return SamplingParams(temperature=0.0, max_new_tokens=max_new_tokens, stop_on_eos=stop_on_eos)


def solo(engine: Engine, prompt: list[int], params: SamplingParams) -> tuple[list[int], list[torch.Tensor]]:
    """Tokens and per-step logits (V,) of one request run alone through ``Engine.generate``."""
    tokens, logits = [], []
    ids = list(prompt)
    cache = engine.new_cache(len(ids) + params.max_new_tokens)
    generator = params.make_generator()
    step_logits = engine.prefill(ids, cache)
    for index in range(params.max_new_tokens):
        logits.append(step_logits)
        token = sample(step_logits, params, generator, previous_ids=ids).token_id
        tokens.append(token)
        ids.append(token)
        if (params.stop_on_eos and token in engine.eos_ids) or index + 1 == params.max_new_tokens:
            break
        step_logits = engine.decode_step(token, cache)
    assert tokens == [s.token_id for s in engine.generate(prompt, params)]  # the reference is generate itself
    return tokens, logits


# Very different lengths: 1, 4, 37 and 90 tokens.
PROMPTS = [
    [7],
    [5, 60, 17, 40],
    [(i * 37 + 11) % VOCAB for i in range(37)],
    [(i * 13 + 3) % VOCAB for i in range(90)],
]
