"""The shared engine server on paged KV blocks: the same tokens as on the slot cache, the slot cache kept for what
paged blocks cannot do (interventions), and the bytes Gemma's sliding-window layers give back, as step records."""

from __future__ import annotations

import math

import pytest
import torch

from inference import EngineServer, SamplingParams, ServeConfig
from inference.model.interventions import HeadEdit, Interventions
from inference.serving.continuous import ContinuousBatcher
from inference.serving.paged import PagedBatcher
from tests.test_batching import PROMPTS, VOCAB, greedy, solo, tiny_engine
from tests.test_interventions import solo_with
from tests.tolerances import model_tolerance

WAIT = 60.0  # an upper bound for a wait on a busy machine, never a performance assertion
SHARED = [(i * 31 + 7) % VOCAB for i in range(40)]  # a 40-token start two of the requests share


@pytest.fixture(scope="module", params=["llama", "gemma3"])
def tiny(request):
    return tiny_engine(request.param)


def requests() -> list[tuple[list[int], SamplingParams]]:
    """Greedy and seeded requests of 1-90 prompt tokens (tiny Gemma's 8-key window crossed), two sharing a start."""
    seeded = [
        SamplingParams(temperature=t, top_k=k, seed=s, max_new_tokens=n, stop_on_eos=False)
        for t, k, s, n in ((1.0, 40, 11, 9), (0.7, 0, 12, 14), (1.3, 20, 13, 5))
    ]
    prompts = [*PROMPTS, SHARED + [1, 2], SHARED + [3], PROMPTS[1]]
    params = [greedy(7, stop_on_eos=False), seeded[0], greedy(12, stop_on_eos=False), seeded[1]]
    return list(zip(prompts, params + [greedy(9, stop_on_eos=False), seeded[2], seeded[0]]))


def served(engine, config: ServeConfig) -> tuple[list[list[int]], list[list[float]], EngineServer]:
    """Every request of ``requests()`` submitted at once; their tokens and probabilities, in order."""
    with EngineServer(engine, config) as server:
        handles = [server.submit(prompt, params) for prompt, params in requests()]
        results = [handle.result(WAIT) for handle in handles]
    return [r.token_ids for r in results], [r.probabilities for r in results], server


def test_the_server_runs_on_paged_blocks_of_16_by_default(tiny):
    assert ServeConfig().kv_block_size == 16
    tokens, _, server = served(tiny, ServeConfig(n_slots=3, max_waiting=8, slot_capacity=128))
    assert isinstance(server.batcher, PagedBatcher) and server.slot_batcher is None  # no request needed slots
    assert server.batcher.cache.num_blocks == 3 * 128 // 16  # the budget the three slots would have reserved
    steps = server.recent_steps
    assert max(step.cache_slots_in_use for step in steps) == 3 and {s.cache_slots_total for s in steps} == {3}
    assert all(step.cache_positions_reserved % 16 == 0 for step in steps)  # whole blocks, not whole slots
    assert max(step.cache_positions_reserved for step in steps) < 3 * 128
    assert all(step.kv_bytes_held is not None and not step.slots for step in steps)
    assert any(step.reused_positions for step in steps)  # the shared 40-token start: two blocks of 16 shared
    assert server.batcher.cache.groups[0].manager.num_free == server.batcher.cache.num_blocks  # all given back


def test_prefix_sharing_off_computes_every_prompt_whole_and_bad_sizes_are_refused(tiny):
    config = ServeConfig(n_slots=3, max_waiting=8, slot_capacity=128, share_prefixes=False)
    tokens, _, server = served(tiny, config)
    assert tokens == [solo(tiny, prompt, params)[0] for prompt, params in requests()]
    assert not any(step.reused_positions for step in server.recent_steps)
    assert server.batcher.cache.groups[0].manager.hits == 0 and not server.batcher.cache.groups[0].manager.cached
    with pytest.raises(ValueError, match="kv_block_size must be >= 1 or None, got 0"):
        ServeConfig(kv_block_size=0)
    with pytest.raises(ValueError, match="asks for the slot cache"):
        PagedBatcher.for_server(tiny, ServeConfig(kv_block_size=None))


@pytest.mark.parametrize("block_size", [4, 16])
def test_a_requests_output_is_the_same_on_paged_blocks_as_on_slots(tiny, block_size):
    """Greedy and seeded requests, submitted together, get the same tokens and probabilities from the paged server
    as from the slot-cache server (the one before), and the tokens each gets alone."""
    config = ServeConfig(n_slots=3, max_waiting=8, slot_capacity=128, kv_block_size=None)
    slot_tokens, slot_probs, slot_server = served(tiny, config)
    assert isinstance(slot_server.batcher, ContinuousBatcher)
    paged_tokens, paged_probs, paged_server = served(
        tiny, ServeConfig(n_slots=3, max_waiting=8, slot_capacity=128, kv_block_size=block_size)
    )
    assert isinstance(paged_server.batcher, PagedBatcher)
    alone = [solo(tiny, prompt, params) for prompt, params in requests()]
    assert paged_tokens == slot_tokens == [tokens for tokens, _ in alone]
    # logits within the derived fp32 bound d move a token's log-probability by at most 2d
    bound = math.expm1(2 * model_tolerance(tiny.config, torch.cat([torch.stack(lg) for _, lg in alone]), context=256))
    for paged, slot in zip(paged_probs, slot_probs):
        assert all(abs(p - q) <= q * bound for p, q in zip(paged, slot, strict=True))


