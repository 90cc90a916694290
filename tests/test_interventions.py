"""Interventions in the forward (``inference/model/interventions.py``), on tiny random Llama (GQA) and GPT-2 models.

No intervention is the baseline bit for bit; a zeroed layer of heads is a zero attention
output; patching a run with its own stream changes nothing; a cut edge has weight exactly 0
and its row still sums to 1; under the KV cache, in static and continuous batching (a spec
per request) and in the server, the intervened run equals the same intervention computed
alone without a cache. Float comparisons between two evaluations that sum in other orders
use ``inference/model/tolerances.py``'s derived bound; comparisons of the *same* operations are exact.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from inference import EngineServer, ServeConfig, Stepper, run_continuous, run_static
from inference.model.interventions import (
    EdgeCut,
    ForwardEdits,
    HeadEdit,
    InterventionError,
    Interventions,
    MLPEdit,
    ResidualPatch,
)
from inference.model.trace import ForwardTrace
from tests.test_batching import PROMPTS, assert_batched_equals_solo, greedy, tiny_engine
from tests.tolerances import max_abs_diff, model_tolerance

IDS = [5, 60, 17, 40, 3, 9, 22, 71, 14, 50]


@pytest.fixture(scope="module", params=["llama", "gpt2", "gemma3"])
def tiny(request):
    return tiny_engine(request.param)


def tol(engine, reference: torch.Tensor) -> float:
    return model_tolerance(engine.config, reference, context=256)


def traced(engine, ids: list[int], spec: Interventions | None = None) -> tuple[torch.Tensor, ForwardTrace]:
    return engine.traced_forward(ids, spec)


def every_kind(engine, ids: list[int]) -> Interventions:
    """One of each edit; the cut edge and one patch land on positions a decode step computes."""
    _, trace = traced(engine, ids)
    return Interventions(
        heads=(HeadEdit(0, 1), HeadEdit(1, 3, "scale", 2.5), HeadEdit(1, 0, "mean")),
        edges=(EdgeCut(len(ids) - 2, 1), EdgeCut(len(ids) - 1, 0, layer=1, head=2)),
        mlps=(MLPEdit(0, 0.5),),
        patches=(ResidualPatch(0, 2, trace.layers[0].block_output[0, 2] * 0.5),),
    )


# -- the baseline is untouched ---------------------------------------------------------
def test_no_intervention_equals_the_baseline_exactly(tiny):
    batch = torch.tensor([IDS, IDS[::-1]])
    baseline = tiny.model(batch)
    for nothing in (None, Interventions(), [None, None], [Interventions(), None]):
        assert torch.equal(tiny.model(batch, interventions=nothing), baseline)
    _, plain = traced(tiny, IDS)
    _, empty = traced(tiny, IDS, Interventions())
    assert all(torch.equal(a.block_output, b.block_output) for a, b in zip(plain.layers, empty.layers))
    params = greedy(8, stop_on_eos=False)
    assert [s.token_id for s in tiny.generate(IDS, params, interventions=Interventions())] == [
        s.token_id for s in tiny.generate(IDS, params)
    ]


def test_forward_edits_are_not_built_without_an_edit(tiny):
    positions = torch.arange(4).expand(2, 4)
    assert ForwardEdits.build([None, Interventions()], tiny.config, positions, tiny.device, tiny.dtype) is None


# -- what each edit does -----------------------------------------------------------------
def test_ablating_every_head_of_a_layer_is_a_zero_attention_output(tiny):
    layer = 1
    spec = Interventions(heads=tuple(HeadEdit(layer, h) for h in range(tiny.config.n_heads)))
    logits, trace = traced(tiny, IDS, spec)
    bias = tiny.model.layers[layer].attn.out.bias  # GPT-2's projection keeps its bias: 0 @ W + b
    expected = torch.zeros_like(trace.layers[layer].attn_output) + (0 if bias is None else bias.detach())
    assert torch.equal(trace.layers[layer].head_outputs, torch.zeros_like(trace.layers[layer].head_outputs))
    assert torch.equal(trace.layers[layer].attn_output, expected)
    # the same as a model whose attention sub-layer there returns nothing but its bias
    attention = tiny.model.layers[layer].attn
    original = attention.forward
    attention.forward = lambda x, *args, **kwargs: expected.to(x.dtype).expand_as(x)
    try:
        silenced = tiny.model(torch.tensor([IDS]))[0]
    finally:
        attention.forward = original
    assert torch.equal(tiny.model(torch.tensor([IDS]), interventions=spec)[0], silenced)
    assert max_abs_diff(logits, silenced) <= tol(tiny, silenced)  # traced == fast under the edit


def test_mean_ablation_puts_the_prompts_mean_at_every_position(tiny):
    spec = tiny.prepare_interventions(Interventions(heads=(HeadEdit(0, 2, "mean"),)), IDS)
    _, clean = traced(tiny, IDS)
    _, edited = traced(tiny, IDS, spec)
    mean = clean.layers[0].head_outputs[0, 2].mean(dim=0)  # (hd,) over the prompt's positions
    assert torch.allclose(spec.heads[0].mean, mean, atol=1e-6)
    assert torch.equal(edited.layers[0].head_outputs[0, 2], spec.heads[0].mean.expand(len(IDS), -1))
    assert torch.equal(edited.layers[0].head_outputs[0, :2], clean.layers[0].head_outputs[0, :2])


def test_scaling_a_head_or_an_mlp_scales_its_output(tiny):
    spec = Interventions(heads=(HeadEdit(1, 1, "scale", 3.0),), mlps=(MLPEdit(1, 0.0),))
    _, clean = traced(tiny, IDS)
    _, edited = traced(tiny, IDS, spec)
    assert torch.equal(edited.layers[1].head_outputs[0, 1], clean.layers[1].head_outputs[0, 1] * 3.0)
    assert torch.equal(edited.layers[1].mlp_output, torch.zeros_like(edited.layers[1].mlp_output))
    assert torch.equal(edited.layers[0].block_output, clean.layers[0].block_output)  # layer 0 untouched


def test_patching_a_run_with_its_own_stream_equals_the_baseline(tiny):
    logits, trace = traced(tiny, IDS)
    own = Interventions(patches=tuple(ResidualPatch(0, p, trace.layers[0].block_output[0, p]) for p in range(len(IDS))))
    patched_logits, _ = traced(tiny, IDS, own)
    assert torch.equal(patched_logits, logits)  # same operations on the same numbers: bit for bit
    fast = tiny.forward_logits(IDS, own)
    assert max_abs_diff(fast, logits) <= tol(tiny, logits)  # the fast path, with the traced path's vectors


def test_a_patch_replaces_the_stream_at_its_position_only(tiny):
    vector = torch.full((tiny.config.d_model,), 0.25)
    _, clean = traced(tiny, IDS)
    _, edited = traced(tiny, IDS, Interventions(patches=(ResidualPatch(0, 4, vector),)))
    assert torch.equal(edited.layers[0].block_output[0, 4], vector)
    assert torch.equal(
        edited.layers[1].block_input[0, :4], clean.layers[1].block_input[0, :4]
    )  # causal: before is kept
    assert not torch.allclose(edited.layers[1].block_output[0, 5:], clean.layers[1].block_output[0, 5:])


def test_a_cut_edge_has_weight_zero_and_its_row_still_sums_to_one(tiny):
    query, key = 6, 1
    spec = Interventions(edges=(EdgeCut(query, key, layer=1, head=2),))
    logits, edited = traced(tiny, IDS, spec)
    _, clean = traced(tiny, IDS)
    probs = edited.layers[1].attention_probs[0]  # (H, T, T)
    assert probs[2, query, key] == 0.0
    assert clean.layers[1].attention_probs[0, 2, query, key] > 0
    # one float32 softmax: its T rounded terms sum to 1 within T units of roundoff
    assert abs(float(probs[2, query].sum()) - 1.0) <= len(IDS) * 2.0**-24
    untouched = torch.ones_like(probs, dtype=torch.bool)
    untouched[2, query] = False
    assert torch.equal(probs[untouched], clean.layers[1].attention_probs[0][untouched])
    assert torch.equal(edited.layers[0].attention_probs, clean.layers[0].attention_probs)
    fast = tiny.forward_logits(IDS, spec)  # SDPA with the per-head mask gives the traced numbers
    assert max_abs_diff(fast, logits) <= tol(tiny, logits)
    baseline = tiny.forward_logits(IDS)
    assert max_abs_diff(fast[:query], baseline[:query]) <= tol(tiny, baseline)  # earlier queries never saw the cut
    assert max_abs_diff(fast[query], baseline[query]) > 10 * tol(tiny, baseline)


def test_a_cut_edge_in_a_sliding_window_hits_its_own_key():
    """Gemma 3's local layer 0 sees the last 8 keys: query 9 sees positions 2..9, so the cut of key 3 must hide
    column 3 (its own position), not the fourth visible key."""
    engine = tiny_engine("gemma3")
    spec = Interventions(edges=(EdgeCut(9, 3, layer=0, head=1),))
    _, edited = traced(engine, IDS, spec)
    _, clean = traced(engine, IDS)
    probs, before = edited.layers[0].attention_probs[0, 1, 9], clean.layers[0].attention_probs[0, 1, 9]  # (T,)
    assert before[:2].eq(0).all() and before[3] > 0  # outside the window; the key to cut
    assert probs[3] == 0.0 and probs[:2].eq(0).all() and (probs[2] > before[2]) and (probs[4:] > before[4:]).all()


def test_edges_on_every_layer_and_head(tiny):
    spec = Interventions(edges=(EdgeCut(5, 0), EdgeCut(5, 5)))
    _, edited = traced(tiny, IDS, spec)
    for layer in edited.layers:
        assert torch.equal(layer.attention_probs[0, :, 5, 0], torch.zeros(tiny.config.n_heads))
        assert torch.equal(layer.attention_probs[0, :, 5, 5], torch.zeros(tiny.config.n_heads))


# -- the KV cache, generation, batching ------------------------------------------------
def test_an_intervention_under_the_kv_cache_equals_it_recomputed_without(tiny):
    spec = tiny.prepare_interventions(every_kind(tiny, IDS), IDS[:4])
    full = tiny.forward_logits(IDS, spec)  # (T, V): everything at once, no cache
    cache = tiny.new_cache(len(IDS))
    steps = [tiny.prefill(IDS[:4], cache, interventions=spec)]
    steps += [tiny.decode_step(token, cache, interventions=spec) for token in IDS[4:]]
    for step, logits in enumerate(steps):
        assert max_abs_diff(logits, full[3 + step]) <= tol(tiny, full), f"step {step}"
    assert max_abs_diff(full, tiny.forward_logits(IDS)) > 0.01  # the spec really changes the run
    # the cache says which spec wrote its K/V, and forgets it when truncated
    assert cache.written_under == [(0, len(IDS), (spec,))]
    assert cache.interventions_at(len(IDS) - 1) == (spec,)
    cache.truncate(3)
    tiny.decode_step(IDS[3], cache)  # continued without the spec
    assert cache.interventions_at(2) == (spec,) and cache.interventions_at(3) is None


def test_generation_keeps_the_intervention_on_with_and_without_the_cache(tiny):
    spec = every_kind(tiny, IDS)
    params = greedy(10, stop_on_eos=False)
    cached = [s.token_id for s in tiny.generate(IDS, params, interventions=spec)]
    recomputed = [s.token_id for s in tiny.generate(IDS, params, use_cache=False, interventions=spec)]
    assert cached == recomputed
    assert cached != [s.token_id for s in tiny.generate(IDS, params)]
    stepper = Stepper(tiny, IDS, params, interventions=spec)
    assert [stepper.step().token_id for _ in range(10)] == cached
    assert stepper.cache.interventions_at(0) == (stepper.interventions,)


def solo_with(engine, prompt: list[int], params, spec) -> tuple[list[int], list[torch.Tensor]]:
    """Greedy tokens and per-step logits of one request alone, under its spec, through the cache."""
    spec = engine.prepare_interventions(spec, prompt)
    ids, tokens, logits = list(prompt), [], []
    cache = engine.new_cache(len(ids) + params.max_new_tokens)
    step = engine.prefill(ids, cache, interventions=spec)
    for _ in range(params.max_new_tokens):
        logits.append(step)
        tokens.append(int(step.argmax()))
        ids.append(tokens[-1])
        step = engine.decode_step(tokens[-1], cache, interventions=spec)
    return tokens, logits


@pytest.mark.parametrize("mode", ["static", "continuous"])
def test_batched_equals_solo_with_a_different_spec_per_request(tiny, mode):
    specs = [
        Interventions(heads=(HeadEdit(1, 2),)),
        None,
        Interventions(edges=(EdgeCut(40, 3),), mlps=(MLPEdit(0, 0.0),)),  # query 40: a decode step
        Interventions(heads=(HeadEdit(0, 1, "mean"),), edges=(EdgeCut(95, 10, layer=1, head=3),)),
    ]
    params = [greedy(n, stop_on_eos=False) for n in (6, 9, 5, 8)]
    runner = run_static if mode == "static" else run_continuous
    run = runner(tiny, PROMPTS, params, keep_logits=True, interventions_list=specs)
    for prompt, p, spec, result in zip(PROMPTS, params, specs, run.results):
        tokens, logits = solo_with(tiny, prompt, p, spec)
        assert_batched_equals_solo(tiny, result.token_ids, result.logits, tokens, logits)
    assert run.results[1].token_ids == solo_with(tiny, PROMPTS[1], params[1], None)[0]


def test_the_server_runs_each_request_with_its_own_spec(tiny):
    spec = Interventions(heads=(HeadEdit(0, 0), HeadEdit(1, 1)))
    params = greedy(6, stop_on_eos=False)
    with EngineServer(tiny, ServeConfig(n_slots=2, max_waiting=2, slot_capacity=64)) as server:
        plain, edited = server.submit(IDS, params), server.submit(IDS, params, interventions=spec)
        assert edited.result(timeout=60).token_ids == solo_with(tiny, IDS, params, spec)[0]
        assert plain.result(timeout=60).token_ids == solo_with(tiny, IDS, params, None)[0]


# -- bad specs: clear errors ---------------------------------------------------------------
@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: Interventions(heads=(HeadEdit(2, 0),)), "layer 2 is out of range"),
        (lambda: Interventions(heads=(HeadEdit(0, 4),)), "head 4 is out of range"),
        (lambda: Interventions(heads=(HeadEdit(0, 1), HeadEdit(0, 1, "scale", 2))), "head L0 H1 is listed twice"),
        (lambda: Interventions(heads=(HeadEdit(0, 1, "loud"),)), "head mode must be one of"),
        (lambda: Interventions(heads=(HeadEdit(0, -1),)), "must be >= 0"),
        (lambda: Interventions(heads=(HeadEdit(0, 1.5),)), "whole number"),
        (lambda: Interventions(heads=(HeadEdit(0, 1, "scale", float("nan")),)), "must be finite"),
        (lambda: Interventions(edges=(EdgeCut(2, 5),)), "key 5 comes after query 2"),
        (lambda: Interventions(edges=(EdgeCut(1, 0), EdgeCut(1, 1))), "every key of query 1 would be cut"),
        (lambda: Interventions(edges=(EdgeCut(3, 1, head=9),)), "head 9 is out of range"),
        (lambda: Interventions(mlps=(MLPEdit(7),)), "layer 7 is out of range"),
        (lambda: Interventions(patches=(ResidualPatch(0, 1, torch.zeros(5)),)), "the vector has 5 numbers"),
        (lambda: Interventions(patches=(ResidualPatch(0, 1, torch.full((64,), float("inf"))),)), "finite numbers"),
        (lambda: Interventions(heads=[object()]), "not a HeadEdit"),
    ],
)
def test_bad_specs_raise_clear_errors(build, message):
    engine = tiny_engine("llama")
    with pytest.raises(InterventionError, match=message):
        spec = build()
        engine.forward_logits(IDS, spec)


def test_unsupported_models_and_malformed_calls_are_refused():
    engine = tiny_engine("llama")
    spec = Interventions(heads=(HeadEdit(0, 0),))
    with pytest.raises(InterventionError, match="not supported on 'mamba' models"):
        spec.check(dataclasses.replace(engine.config, family="mamba"))
    with pytest.raises(InterventionError, match="2 intervention specs for a batch of 1"):
        engine.model(torch.tensor([IDS]), interventions=[spec, spec])
    with pytest.raises(InterventionError, match="needs the head's mean"):
        engine.model(torch.tensor([IDS]), interventions=Interventions(heads=(HeadEdit(0, 0, "mean"),)))
    with pytest.raises(ValueError, match="interventions_list has 1 entries"):
        run_static(engine, PROMPTS, interventions_list=[spec])
    bad = run_continuous(
        engine, PROMPTS[:2], [greedy(2)] * 2, interventions_list=[Interventions(mlps=(MLPEdit(9),)), None]
    )
    assert isinstance(bad.results[0].error, InterventionError) and bad.results[1].ok  # only its own request fails


def test_an_intervened_decode_step_never_takes_the_compiled_path(monkeypatch):
    """The compiled one-token step (``decode_step.py``) knows no hooks: a spec sends the step through ``_forward``."""
    engine = tiny_engine("llama")

    class Refuse:  # a compiled step that would serve every forward, and fails the test if it is called
        def applies(self, *args) -> bool:
            return True

        def __call__(self, *args, **kwargs):
            raise AssertionError("the compiled step ran")

    monkeypatch.setattr(engine.model, "decode_step", Refuse())
    spec = Interventions(heads=(HeadEdit(1, 1),))
    cache = engine.new_cache(len(IDS) + 1)
    engine.prefill(IDS, cache, interventions=spec)
    engine.decode_step(7, cache, interventions=spec)  # the plain path, with the hooks
    with pytest.raises(AssertionError, match="the compiled step ran"):
        engine.decode_step(8, engine.new_cache(2))  # without a spec the compiled step would be taken
