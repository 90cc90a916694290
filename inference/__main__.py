"""Command line: stream a completion and report prefill and decode speed.

    python -m inference "The cat sat" --max-new-tokens 32 --temperature 0.8 --seed 0 \
        [--model PATH_OR_ID] [--device cpu|cuda] [--dtype float32|bfloat16] [--quant gguf|int8|int4]
        [--compile] [--no-cache] [--chat] [--speculate lookup|lookup:n|self:k[:fixed] [--draft-tokens N]]
        [--kv contiguous|paged[:BLOCK]] [--n N]

Errors (bad settings, missing model, empty prompt) print as one line and exit 2.
"""

from __future__ import annotations

import argparse
import sys
import time

from . import (
    ModelLoadError,
    PromptError,
    SamplingError,
    SamplingParams,
    Speculation,
    SpeculativeRun,
    TokenizerError,
    UnsupportedModelError,
    load_engine,
    number_text,
    set_threads,
)
from .generation.speculative import DEFAULT_DRAFT_TOKENS
from .serving.paged import PagedBatcher, parallel_params, parse_kv

whole, real = number_text.whole_arg, number_text.real_arg  # a bad number: argparse's error naming the flag
SAMPLING_FLAGS = (  # SamplingParams' fields, each a flag (--max-new-tokens ...): (field, parse, default)
    ("max_new_tokens", whole, 32),
    ("temperature", real, 0.8),
    ("top_k", whole, 0),
    ("top_p", real, 1.0),
    ("min_p", real, 0.0),
    ("repetition_penalty", real, 1.0),
    ("seed", whole, 0),
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m inference", description=__doc__.split("\n")[0])
    parser.add_argument("prompt")
    for field, parse, default in SAMPLING_FLAGS:
        parser.add_argument("--" + field.replace("_", "-"), type=parse, default=default)
    parser.add_argument("--model", default=None, help="a .gguf file, a local HF folder or a hub id")
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:N or mps (default: best available)")
    parser.add_argument("--dtype", default=None, help="float32, bfloat16 or float16 (default: bf16 on CUDA)")
    parser.add_argument(
        "--quant",
        default=None,
        choices=["gguf", "int8", "int4"],
        help="gguf: keep the GGUF file's own quantized blocks; int8/int4: quantize on load",
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="compile the whole decode step as one graph (minutes the first time, seconds from disk after)",
    )
    parser.add_argument("--threads", type=whole, default=None, help="CPU threads (default: all cores)")
    parser.add_argument("--no-cache", action="store_true", help="recompute the whole sequence every step")
    parser.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template")
    parser.add_argument(
        "--speculate",
        default=None,
        metavar="lookup|lookup:n|self:k[:fixed]",
        help="speculative decoding: prompt lookup (n-grams up to n, default 3) or the model's first k layers as the "
        "draft; the output is distributed as without it (greedy: the same tokens); the draft length adapts to "
        "what is kept (:fixed: always --draft-tokens)",
    )
    parser.add_argument(
        "--draft-tokens",
        type=whole,
        default=DEFAULT_DRAFT_TOKENS,
        help="the most tokens drafted per step with --speculate",
    )
    parser.add_argument(
        "--kv",
        default="contiguous",
        metavar="contiguous|paged[:BLOCK]",
        help="the KV cache: one contiguous cache, or paged blocks of BLOCK positions (default 16)",
    )
    parser.add_argument(
        "--n", type=whole, default=1, help="answers to the prompt, sharing its KV blocks (seeds seed+i)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        params = SamplingParams(**{field: getattr(args, field) for field, _, _ in SAMPLING_FLAGS})
        speculation = Speculation.parse(args.speculate, args.draft_tokens) if args.speculate else None
        if speculation is not None and args.no_cache:
            raise ValueError("--speculate works through the KV cache: leave out --no-cache")
        block_size = parse_kv(args.kv)
        answers = parallel_params(params, args.n)
        if (block_size is not None or args.n > 1) and (args.no_cache or speculation is not None):
            raise ValueError("--kv paged and --n run on paged blocks: leave out --no-cache and --speculate")
        set_threads(args.threads)  # the command line's one setting: every core unless told otherwise
        engine = load_engine(args.model, device=args.device, dtype=args.dtype, quant=args.quant, compile=args.compile)
        if block_size is not None or args.n > 1:
            return _paged(engine, args, answers, block_size or 16)
        prompt_tokens = len(engine.encode_prompt(args.prompt, chat=args.chat))
        if args.compile:
            print("[compiling the decode step: minutes the first time, seconds once it is on disk]", file=sys.stderr)
            print(f"[decode step: {engine.wait_for_step().line}]", file=sys.stderr)
        print(args.prompt, end="", flush=True)
        steps = []
        if speculation is None:
            stream = engine.generate(args.prompt, params, use_cache=not args.no_cache, chat=args.chat)
        else:
            stream = engine.speculate(args.prompt, params, speculation, chat=args.chat)
        for step in stream:
            steps.append(step)
            print(step.text, end="", flush=True)
    except (SamplingError, PromptError, ModelLoadError, UnsupportedModelError, TokenizerError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    step = f"; decode step: {engine.step_status.line}" if engine.step_status else ""
    print(
        f"\n\n[{engine.config.name} on {engine.device}: {engine.weights_description}{step}; "
        f"{'no cache' if args.no_cache else 'KV cache'}] finish: {steps[-1].finish_reason}",
        file=sys.stderr,
    )
    if speculation is None:
        prefill, decode, decoded = steps[0].seconds, sum(s.seconds for s in steps[1:]), len(steps) - 1
        print(f"prefill: {prompt_tokens} tokens, {prompt_tokens / prefill:.1f} tok/s", file=sys.stderr)
    else:
        run = SpeculativeRun(speculation, steps)
        prefill, decode = steps[0].seconds, run.decode_seconds
        decoded = len(run.token_ids) - len(steps[0].token_ids)
        print(f"prefill: {prompt_tokens} tokens and {steps[0].drafted} drafted in {prefill:.3f} s", file=sys.stderr)
        rate = "nothing drafted" if run.acceptance_rate is None else f"{100 * run.acceptance_rate:.0f}% kept"
        print(
            f"speculation: {speculation.describe()}: {run.drafted} drafted, {rate}, "
            f"{run.tokens_per_forward:.2f} tokens per forward",
            file=sys.stderr,
        )
    if decoded > 0:
        print(f"decode:  {decoded} tokens, {decoded / decode:.1f} tok/s", file=sys.stderr)
    return 0


def _paged(engine, args: argparse.Namespace, answers: list[SamplingParams], block_size: int) -> int:
    """``--kv paged`` / ``--n``: the answers on paged blocks, sharing the prompt's; each printed when done."""
    prompt_ids = engine.encode_prompt(args.prompt, chat=args.chat)
    longest = len(prompt_ids) + answers[0].max_new_tokens
    batcher = PagedBatcher(engine, len(answers) * -(-longest // block_size), block_size)
    sequences = batcher.add_parallel(prompt_ids, answers)
    peak, started = 0, time.perf_counter()
    while batcher.has_work:
        batcher.step()
        peak = max(peak, batcher.cache.used_bytes)
    seconds = time.perf_counter() - started
    for index, seq in enumerate(sequences):
        header = f"--- answer {index + 1} (seed {seq.params.seed}) ---\n" if len(sequences) > 1 else ""
        print(f"{header}{args.prompt}{engine.tokenizer.decode(seq.output_ids)}")
    tokens = sum(len(seq.output_ids) for seq in sequences)
    print(
        f"\n[{engine.config.name} on {engine.device}: paged KV, blocks of {block_size}; peak {peak / 2**20:.2f} MiB "
        f"in use for {len(sequences)} answer(s) on one {len(prompt_ids)}-token prompt] {tokens} tokens in "
        f"{seconds:.2f} s, {tokens / seconds:.1f} tok/s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
