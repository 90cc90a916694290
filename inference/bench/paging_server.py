"""The shared engine server on paged KV blocks against the server on the slot cache, measured in one run.

Run ``python -m inference.bench.paging_server [--model M] [--threads 1] [--rounds 3] [--requests 16]
[--new-tokens 32] [--window gemma-3-270m]``. Each round serves one workload through an ``EngineServer`` on the
slot cache (``ServeConfig(kv_block_size=None)``, the server before) and one on paged blocks (blocks of
``--block-size``), one after the other (their order alternating by round), so the machine's load hits both
alike; each figure is the median over rounds:

- aggregate tok/s: tokens generated / seconds from the first submission to the last result;
- decode step tok/s: the requests of a decode step / its seconds (median over the round's decode steps);
- K/V reserved: the most positions held for the requests in use at any step, in bytes (slots in use x their
  capacity, or blocks in use x block size), and the pool each allocates at start.

The workload is a class: half the requests share one system prompt and ask their own question, the rest have
prompts of their own (20-200 tokens); greedy answers of ``--new-tokens``. The two servers' tokens are compared.

``--window MODEL`` adds one long request on a model with sliding-window layers (Gemma 3): ``--long`` positions
(prompt + 24 answer tokens) through the paged server, the step records' ``kv_bytes_held`` against
``kv_bytes_without_release`` (what the blocks would take if the local layers kept every block).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from dataclasses import replace

from ..generation.engine import Engine, load_engine
from ..generation.sampling import SamplingParams
from ..number_text import whole_arg
from ..serving.config import ServeConfig
from ..serving.server import EngineServer
from ..threads import set_threads

MIB = 2**20


def class_workload(engine: Engine, requests: int, seed: int = 3) -> list[list[int]]:
    """``requests`` prompts: the first half one 120-token system prompt + a question of 8-40 tokens, the rest their own."""
    rng = random.Random(seed)
    vocab = engine.config.vocab_size

    def ids(n: int) -> list[int]:
        return [rng.randrange(100, vocab) for _ in range(n)]

    system = ids(120)
    half = requests // 2
    return [system + ids(rng.randint(8, 40)) for _ in range(half)] + [
        ids(rng.randint(20, 200)) for _ in range(requests - half)
    ]


def position_bytes(engine: Engine) -> int:
    """K and V of one position in every layer, in the engine's dtype."""
    config = engine.config
    return 2 * config.n_layers * config.n_kv_heads * config.head_dim * engine.dtype.itemsize


def serve_once(engine: Engine, config: ServeConfig, prompts: list[list[int]], params: SamplingParams) -> dict:
    """One workload through a fresh server: its tokens, tok/s and the K/V it reserved."""
    with EngineServer(engine, config) as server:
        started = time.perf_counter()
        handles = [server.submit(prompt, params) for prompt in prompts]
        results = [handle.result(timeout=3600) for handle in handles]
        seconds = time.perf_counter() - started
        steps = server.recent_steps
        cache = server.batcher.cache
    tokens = [result.token_ids for result in results]
    decode = [len(step.request_ids) / step.seconds for step in steps if step.phase == "decode"]
    return {
        "tokens": tokens,
        "tok_s": sum(map(len, tokens)) / seconds,
        "decode_tok_s": statistics.median(decode) if decode else float("nan"),
        "reserved_bytes": max(step.cache_positions_reserved for step in steps) * position_bytes(engine),
        "pool_bytes": cache.nbytes,
        "steps": len(steps),
    }


def compare_servers(engine: Engine, args: argparse.Namespace) -> dict[str, dict]:
    """Both servers on one workload, ``args.rounds`` times, alternating which goes first; medians over rounds."""
    prompts = class_workload(engine, args.requests)
    params = SamplingParams(temperature=0.0, max_new_tokens=args.new_tokens, stop_on_eos=False)
    base = ServeConfig(n_slots=args.requests, max_waiting=args.requests, threads=args.threads, keep_steps=4096)
    configs = {"slot": replace(base, kv_block_size=None), "paged": replace(base, kv_block_size=args.block_size)}
    for config in configs.values():  # warm-up: the first forwards of a shape are slower, in either server
        serve_once(engine, config, prompts[:2], replace(params, max_new_tokens=2))
    runs: dict[str, list[dict]] = {name: [] for name in configs}
    for round_ in range(args.rounds):
        for name in sorted(configs, reverse=round_ % 2 == 1):
            runs[name].append(serve_once(engine, configs[name], prompts, params))
    if runs["slot"][0]["tokens"] != runs["paged"][0]["tokens"]:
        print("warning: the two servers' tokens differ (a near-tie taken the other way?)")
    for key in ("tok_s", "decode_tok_s"):
        ratios = [paged[key] / slot[key] for paged, slot in zip(runs["paged"], runs["slot"])]
        print(f"paged / slot {key} by round: {', '.join(f'{r:.2f}' for r in ratios)}")
    return {
        name: {key: statistics.median(run[key] for run in found) for key in ("tok_s", "decode_tok_s", "reserved_bytes")}
        | {"pool_bytes": found[0]["pool_bytes"], "same_tokens": runs["slot"][0]["tokens"] == found[0]["tokens"]}
        for name, found in runs.items()
    }


