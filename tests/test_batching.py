"""Batched == solo, static and continuous, on tiny random Llama and GPT-2 models (and a few on the real one).

The tiny engines are built here from ``ModelConfig`` + ``Transformer`` (random weights,
no files); prompts are token-id lists, and ``IdTokenizer`` is just enough tokenizer for
the engine and the streaming decoder. ``test_server.py`` reuses these helpers.

Batched and solo runs use other matrix shapes (padding, several rows), so their float32
sums are taken in other orders: logits are compared within ``tests.tolerances``'
derived bound, and greedy tokens must agree wherever the solo run's top two logits are
further apart than that bound (closer, either choice is a correct rounding).
"""

from __future__ import annotations

import pytest
import torch

from inference import ContinuousBatcher, Engine, ModelConfig, SamplingParams, ServeConfig, run_continuous, run_static
from inference.generation.sampling import generator_for, sample
from inference.model.transformer import Transformer
from inference.serving.padding import left_pad
from inference.serving.scheduler import Scheduler, Sequence, SequenceStatus
from tests.tolerances import max_abs_diff, model_tolerance, top2_margin

VOCAB = 97


class IdTokenizer:
    """Token ids as text (" 5 60 17"): enough for the engine's stop rule and the streaming decoder."""

    eos_ids: frozenset[int] = frozenset()

    def decode(self, ids: list[int]) -> str:
        return "".join(f" {i}" for i in ids)