def test_a_pool_smaller_than_the_slots_holds_fewer_blocks_and_gives_the_same_tokens(tiny):
    """``kv_positions``: a pool of one request's whole length for three slots holds 8 blocks, not 24; the seven
    requests (over 200 prompt positions in all) wait for free blocks (or are preempted and computed again), each
    with the tokens it gets alone."""
    config = ServeConfig(n_slots=3, max_waiting=8, slot_capacity=128, kv_block_size=16, kv_positions=128)
    assert sum(len(prompt) for prompt, _ in requests()) > 128
    tokens, _, server = served(tiny, config)
    assert server.batcher.cache.num_blocks == 8
    assert tokens == [solo(tiny, prompt, params)[0] for prompt, params in requests()]
    roomy = ServeConfig(n_slots=3, slot_capacity=128, kv_block_size=16, kv_positions=10**6)
    assert PagedBatcher.for_server(tiny, roomy).cache.num_blocks == 3 * 8  # never more than the slots would reserve
    with pytest.raises(ValueError, match="kv_positions must be >= slot_capacity"):
        ServeConfig(slot_capacity=128, kv_positions=127)


def test_a_request_with_interventions_runs_on_the_slot_cache_beside_paged_ones(tiny):
    """The paged batcher refuses interventions; the server runs that request on a slot cache made for it, with its
    own spec, while the others stay on paged blocks; each equals itself alone."""
    spec = Interventions(heads=(HeadEdit(0, 0), HeadEdit(1, 1)))
    params = greedy(6, stop_on_eos=False)
    with pytest.raises(ValueError, match="interventions run on the slot cache"):
        PagedBatcher(tiny, 40, 4).add(PROMPTS[0], interventions=spec)
    with EngineServer(tiny, ServeConfig(n_slots=2, max_waiting=4, slot_capacity=256)) as server:
        doomed = server.submit(PROMPTS[2], greedy(200, stop_on_eos=False), interventions=spec)
        doomed.cancel()  # long before its 200 tokens: its slot is given back
        plain = server.submit(PROMPTS[0], params)
        edited = server.submit(PROMPTS[0], params, interventions=spec)
        assert edited.result(WAIT).token_ids == solo_with(tiny, PROMPTS[0], params, spec)[0]
        assert plain.result(WAIT).token_ids == solo_with(tiny, PROMPTS[0], params, None)[0]
        assert edited.result().token_ids != plain.result().token_ids  # the spec changed the answer
        cancelled = doomed.result(WAIT)
        assert cancelled.finish_reason == "cancelled" and len(cancelled.token_ids) < 200
        assert isinstance(server.slot_batcher, ContinuousBatcher) and not server.slot_batcher.has_work
        steps = server.recent_steps
        on_slots = {r for step in steps if step.slots for r in step.request_ids}
        on_blocks = {r for step in steps if step.kv_bytes_held is not None for r in step.request_ids}
        assert edited.request_id in on_slots <= {edited.request_id, doomed.request_id}
        assert on_blocks == {plain.request_id}
        after = server.submit(PROMPTS[1], params).result(WAIT)  # a plain one after them: paged again
        assert after.token_ids == solo(tiny, PROMPTS[1], params)[0]
        assert server.recent_steps[-1].kv_bytes_held is not None and server.in_flight == 0


def test_sliding_window_layers_hold_fewer_bytes_than_a_cache_that_keeps_every_block(tiny):
    """Tiny Gemma 3: layer 0 sees 8 keys, layer 1 all. After a 70-token prompt (blocks of 4) the global layer holds
    18 blocks and the local one 3 (positions 63-69 are all a next query sees), not 18; Llama has no window."""
    batcher = PagedBatcher(tiny, 40, 4)
    batcher.add(PROMPTS[3][:70], greedy(3, stop_on_eos=False))
    steps = [batcher.step() for _ in range(3)]
    cache = batcher.cache
    if tiny.config.family == "llama":  # one group of both layers, keeping every block
        assert steps[0].kv_bytes_held == steps[0].kv_bytes_without_release == 18 * cache._block_bytes(cache.groups[0])
        return
    one_layer_block = cache._block_bytes(cache.groups[0])  # each group holds one layer
    assert [group.window for group in cache.groups] == [None, 8]
    assert steps[0].kv_bytes_held == (18 + 3) * one_layer_block
    assert steps[0].kv_bytes_without_release == (18 + 18) * one_layer_block
    assert steps[1].kv_bytes_held == (18 + 2) * one_layer_block  # position 70 written: block 15 (60-63) slid out
    assert steps[-1].finished and steps[-1].kv_bytes_held == 0  # the last step gave every block back


@pytest.mark.real_model
def test_real_gemma_reports_the_bytes_its_local_layers_gave_back_past_512(gemma_engine):
    """Gemma 3 270M, one 600-position request through the paged server: its 15 local layers (512-key window)
    hold the blocks the window still reaches, its 3 global layers every block; the record's two byte counts
    are exactly that, and what a cache keeping every block would hold."""
    from inference.bench.paging_server import window_savings

    saved = window_savings(gemma_engine, 600, 16, None)
    config = gemma_engine.config
    layer_block = 16 * config.n_kv_heads * config.head_dim * 2 * 4  # K and V of one block in one layer, float32
    positions = saved["positions"]
    blocks = -(-positions // 16)
    slid_out = (positions - 512 + 1) // 16  # blocks wholly before the oldest key the next query sees
    assert (saved["local_layers"], saved["layers"], saved["windows"]) == (15, 18, [512])
    assert saved["without_release"] == 18 * blocks * layer_block
    assert saved["held"] == (3 * blocks + 15 * (blocks - slid_out)) * layer_block
    assert slid_out >= 5
