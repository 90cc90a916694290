"""Paged KV blocks against the slot cache: capacity, memory and speed, as ratios measured in one run.

Run ``python -m inference.bench.paging`` (a few minutes on a 2-core CPU; ``--quick`` for a smaller run).
Four measurements, each paged vs slot (or vs the contiguous per-request cache) in the same process:

1. capacity: under one KV budget (the positions of ``--slots`` slots, each as long as the longest
   request), how many requests of a mixed workload (a 48-token shared system prompt, total lengths
   20-800, seeded) are resident at once, each holding its whole prompt and answer: slots vs blocks
   (prefix hits shared). Pure bookkeeping (the block manager), exact; also the prefix-cache hit rate.
2. memory: KV bytes held by 20 requests on one 200-token prompt (32-token answers) on the real model,
   the peak over the run, paged vs the slot cache's reservation and vs 20 copies of the positions.
3. one decode forward at context 200, batch 1 and 16: the contiguous cache, the slot cache and the
   paged gather (medians of interleaved repeats, so machine load hits each alike).
4. aggregate decode tok/s of 16 concurrent requests, paged / slot (decode steps only, medians).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch

from ..generation.engine import Engine, load_engine
from ..generation.sampling import SamplingParams
from ..model.kv_cache import KVCache
from ..number_text import whole_arg
from ..serving.block_manager import BlockManager
from ..serving.config import ServeConfig
from ..serving.continuous import ContinuousBatcher
from ..serving.paged import PagedBatcher
from ..serving.paged_cache import PagedKVCache, PagedWrite
from ..serving.slot_cache import SlotKVCache, SlotWrite
from ..threads import set_threads


def mixed_workload(n: int, seed: int = 0, system: int = 48) -> list[tuple[list[int], int]]:
    """``n`` (prompt ids, answer length) pairs: totals 20-800, prompts opening with one shared system prompt."""
    rng = random.Random(seed)
    shared = [rng.randrange(1000, 2000) for _ in range(system)]
    requests = []
    for _ in range(n):
        total = rng.randint(20, 800)
        answer = min(32, total - 1)
        prompt_len = total - answer
        own = [rng.randrange(2000, 9000) for _ in range(prompt_len)]
        prompt = shared[: min(system, prompt_len - 1)] + own[min(system, prompt_len - 1) :]
        requests.append((prompt, answer))
    return requests


def capacity(slots: int, block_size: int, requests: list[tuple[list[int], int]]) -> dict:
    """Requests resident at once under the budget of ``slots`` slots, slots vs paged blocks (FCFS)."""
    longest = max(len(prompt) + answer for prompt, answer in requests)
    budget = slots * longest  # positions
    manager = BlockManager(budget // block_size, block_size)
    resident, hits, full_blocks = 0, 0, 0
    for index, (prompt, answer) in enumerate(requests):
        seq_hits = manager.prefix_hits(prompt)
        total = prompt + [0] * answer  # the answer's positions, as they will be held at the end
        if manager.blocks_to_admit(total, seq_hits) > manager.num_free:
            break
        cached = manager.add(index, prompt, seq_hits)
        manager.reserve(index, len(total) - cached)
        manager.commit(index, total[cached:])
        resident, hits, full_blocks = resident + 1, hits + seq_hits, full_blocks + (len(prompt) - 1) // block_size
    return {
        "budget_positions": budget,
        "slot": slots,
        "paged": resident,
        "hit_rate": hits / max(full_blocks, 1),
    }


def class_memory(engine: Engine, students: int, prompt_len: int, answer: int, block_size: int) -> dict:
    """KV bytes for ``students`` requests on one prompt: paged peak vs slot reservation and vs copies."""
    rng = random.Random(1)
    prompt = [rng.randrange(100, engine.config.vocab_size) for _ in range(prompt_len)]
    params = SamplingParams(temperature=0.0, max_new_tokens=answer, stop_on_eos=False)
    total_blocks = students * -(-(prompt_len + answer) // block_size)
    batcher = PagedBatcher(engine, total_blocks, block_size)
    for _ in range(students):
        batcher.add(prompt, params)
    peak = 0
    while batcher.has_work:
        batcher.step()
        peak = max(peak, batcher.cache.used_bytes)
    per_position = batcher.cache.nbytes // (total_blocks * block_size)
    slot = SlotKVCache(engine.config, students, prompt_len + answer, "meta", engine.dtype)
    return {
        "paged_peak_bytes": peak,
        "slot_reserved_bytes": slot.nbytes,
        "copies_bytes": students * (prompt_len + answer) * per_position,
        "one_request_bytes": (prompt_len + answer) * per_position,
        "prefix_hits": batcher.cache.groups[0].manager.hits,
    }


def decode_forward(engine: Engine, batch: int, context: int, block_size: int, repeats: int) -> dict[str, float]:
    """Median seconds of one decode forward after ``context`` (+ repeat) cached positions: contiguous, slot, paged."""
    model, config, device = engine.model, engine.config, engine.device
    prompt = torch.randint(0, config.vocab_size, (batch, context), device=device)  # (B, S)
    token = torch.randint(0, config.vocab_size, (batch, 1), device=device)  # (B, 1)
    capacity = context + repeats  # each repeat decodes one more position, in every cache alike
    contiguous = KVCache(config, capacity, batch, device, engine.dtype)
    model(prompt, kv_cache=contiguous, last_only=True)
    slots = SlotKVCache(config, batch, capacity, device, engine.dtype)
    slots.begin_step([SlotWrite(row, 0, context) for row in range(batch)])
    model(prompt, kv_cache=slots, last_only=True)
    paged = PagedKVCache(config, batch * -(-capacity // block_size), block_size, device, engine.dtype)
    for row in range(batch):
        paged.add(row, prompt[row].tolist())
    paged.begin_step([PagedWrite(row, prompt[row].tolist()) for row in range(batch)])
    model(prompt, kv_cache=paged, last_only=True)

    def contiguous_step(held: int) -> None:
        model(token, kv_cache=contiguous)

    def slot_step(held: int) -> None:
        positions = slots.begin_step([SlotWrite(row, held, 1) for row in range(batch)])  # (B, 1)
        model(token, kv_cache=slots, positions=positions)

    def paged_step(held: int) -> None:
        positions = paged.begin_step([PagedWrite(row, [7]) for row in range(batch)])  # (B, 1)
        model(token, kv_cache=paged, positions=positions)

    steps = {"contiguous": contiguous_step, "slot": slot_step, "paged": paged_step}
    times: dict[str, list[float]] = {name: [] for name in steps}
    for repeat in range(repeats - 1):
        for name, step in steps.items():
            started = time.perf_counter()
            step(context + repeat)
            times[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in times.items()}


def decode_throughput(engine: Engine, requests: int, new_tokens: int, block_size: int) -> dict[str, float]:
    """Aggregate decode tok/s of ``requests`` concurrent requests (prompts 20-100 tokens), slot vs paged."""
    rng = random.Random(2)
    prompts = [
        [rng.randrange(100, engine.config.vocab_size) for _ in range(rng.randint(20, 100))] for _ in range(requests)
    ]
    params = SamplingParams(temperature=0.0, max_new_tokens=new_tokens, stop_on_eos=False)
    capacity = max(len(p) for p in prompts) + new_tokens
    slot = ContinuousBatcher(engine, ServeConfig(n_slots=requests, slot_capacity=capacity))
    paged = PagedBatcher(engine, requests * -(-capacity // block_size), block_size)
    for prompt in prompts:
        slot.add(prompt, params)
        paged.add(prompt, params)
    times: dict[str, list[float]] = {"slot": [], "paged": []}
    while slot.has_work or paged.has_work:  # interleaved: a burst of load hits both alike
        for name, batcher in (("slot", slot), ("paged", paged)):
            if not batcher.has_work:
                continue
            started = time.perf_counter()
            record = batcher.step()
            seconds = time.perf_counter() - started
            if record.phase == "decode":
                times[name].append(seconds)
    return {name: requests / statistics.median(values) for name, values in times.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m inference.bench.paging", description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--block-size", type=whole_arg, default=16)
    parser.add_argument("--slots", type=whole_arg, default=8)
    parser.add_argument("--threads", type=whole_arg, default=None)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    threads = set_threads(args.threads)
    engine = load_engine(model=args.model, device="cpu", dtype="float32")
    repeats, new_tokens = (5, 8) if args.quick else (15, 24)
    print(f"{engine.config.name}, {threads} threads, block size {args.block_size}")

    fit = capacity(args.slots, args.block_size, mixed_workload(200))
    print(
        f"1. one KV budget ({fit['budget_positions']} positions): {fit['slot']} requests resident (slots), "
        f"{fit['paged']} (paged), ratio {fit['paged'] / fit['slot']:.2f}; prefix-cache hit rate {fit['hit_rate']:.0%}"
    )
    memory = class_memory(engine, 20, 200, 8 if args.quick else 32, args.block_size)
    mib = 2**20
    print(
        f"2. 20 requests on one 200-token prompt: paged peak {memory['paged_peak_bytes'] / mib:.1f} MiB, "
        f"slot reservation {memory['slot_reserved_bytes'] / mib:.1f} MiB "
        f"({memory['slot_reserved_bytes'] / memory['paged_peak_bytes']:.1f}x), "
        f"one request alone {memory['one_request_bytes'] / mib:.1f} MiB; {memory['prefix_hits']} blocks shared"
    )
    for batch in (1, 16):
        seconds = decode_forward(engine, batch, 200, args.block_size, repeats)
        print(
            f"3. one decode forward, batch {batch}, context 200: contiguous {seconds['contiguous'] * 1e3:.1f} ms, "
            f"slot {seconds['slot'] * 1e3:.1f} ms, paged {seconds['paged'] * 1e3:.1f} ms "
            f"(paged / contiguous {seconds['paged'] / seconds['contiguous']:.2f}, "
            f"paged / slot {seconds['paged'] / seconds['slot']:.2f})"
        )
    rates = decode_throughput(engine, 16, new_tokens, args.block_size)
    print(
        f"4. 16 concurrent requests, decode: slot {rates['slot']:.0f} tok/s, paged {rates['paged']:.0f} tok/s, "
        f"paged / slot {rates['paged'] / rates['slot']:.2f}"
    )


if __name__ == "__main__":
    main()