def tiny_engine(family: str, eos_ids: tuple[int, ...] = (), n_layers: int = 2) -> Engine:
    """A random model of ``family`` ("llama" with GQA, "gpt2", or "gemma3" with an 8-key window on the
    even layers and multi-query attention), 2 layers unless told, behind an ``Engine``."""
    gemma = (
        {
            "sliding_window": 8,
            "local_layers": tuple(range(0, n_layers, 2)),
            "rope_local_theta": 10000.0,
            "embed_scale": 8.0,
            "query_pre_attn_scalar": 24.0,
        }
        if family == "gemma3"
        else {}
    )
    config = ModelConfig(
        family=family,
        n_layers=n_layers,
        n_heads=4,
        n_kv_heads={"llama": 2, "gemma3": 1}.get(family, 4),
        d_model=64,
        d_ff=128,
        vocab_size=VOCAB,
        max_seq_len=256,
        head_dim=16,
        rope_theta=10000.0,
        tie_embeddings=family == "gpt2",
        attention_bias=family == "gpt2",
        mlp_bias=family == "gpt2",
        eos_token_ids=eos_ids,
        name=f"tiny-{family}",
        **gemma,
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
    step_logits = engine.prefill(ids, cache)
    for index in range(params.max_new_tokens):
        logits.append(step_logits)
        token = sample(step_logits, params, generator_for(params, index), previous_ids=ids).token_id
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

RUNNERS = {"static": run_static, "continuous": run_continuous}


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def tiny(request):
    return tiny_engine(request.param)


def assert_batched_equals_solo(
    engine: Engine,
    batched_tokens: list[int],
    batched_logits: list[torch.Tensor],
    solo_tokens: list[int],
    solo_logits: list[torch.Tensor],
) -> None:
    """Logits within the derived fp32 bound at every step; tokens equal wherever the choice was not a near-tie."""
    steps = min(len(batched_logits), len(solo_logits))
    tolerance = model_tolerance(engine.config, torch.stack(solo_logits[:steps]), context=256)
    for step in range(steps):
        if batched_tokens[step] != solo_tokens[step]:
            assert top2_margin(solo_logits[step]) < 2 * tolerance, f"step {step}: a clear choice differs"
            return  # a near-tie went the other way: the sequences may part from here
        assert max_abs_diff(batched_logits[step], solo_logits[step]) <= tolerance, f"step {step}"
    assert batched_tokens == solo_tokens


# -- batched == solo ------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["static", "continuous"])
def test_greedy_batched_equals_solo_tokens_and_logits(tiny, mode):
    params = [greedy(n, stop_on_eos=False) for n in (6, 9, 3, 12)]
    run = RUNNERS[mode](tiny, PROMPTS, params, keep_logits=True)
    for prompt, p, result in zip(PROMPTS, params, run.results):
        tokens, logits = solo(tiny, prompt, p)
        assert_batched_equals_solo(tiny, result.token_ids, result.logits, tokens, logits)
        assert result.finish_reason == "length"


@pytest.mark.parametrize("mode", ["static", "continuous"])
def test_gemma3_sliding_window_batched_equals_solo(mode):
    """Prompts of 37 and 90 tokens against an 8-key window: padding, slots and decode all cross it."""
    engine = tiny_engine("gemma3")
    params = [greedy(n, stop_on_eos=False) for n in (6, 9, 3, 12)]
    run = RUNNERS[mode](engine, PROMPTS, params, keep_logits=True, **({"n_slots": 2} if mode == "continuous" else {}))
    for prompt, p, result in zip(PROMPTS, params, run.results):
        tokens, logits = solo(engine, prompt, p)
        assert_batched_equals_solo(engine, result.token_ids, result.logits, tokens, logits)


def test_continuous_with_fewer_slots_than_requests_equals_solo(tiny):
    """Requests wait for a slot, then reuse one that an earlier request left (stale K/V must not leak)."""
    params = [greedy(n, stop_on_eos=False) for n in (2, 10, 4, 7)]
    run = run_continuous(tiny, PROMPTS, params, n_slots=2, keep_logits=True)
    for prompt, p, result in zip(PROMPTS, params, run.results):
        tokens, logits = solo(tiny, prompt, p)
        assert_batched_equals_solo(tiny, result.token_ids, result.logits, tokens, logits)
    assert max(step.cache_slots_in_use for step in run.steps) <= 2


def test_request_joining_midway_gets_its_solo_tokens(tiny):
    batcher = ContinuousBatcher(tiny, ServeConfig(n_slots=4, slot_capacity=128), keep_logits=True)
    first = batcher.add(PROMPTS[3], greedy(12, stop_on_eos=False))
    for _ in range(4):
        batcher.step()
    late = batcher.add(PROMPTS[2], greedy(8, stop_on_eos=False))
    phases = []
    while batcher.has_work:
        phases.append(batcher.step().phase)
    assert phases[0] == "prefill"  # the newcomer was admitted at the next step
    for seq, prompt in ((first, PROMPTS[3]), (late, PROMPTS[2])):
        tokens, logits = solo(tiny, prompt, seq.params)
        assert_batched_equals_solo(tiny, seq.output_ids, batcher.result(seq, 0).logits, tokens, logits)


@pytest.mark.parametrize("mode", ["static", "continuous"])
def test_seeded_sampled_request_ignores_its_batch_mates(tiny, mode):
    mine = SamplingParams(temperature=1.0, top_k=40, seed=1234, max_new_tokens=10, stop_on_eos=False)
    alone, _ = solo(tiny, PROMPTS[1], mine)
    mates_a = [SamplingParams(temperature=1.3, seed=1, max_new_tokens=4), greedy(12)]
    mates_b = [SamplingParams(temperature=0.7, top_p=0.9, seed=99, max_new_tokens=15)]
    run_a = RUNNERS[mode](tiny, [PROMPTS[3], PROMPTS[1], PROMPTS[0]], [mates_a[0], mine, mates_a[1]])
    run_b = RUNNERS[mode](tiny, [PROMPTS[1], PROMPTS[2]], [mine, mates_b[0]])
    assert run_a.results[1].token_ids == alone
    assert run_b.results[0].token_ids == alone


@pytest.mark.parametrize("mode", ["static", "continuous"])
def test_each_token_carries_the_probability_it_was_drawn_with(tiny, mode):
    params = SamplingParams(temperature=0.9, top_p=0.95, seed=5, max_new_tokens=6, stop_on_eos=False)
    steps = list(tiny.generate(PROMPTS[1], params))
    result = RUNNERS[mode](tiny, [PROMPTS[0], PROMPTS[1]], [greedy(3), params], keep_logits=True).results[1]
    assert result.token_ids == [s.token_id for s in steps]
    # softmax(z / T) moves by at most p · 2·max|Δz| / T when the logits move by Δz
    tolerance = model_tolerance(tiny.config, torch.stack(result.logits), context=256)
    for got, step in zip(result.probabilities, steps):
        assert got == pytest.approx(step.probability, abs=step.probability * 2 * tolerance / params.temperature + 1e-12)


# -- finishing ----------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["static", "continuous"])
def test_requests_finish_at_different_steps_and_max_tokens_one(tiny, mode):
    lengths = (1, 5, 2, 8)
    run = RUNNERS[mode](tiny, PROMPTS, [greedy(n, stop_on_eos=False) for n in lengths])
    assert [len(r.token_ids) for r in run.results] == list(lengths)
    assert all(r.finish_reason == "length" for r in run.results)
    finished_at = {rid: step.index for step in run.steps for rid in step.finished}
    assert finished_at[0] < finished_at[1] < finished_at[3]
    assert run.results[0].time_per_output_token is None and run.results[0].time_to_first_token is not None


@pytest.mark.parametrize("mode", ["static", "continuous"])
def test_eos_in_the_middle_stops_only_that_request(mode):
    probe = tiny_engine("llama")
    tokens, _ = solo(probe, PROMPTS[2], greedy(10, stop_on_eos=False))
    eos = tokens[3]
    engine = tiny_engine("llama", eos_ids=(eos,))
    stop_at = tokens.index(eos) + 1
    other = greedy(10, stop_on_eos=False)
    run = RUNNERS[mode](engine, [PROMPTS[3], PROMPTS[2]], [other, greedy(10)])
    assert run.results[1].token_ids == tokens[:stop_at]
    assert run.results[1].finish_reason == "eos"
    assert run.results[0].token_ids == solo(engine, PROMPTS[3], other)[0]


def test_cancel_frees_the_slot_for_the_next_request(tiny):
    batcher = ContinuousBatcher(tiny, ServeConfig(n_slots=1, slot_capacity=128))
    doomed = batcher.add(PROMPTS[1], greedy(50, stop_on_eos=False))
    waiting = batcher.add(PROMPTS[0], greedy(3, stop_on_eos=False))
    batcher.step()
    batcher.step()
    assert waiting.status is SequenceStatus.WAITING
    assert batcher.cancel(doomed.request_id) is doomed
    assert doomed.finish_reason == "cancelled" and len(doomed.output_ids) == 2
    while batcher.has_work:
        batcher.step()
    assert waiting.output_ids == solo(tiny, PROMPTS[0], waiting.params)[0]
    assert batcher.cancel(doomed.request_id) is None  # already gone


# -- records ------------------------------------------------------------------------------
def test_step_records_show_padding_waste_and_slots(tiny):
    params = [greedy(n, stop_on_eos=False) for n in (2, 6)]
    prompts = [PROMPTS[0], PROMPTS[2]]
    static = run_static(tiny, prompts, params)
    prefill = static.steps[0]
    assert prefill.phase == "prefill" and prefill.new_tokens == {0: 1, 1: 37}
    assert prefill.wasted_positions == 2 * 37 - 38
    assert static.steps[-1].wasted_positions == 1  # request 0 finished long ago but keeps its row
    continuous = run_continuous(tiny, prompts, params)
    assert continuous.steps[-1].request_ids == [1] and continuous.steps[-1].wasted_positions == 0
    assert all(s.cache_positions_in_use <= s.cache_positions_reserved for s in continuous.steps)


def test_left_pad_positions_start_at_zero_for_every_prompt():
    ids, mask, positions = left_pad([[4, 5, 6], [9]])
    assert ids.tolist() == [[4, 5, 6], [0, 0, 9]]
    assert mask.tolist() == [[True, True, True], [False, False, True]]
    assert positions.tolist() == [[0, 1, 2], [0, 0, 0]]


def test_scheduler_is_pure_bookkeeping():
    import inference.serving.scheduler as scheduler_module

    assert not hasattr(scheduler_module, "torch")
    scheduler = Scheduler(n_slots=2, slot_capacity=16, max_seq_len=256)
    seqs = [Sequence([1, 2, 3], greedy(2)) for _ in range(3)]
    for seq in seqs:
        scheduler.add(seq)
    step = scheduler.schedule()
    assert step.phase == "prefill" and [s.slot for s in step.sequences] == [0, 1]
    assert seqs[2].status is SequenceStatus.WAITING
    scheduler.postprocess(step, [5, 6])
    assert scheduler.schedule().phase == "decode"
    with pytest.raises(ValueError, match="cache slot"):
        scheduler.add(Sequence(list(range(16)), greedy(1)))


# -- bad input ----------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["static", "continuous"])
def test_bad_batches_raise_clear_errors(tiny, mode):
    with pytest.raises(ValueError, match="empty"):
        RUNNERS[mode](tiny, [], [])
    with pytest.raises(ValueError, match="2 prompts but 1"):
        RUNNERS[mode](tiny, [[1, 2], [3]], [greedy(2)])
    with pytest.raises(ValueError, match="list of prompts"):
        RUNNERS[mode](tiny, "one string", None)


@pytest.mark.parametrize("mode", ["static", "continuous"])
def test_one_bad_prompt_does_not_stop_the_others(tiny, mode):
    prompts = [PROMPTS[1], [], [5, 10_000], PROMPTS[0]]
    params = [greedy(4, stop_on_eos=False)] * 4
    results = RUNNERS[mode](tiny, prompts, params).results
    assert [r.index for r in results] == [0, 1, 2, 3]
    assert results[1].finish_reason == "error" and "no tokens" in str(results[1].error)
    assert not results[2].ok and "outside the vocabulary" in str(results[2].error)
    assert results[0].token_ids == solo(tiny, PROMPTS[1], params[0])[0]
    assert results[3].token_ids == solo(tiny, PROMPTS[0], params[0])[0]


# -- the real model -----------------------------------------------------------------------
REAL_PROMPTS = ["The cat sat", "Once upon a time there was a little robot who lived in a lighthouse by the sea and"]


@pytest.mark.real_model
@pytest.mark.parametrize("mode", ["static", "continuous"])
def test_real_model_batched_equals_solo(engine, mode):
    params = [greedy(4, stop_on_eos=False), greedy(6, stop_on_eos=False)]
    run = RUNNERS[mode](engine, REAL_PROMPTS, params, keep_logits=True)
    for prompt, p, result in zip(REAL_PROMPTS, params, run.results):
        tokens, logits = solo(engine, engine.encode_prompt(prompt), p)
        assert_batched_equals_solo(engine, result.token_ids, result.logits, tokens, logits)
        assert result.text == engine.tokenizer.decode(result.token_ids)


@pytest.mark.real_model
def test_real_model_sampled_batch_equals_generate(engine):
    params_a = SamplingParams(temperature=0.8, top_p=0.9, seed=3, max_new_tokens=4)
    params_b = greedy(3)
    results = run_static(engine, REAL_PROMPTS, [params_a, params_b]).results
    assert len(results) == 2 and all(r.ok for r in results)
    alone = [s.token_id for s in engine.generate(REAL_PROMPTS[0], params_a)]
    assert results[0].token_ids == alone