def window_savings(engine: Engine, positions: int, block_size: int, threads: int | None) -> dict:
    """One request of ``positions`` positions (24 of them answer) through the paged server: K/V bytes held by
    the blocks in use against a cache whose sliding-window layers kept every block, at the end and past the window."""
    answer = 24
    text = "The history of the printing press, from Gutenberg's workshop to the newspapers of the industrial age. "
    prompt = engine.encode_prompt(text * (positions // 8))[: positions - answer]
    if len(prompt) != positions - answer:
        raise ValueError(f"the text gave {len(prompt)} tokens, fewer than {positions - answer}")
    params = SamplingParams(temperature=0.0, max_new_tokens=answer, stop_on_eos=False)
    config = ServeConfig(
        n_slots=1, max_waiting=1, slot_capacity=positions + 1, threads=threads, kv_block_size=block_size
    )
    with EngineServer(engine, config) as server:
        server.submit(prompt, params).result(timeout=3600)
        steps = server.recent_steps
    last = [step for step in steps if step.kv_bytes_held][-1]  # the last step before its blocks were given back
    windows = sorted({w for w in (engine.config.window_for(i) for i in range(engine.config.n_layers)) if w})
    return {
        "positions": last.cache_positions_in_use,
        "held": last.kv_bytes_held,
        "without_release": last.kv_bytes_without_release,
        "windows": windows,
        "local_layers": sum(engine.config.window_for(i) is not None for i in range(engine.config.n_layers)),
        "layers": engine.config.n_layers,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m inference.bench.paging_server", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--model", default=None)
    parser.add_argument("--block-size", type=whole_arg, default=16)
    parser.add_argument("--requests", type=whole_arg, default=16)
    parser.add_argument("--new-tokens", type=whole_arg, default=32)
    parser.add_argument("--rounds", type=whole_arg, default=3)
    parser.add_argument("--threads", type=whole_arg, default=None)
    parser.add_argument("--window", default=None, help="a model with sliding-window layers, e.g. gemma-3-270m")
    parser.add_argument("--long", type=whole_arg, default=1024, help="positions of --window's long request")
    args = parser.parse_args(argv)
    threads = set_threads(args.threads)
    engine = load_engine(model=args.model, device="cpu", dtype="float32")
    print(
        f"{engine.config.name}, {threads} threads, block size {args.block_size}, {args.requests} requests x "
        f"{args.new_tokens} tokens, {args.rounds} rounds"
    )
    found = compare_servers(engine, args)
    for name, row in found.items():
        print(
            f"{name:>5}: {row['tok_s']:.1f} tok/s aggregate, {row['decode_tok_s']:.1f} tok/s per decode step, "
            f"K/V reserved at the peak {row['reserved_bytes'] / MIB:.1f} MiB, pool {row['pool_bytes'] / MIB:.1f} MiB"
        )
    slot, paged = found["slot"], found["paged"]
    print(
        f"paged / slot: aggregate {paged['tok_s'] / slot['tok_s']:.2f}, decode {paged['decode_tok_s'] / slot['decode_tok_s']:.2f}, "
        f"reserved {paged['reserved_bytes'] / slot['reserved_bytes']:.2f}; same tokens: {paged['same_tokens']}"
    )
    if args.window:
        gemma = load_engine(model=args.window, device="cpu", dtype="float32")
        saved = window_savings(gemma, args.long, args.block_size, args.threads)
        print(
            f"{gemma.config.name}, one request at {saved['positions']} positions ({saved['local_layers']} of "
            f"{saved['layers']} layers with windows {saved['windows']}): K/V held {saved['held'] / MIB:.2f} MiB, "
            f"without release {saved['without_release'] / MIB:.2f} MiB, saved "
            f"{(saved['without_release'] - saved['held']) / MIB:.2f} MiB "
            f"({1 - saved['held'] / saved['without_release']:.0%})"
        )


if __name__ == "__main__":
    main()
