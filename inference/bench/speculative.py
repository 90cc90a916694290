"""Speculative decoding benchmark: each drafter against plain decoding, measured in the same run, interleaved.

    python -m inference.bench --speculate [--drafters lookup,self:8,self:15,self:22] [--draft-tokens 7]
                              [--mode fp32|bf16|gguf|int8|int4] [--new-tokens 64] [--repeats 3] [--threads N]
                              [--model PATH.gguf | gemma-3-270m]

For each prompt (the README's, and two copy-heavy ones: code with a small edit, a sentence quoted back)
and each drafter, greedy, ``--new-tokens`` tokens without stopping at end of text:

- tok/s of the whole request (the prompt's forward included: with prompt lookup it verifies a draft too);
- the ratio against plain decoding (``Engine.generate``) measured right before it in the same repeat,
  the median of the per-repeat ratios (these machines are noisy: a ratio of neighbours is steadier than
  a ratio of medians);
- the acceptance rate (kept drafts over drafted tokens) and tokens per forward of the model;
- that the tokens equal plain decoding's (greedy speculation must not change them).

Prints a table, writes ``bench-results/speculative.json``.
"""

from __future__ import annotations

import statistics
import time

from ..generation.engine import Engine
from ..generation.sampling import SamplingParams
from ..generation.speculative import Speculation, compare_greedy

PROMPTS = {  # name -> (prompt, chat template)
    "the cat sat": ("The cat sat", False),
    "the cat sat on the mat": ("The cat sat on the mat because it was tired.", False),
    "bank is closed (chat)": ("Bank is closed", True),
    "code with an edit": (  # a second function begun as a copy of the first with one change
        "# stats.py\n\ndef mean(values):\n    total = 0\n    count = 0\n    for value in values:\n"
        "        total += value\n        count += 1\n    return total / count\n\n\n"
        "def mean_of_squares(values):\n    total = 0\n",
        False,
    ),
    "quoted back (chat)": (
        'Repeat this sentence exactly, then stop: "The old lighthouse keeper climbed the hundred and twelve '
        'steps every evening to light the lamp, even after the ships stopped coming."',
        True,
    ),
}
DEFAULT_DRAFTERS = "lookup,self:8,self:15,self:22"


def _timed_run(engine: Engine, prompt: str, chat: bool, params: SamplingParams, speculation: Speculation | None):
    started = time.perf_counter()
    result = engine.complete(prompt, params, speculate=speculation, chat=chat)
    return result, time.perf_counter() - started


def run(
    engine: Engine,
    drafters: list[str],
    draft_tokens: int,
    new_tokens: int,
    repeats: int,
    prompts: list[str] | None = None,
) -> dict:
    params = SamplingParams(temperature=0, max_new_tokens=new_tokens, stop_on_eos=False)
    speculations = {name: Speculation.parse(name, draft_tokens) for name in drafters}
    for speculation in speculations.values():
        speculation.check(engine.config.n_layers)
    chosen = {name: PROMPTS[name] for name in prompts or PROMPTS}
    rows = {(p, d): {"ratios": [], "tok_s": [], "plain_tok_s": []} for p in chosen for d in speculations}
    warm_up = SamplingParams(temperature=0, max_new_tokens=8)
    for prompt, chat in chosen.values():  # first-call allocations out of the timings
        for speculation in [None, *speculations.values()]:
            _timed_run(engine, prompt, chat, warm_up, speculation)
    for _ in range(repeats):
        for prompt_name, (prompt, chat) in chosen.items():
            for drafter, speculation in speculations.items():
                plain, plain_seconds = _timed_run(engine, prompt, chat, params, None)
                speculated, seconds = _timed_run(engine, prompt, chat, params, speculation)
                row = rows[prompt_name, drafter]
                row["tok_s"].append(new_tokens / seconds)
                row["plain_tok_s"].append(new_tokens / plain_seconds)
                row["ratios"].append(plain_seconds / seconds)
                row["acceptance"] = speculated.acceptance_rate
                row["tokens_per_forward"] = speculated.tokens_per_forward
                row["same_tokens"] = speculated.token_ids == plain.token_ids
                difference = compare_greedy(
                    engine, engine.encode_prompt(prompt, chat=chat), plain.token_ids, speculated.token_ids
                )
                row["difference"] = (
                    None
                    if difference is None
                    else {
                        "position": difference.position,
                        "plain": difference.plain_text,
                        "speculative": difference.speculative_text,
                        "gap": difference.gap,
                        "rounding": difference.rounding,
                        "tie": difference.is_tie,
                    }
                )
                print(  # progress: a long run on a busy machine says where it is
                    f"  {prompt_name} / {drafter}: {new_tokens / seconds:.1f} tok/s against "
                    f"{new_tokens / plain_seconds:.1f} plain ({plain_seconds / seconds:.2f}x)",
                    flush=True,
                )
    return {
        "model": engine.config.name,
        "weights": engine.weights_description,
        "device": str(engine.device),
        "new_tokens": new_tokens,
        "draft_tokens": draft_tokens,
        "repeats": repeats,
        "rows": [
            {
                "prompt": prompt_name,
                "drafter": drafter,
                "tok_s": statistics.median(row["tok_s"]),
                "plain_tok_s": statistics.median(row["plain_tok_s"]),
                "ratio": statistics.median(row["ratios"]),
                "acceptance": row["acceptance"],
                "tokens_per_forward": row["tokens_per_forward"],
                "same_tokens": row["same_tokens"],
                "difference": row["difference"],
                "runs": {k: row[k] for k in ("tok_s", "plain_tok_s", "ratios")},
            }
            for (prompt_name, drafter), row in rows.items()
        ],
    }


def print_table(report: dict, threads: int, loadavg: tuple[str, str]) -> None:
    print(
        f"\n{report['model']} ({report['weights']}) on {report['device']}, {threads} thread(s); greedy, "
        f"{report['new_tokens']} tokens, {report['draft_tokens']} drafted a step; medians of {report['repeats']} "
        f"interleaved repeats; /proc/loadavg {loadavg[0]} before, {loadavg[1]} after"
    )
    print(f"{'prompt':<26}{'drafter':<10}{'tok/s':>8}{'plain':>8}{'ratio':>8}{'kept':>7}{'tok/fwd':>9}  same")
    for r in report["rows"]:
        kept = "-" if r["acceptance"] is None else f"{100 * r['acceptance']:.0f}%"
        print(
            f"{r['prompt']:<26}{r['drafter']:<10}{r['tok_s']:>8.1f}{r['plain_tok_s']:>8.1f}{r['ratio']:>7.2f}x"
            f"{kept:>7}{r['tokens_per_forward']:>9.2f}  {_same(r)}"
        )
    ties = [r for r in report["rows"] if r["difference"] and r["difference"]["tie"]]
    if ties:
        print(
            "  tie at n: the outputs part at generated token n, where the two tokens' logits lie within the "
            'rounding of a one-row against a many-row forward (docs/speculative.md, "Greedy: the same tokens")'
        )


def _same(row: dict) -> str:
    """yes; "tie at n (gap g <= r)" where rounding explains the first difference; NO otherwise."""
    if row["same_tokens"]:
        return "yes"
    d = row["difference"]
    if d and d["tie"]:
        return (
            f"tie at {d['position']} ({d['plain']!r}/{d['speculative']!r}, gap {d['gap']:.3g} <= {d['rounding']:.3g})"
        )
    return "NO" if not d else f"NO at {d['position']} (not within {d['rounding']:.3g} of the best logit)"
