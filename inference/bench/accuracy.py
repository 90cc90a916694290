"""How close a quantized engine's predictions stay to the float32 reference: top-1 agreement and KL.

    python -m inference.bench.accuracy [--modes gguf,gguf-compiled,int8,int4,gguf@kleidiai] [--threads N]

The reference is transformers in float32 on the GGUF's dequantized weights (what the file
means). Every position of five prompts of 5 to ~385 tokens is compared: the share of
positions where the most probable next token is the same, and the mean KL(reference ‖
mode) in nats over all those positions. llama.cpp on the same file is measured the same
way when it is installed. Writes ``bench-results/accuracy.json``.

A "-compiled" mode (``gguf-compiled``) is the one-graph decode step (``compile=True``), which
only decode steps take: its logits are computed one position at a time through the cache
(teacher-forced: the prompt's own next token is fed at every step), beside the same stepping on
the eager step of the same mode, and its greedy continuations (64 tokens after the shortest and
the longest prompt) are compared token for token with the eager step's.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ..generation.engine import Engine, load_engine
from ..generation.sampling import SamplingParams
from ..generation.speculative import compare_greedy
from ..model.loader import gguf_source
from ..number_text import whole_arg
from ..threads import available_cores, set_threads
from .references import LlamaCppReference, TransformersReference, llama_cpp_problem
from .report import write_report

PROMPTS = [
    "The cat sat",  # 3 tokens of the article's example ...
    "Bank is closed on Sunday.",
    "The cat sat on the mat because it was tired.",
    "What is the capital of France? Explain in two sentences how you know, and name one famous landmark there.",
    " ".join(
        [
            "Once upon a time there was a little robot who lived in a lighthouse by the sea and wanted to "
            "learn how language models turn a prompt into an answer, one token at a time."
        ]
        * 11
    ),
]


@dataclass
class Agreement:
    system: str
    positions: int
    top1_agreement: float  # share of positions with the reference's most probable next token
    mean_kl_nats: float  # KL(reference || system), averaged over every position
    max_kl_nats: float


def compare(reference: list[torch.Tensor], other: list[torch.Tensor], system: str) -> Agreement:
    """Top-1 agreement and KL over every position of every prompt ((T, V) logits per prompt)."""
    ref, got = torch.cat(reference).double(), torch.cat(other).double()  # (P, V)
    ref_logp, got_logp = ref.log_softmax(-1), got.log_softmax(-1)
    kl = (ref_logp.exp() * (ref_logp - got_logp)).sum(-1)  # (P,)
    agree = (ref.argmax(-1) == got.argmax(-1)).double().mean()
    return Agreement(system, int(ref.shape[0]), float(agree), float(kl.mean()), float(kl.max()))


def engine_logits(engine: Engine, prompts: list[list[int]]) -> list[torch.Tensor]:
    return [engine.forward_logits(ids) for ids in prompts]


def stepped_logits(engine: Engine, prompts: list[list[int]]) -> list[torch.Tensor]:
    """Every position's logits (T, V) computed by decode steps through the cache, teacher-forced: the first
    token is prefilled, each later one is fed as one decode step (the compiled step's path, when ready)."""
    out = []
    for ids in prompts:
        cache = engine.new_cache(len(ids))
        rows = [engine.prefill(ids[:1], cache)] + [engine.decode_step(token, cache) for token in ids[1:]]
        out.append(torch.stack(rows))  # (T, V)
    return out


def greedy_tokens(engine: Engine, ids: list[int], new_tokens: int = 64) -> list[int]:
    params = SamplingParams(temperature=0, max_new_tokens=new_tokens, stop_on_eos=False)
    return [step.token_id for step in engine.generate(ids, params)]


def compiled_rows(mode: str, prompts: list[list[int]], expected: list[torch.Tensor]) -> tuple[list[Agreement], dict]:
    """The compiled step of ``mode`` and the eager step of the same weights, both stepped; greedy parity."""
    quant, _, kernel = mode.partition("@")
    quant = quant.removesuffix("-compiled")
    label = f"{quant}@{kernel}" if kernel else quant
    eager = load_engine(device="cpu", dtype="float32", quant=quant, kernel=kernel or None)
    compiled = load_engine(device="cpu", dtype="float32", quant=quant, compile=True, kernel=kernel or None)
    status = compiled.wait_for_step()
    if status.state != "ready":
        raise RuntimeError(f"the compiled step is not ready: {status.line}")
    rows = [
        compare(expected, stepped_logits(eager, prompts), f"ours, quant={label}, eager step"),
        compare(expected, stepped_logits(compiled, prompts), f"ours, quant={label}, compiled step"),
    ]
    parity = {}
    for name, ids in (("shortest", min(prompts, key=len)), ("longest", max(prompts, key=len))):
        want, got = greedy_tokens(eager, ids), greedy_tokens(compiled, ids)
        difference = compare_greedy(eager, ids, want, got)  # where they part, and whether the eager step tied there
        parity[name] = {
            "prompt_tokens": len(ids),
            "new_tokens": len(want),
            "equal": difference is None,
            "first_difference": None if difference is None else difference.position,
            "tokens": None if difference is None else [difference.plain_text, difference.speculative_text],
            "gap": None if difference is None else difference.gap,
            "rounding": None if difference is None else difference.rounding,
            "tie": None if difference is None else difference.is_tie,
        }
    return rows, {"mode": mode, "step": status.detail, "greedy": parity}


def run(modes: list[str], threads: int) -> dict:
    set_threads(threads)
    dense = load_engine(device="cpu", dtype="float32")
    prompts = [dense.tokenizer.encode(p) for p in PROMPTS]
    reference = TransformersReference(dense.folder)
    expected = [reference.logits(ids) for ids in prompts]
    rows = [compare(expected, engine_logits(dense, prompts), "ours, float32")]
    parities = []
    for mode in modes:
        if mode.partition("@")[0].endswith("-compiled"):
            stepped, parity = compiled_rows(mode, prompts, expected)
            rows += stepped
            parities.append(parity)
            continue
        quant, _, kernel = mode.partition("@")
        engine = load_engine(device="cpu", dtype="float32", quant=quant, kernel=kernel or None)
        rows.append(compare(expected, engine_logits(engine, prompts), f"ours, quant={mode}"))
    problem = llama_cpp_problem()
    if problem is None:
        llama = LlamaCppReference(gguf_source(None), threads)
        rows.append(compare(expected, [llama.logits(ids) for ids in prompts], f"llama.cpp {llama.version}"))
    return {
        "prompt_tokens": [len(p) for p in prompts],
        "threads": threads,
        "rows": [asdict(r) for r in rows],
        "llama_cpp": problem or "measured",
        "compiled_greedy": parities,
    }


def print_table(report: dict) -> None:
    print(
        f"against transformers float32 on the dequantized weights; prompts of {report['prompt_tokens']} tokens "
        f"({sum(report['prompt_tokens'])} positions)"
    )
    print(f"{'system':<34}{'top-1 agreement':>16}{'mean KL (nats)':>16}{'max KL':>10}")
    for row in report["rows"]:
        print(
            f"{row['system']:<34}{100 * row['top1_agreement']:>15.2f}%{row['mean_kl_nats']:>16.2e}"
            f"{row['max_kl_nats']:>10.2e}"
        )
    for parity in report.get("compiled_greedy", []):
        for name, run in parity["greedy"].items():
            verdict = (
                "equal"
                if run["equal"]
                else f"part at token {run['first_difference']} ({run['tokens'][0]!r} / {run['tokens'][1]!r}, logits "
                f"{run['gap']:.3f} apart in the eager step: "
                + ("a tie at the kernels' rounding" if run["tie"] else f"wider than the rounding {run['rounding']:.3f}")
                + ")"
            )
            print(
                f"{parity['mode']}: greedy {run['new_tokens']} tokens after the {name} prompt "
                f"({run['prompt_tokens']} tokens), compiled against eager step: {verdict}"
            )
    if report["llama_cpp"] != "measured":
        print(f"llama.cpp left out: {report['llama_cpp']}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m inference.bench.accuracy", description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="gguf,gguf-compiled,int8,int4")
    parser.add_argument(
        "--threads", type=whole_arg, default=None, help="torch and llama.cpp threads (default: every core)"
    )
    parser.add_argument("--out", type=Path, default=Path("bench-results/accuracy.json"))
    args = parser.parse_args(argv)
    report = run([m for m in args.modes.split(",") if m], args.threads or available_cores())
    print_table(report)
    write_report(report, args.out)


if __name__ == "__main__":
    main()
