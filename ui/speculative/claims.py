"""Sentences of the Speculative decoding page, each computed from the numbers it quotes.

A speed sentence goes the way the measurement went (below 1× is said as plainly as above it), a reason is
given only where the numbers show it (the share of drafts kept, tokens per forward, the draft's share of the
layers), and every count is the run's own: no match for prompt lookup, everything kept, nothing kept, a
greedy or a sampled request, one or two models.
"""

from __future__ import annotations

from collections.abc import Sequence

from ui.common import format as fmt
from ui.common.token_text import visible

TIE_BAND = 0.05  # speed-ups within 5 % of 1× are called "about as fast" (two runs each on a shared machine)
ALPHA = 0.001  # the χ² test's level, as in the engine's own tests
OFTEN = 0.5  # below this share of drafts kept, "the draft is wrong too often"


def _q(text: str) -> str:
    return "“" + (visible(text) or "∅") + "”"


def _x(value: float) -> str:
    return f"{value:.2f}×"


def _drafter_name(drafter: str) -> str:
    return "prompt lookup" if drafter == "lookup" else "self-speculation"


# -- the steps -------------------------------------------------------------------------------------------
def steps_sentence(n_tokens: int, forwards: int, drafted: int, accepted: int, drafting_steps: int) -> str:
    """What the run did, in counts: tokens, forwards of the model, drafts checked and kept."""
    head = f"{fmt.count(n_tokens, 'token')} took {fmt.count(forwards, 'forward')} of the model"
    head += f" ({n_tokens / forwards:.2f} tokens per forward; plain decoding needs one forward per token)."
    if drafted == 0:
        return (
            head + " Nothing was drafted: no step found a draft to check, so every step was an ordinary one-token "
            "step and the output is plain decoding's."
        )
    kept = (
        "every one of them was kept"
        if accepted == drafted
        else ("none was kept" if accepted == 0 else f"{accepted:,} were kept ({fmt.pct(accepted / drafted)})")
    )
    steps = fmt.count(drafting_steps, "step")
    return head + f" {steps} checked {fmt.count(drafted, 'drafted token')}: {kept}."


def lookup_note(matched_steps: int, steps: int, ngram: int) -> str | None:
    """Prompt lookup: how many steps found an earlier n-gram to copy (None when every step did)."""
    if matched_steps == steps:
        return None
    if matched_steps == 0:
        return (
            f"No step found the text's last tokens (n-grams of length {ngram} down to 1) earlier in the prompt or "
            "the output, so prompt lookup had nothing to copy: it fell back to plain one-token steps."
        )
    return (
        f"{fmt.count(steps - matched_steps, 'step')} of {steps:,} found no earlier n-gram to copy and ran as plain "
        "one-token steps."
    )


# -- the token in focus ------------------------------------------------------------------------------------
def focus_sentence(
    drafter: str,
    greedy: bool,
    text: str,
    p: float,
    q: float,
    accept_probability: float,
    u: float | None,
    accepted: bool,
    p_range: tuple[float, float] | None,
    model_top: str | None,
) -> str:
    """How the rule judged one drafted token, with its own p, q, min(1, p/q) and u."""
    token = _q(text)
    if greedy:
        top = _q(model_top) if model_top is not None else "another token"
        if accepted:
            return (
                f"Greedy decoding keeps a draft only when it is the model's own top token: {token} is, so it is kept "
                "(min(1, p/q) is 1 or 0 here, and no u is drawn)."
            )
        return (
            f"Greedy decoding keeps a draft only when it is the model's own top token: the model's top here is {top}, "
            f"not {token}, so the draft is rejected and {top} takes its place."
        )
    if drafter == "lookup":
        lead = (
            f"Prompt lookup copied {token} from earlier in the text, so its q is 1 (a point mass) and "
            f"min(1, p/q) = p = {fmt.prob(p)}."
        )
        if p_range is None:
            return lead + (
                f" {token} is not among the tokens the sampling settings keep here, so it cannot be kept: "
                f"u = {fmt.prob(u)} picks the replacement from the model's own ranges."
            )
        start, end = p_range
        decimals = fmt.interval_digits(start, end, u, digits=3)  # the range's width and u's place in it show
        where = fmt.interval(start, end, decimals)
        if end <= start:  # a range of no width: the ranges' float sums cannot hold a p this small
            where += f" (empty: its p = {fmt.prob(p)} adds nothing the cumulative sums can hold)"
        if accepted:
            return lead + (
                f" The one u that plain decoding draws here decides: u = {u:.{decimals}f} lands in {token}'s range {where} "
                "of the model's ranges, so the draft is kept (and plain decoding would have drawn it too)."
            )
        return lead + (
            f" The one u that plain decoding draws here decides: u = {u:.{decimals}f} lands outside {token}'s range {where}, "
            "so the draft is rejected and the token whose range u lands in takes its place (a draw from p without "
            f"{token}: the residual)."
        )
    ratio = "p ≥ q" if p >= q else f"p/q = {fmt.prob(p / q) if q > 0 else '∞'}"
    lead = (
        f"The draft gave {token} q = {fmt.prob(q)}; the model gives it p = {fmt.prob(p)} ({ratio}), so it is kept "
        f"with probability min(1, p/q) = {fmt.prob(accept_probability)}."
    )
    if u is None:
        return lead
    decimals = fmt.interval_digits(accept_probability, u, digits=3)  # never "u = 0.600 < 0.600"
    if accepted:
        return lead + f" u = {u:.{decimals}f} < {accept_probability:.{decimals}f}: kept."
    return lead + f" u = {u:.{decimals}f} ≥ {accept_probability:.{decimals}f}: rejected."


def residual_sentence(drafter: str, greedy: bool, drafted: str, replacement: str, probability: float, mass) -> str:
    """Where the replacement after a rejection came from."""
    if greedy:
        return f"The replacement is the model's own top token, {_q(replacement)}: greedy decoding has no residual to draw from."
    if drafter == "lookup":
        return (
            f"The residual is p without {_q(drafted)}, renormalised (it held {fmt.prob(mass)} of p); "
            f"{_q(replacement)} holds {fmt.prob(probability)} of it and was drawn."
        )
    return (
        f"The replacement {_q(replacement)} was drawn from normalize(max(0, p − q)): the tokens the model wants more "
        f"than the draft gave them, Σ max(0, p − q) = {fmt.prob(mass)}, of which {_q(replacement)} holds "
        f"{fmt.prob(probability)}. Drawn this way, the token is distributed exactly as plain decoding's."
    )


# -- speed -----------------------------------------------------------------------------------------------
def run_spread(*timings: Sequence[float]) -> float:
    """The largest relative spread between runs of one kind (``timings``: each kind's seconds): how far apart this
    machine timed the same work, e.g. 0.12 for 1.00 s and 1.12 s. 0 with fewer than two runs of each."""
    spreads = [max(t) / min(t) - 1 for t in timings if len(t) > 1 and min(t) > 0]
    return max(spreads, default=0.0)


def speed_verdict(speedup: float, tokens_per_forward: float, spread: float = 0.0) -> str:
    """What a measured speed-up means, one verdict for the headline and the sentence alike: "noise" (it saved no
    forward, so any gain is the machine's), "tie" (within the noise band: ``TIE_BAND``, or the spread between runs
    of one kind when that is wider), "faster" or "slower"."""
    band = max(TIE_BAND, spread)
    if abs(speedup - 1) <= band:
        return "tie"
    if speedup > 1 and tokens_per_forward <= 1:
        return "noise"
    return "faster" if speedup > 1 else "slower"


def speedup_headline(speedup: float, tokens_per_forward: float, spread: float = 0.0) -> str:
    """The speed-up metric's value, carrying the sentence's verdict: "1.38× (within noise)", "0.71× (slower)"."""
    verdict = speed_verdict(speedup, tokens_per_forward, spread)
    note = {"tie": " (within noise)", "noise": " (noise: no forward saved)", "slower": " (slower)"}.get(verdict, "")
    return _x(speedup) + note


def speed_sentence(
    speedup: float,
    acceptance_rate: float | None,
    tokens_per_forward: float,
    drafter: str,
    depth: int | None,
    n_layers: int,
    measured_at: str,
    load: float | None,
    spread: float = 0.0,
) -> str:
    """The measured speed-up, said the way it went (``speed_verdict``, the headline's verdict), with what the run's
    own numbers show as the reason. ``spread``: ``run_spread`` of the runs' timings."""
    when = f"Measured on this machine at {measured_at}" + (f" (load {load:.1f})" if load is not None else "")
    when += ", the best of two runs each, plain and speculative interleaved."
    kept = "no draft was made" if acceptance_rate is None else f"{fmt.pct(acceptance_rate)} of the drafts were kept"
    numbers = f"{kept}, {tokens_per_forward:.2f} tokens per forward"
    cost = ""
    if drafter == "self" and depth is not None:
        cost = (
            f"; each drafted token also costs the first {depth} of {n_layers} layers ({fmt.pct(depth / n_layers)} "
            "of a forward)"
        )
    verdict = speed_verdict(speedup, tokens_per_forward, spread)
    if verdict == "tie":
        band = (
            f"the runs of one kind differed by {fmt.pct(spread)}"
            if spread > TIE_BAND
            else f"within {fmt.pct(TIE_BAND)} of 1× is within this machine's noise"
        )
        return (
            f"On this prompt speculation ran about as fast as plain decoding: {_x(speedup)} is within noise ({band}; "
            f"{numbers}{cost}). {when}"
        )
    if verdict == "noise":
        return (
            f"Speculation saved no forward here ({numbers}), so the {_x(speedup)} it measured is the machine's own "
            f"noise between runs, not speculation{cost}. {when}"
        )
    if verdict == "faster":
        return f"On this prompt speculation ran {_x(speedup)} as fast as plain decoding: {numbers}{cost}. {when}"
    if acceptance_rate is None:
        reason = "nothing was drafted, so every step was a plain one plus the search for a draft"
    elif acceptance_rate < OFTEN:
        reason = "the draft is wrong too often"
    else:
        reason = "the drafts are kept often enough, but making and checking them costs more than the forwards they save"
    return f"On this prompt {reason}: {_x(speedup)} plain decoding's speed ({numbers}{cost}). {when}"


# -- the sweep -------------------------------------------------------------------------------------------
def sweep_sentence(
    settings: Sequence[int],
    acceptance: Sequence[float | None],
    tokens_per_forward: Sequence[float],
    speedup: Sequence[float],
    setting_name: str,
) -> str:
    """The sweep's extremes and the speed-ups' side of 1×, from its own points."""
    name = setting_name
    drafted = [(s, a) for s, a in zip(settings, acceptance) if a is not None]
    parts = []
    if not drafted:
        parts.append(f"No setting drafted anything on this prompt ({name} = {settings[0]}…{settings[-1]}).")
    elif len(drafted) == 1 or min(a for _, a in drafted) == max(a for _, a in drafted):
        share = drafted[0][1]
        where = "every setting that drafted" if len(drafted) > 1 else f"{name} = {drafted[0][0]}"
        parts.append(f"{fmt.pct(share)} of the drafts were kept at {where}.")
    else:
        best = max(drafted, key=lambda d: d[1])
        worst = min(drafted, key=lambda d: d[1])
        parts.append(
            f"The most drafts were kept at {name} = {best[0]} ({fmt.pct(best[1])}), the fewest at {name} = "
            f"{worst[0]} ({fmt.pct(worst[1])})."
        )
    low, high = min(tokens_per_forward), max(tokens_per_forward)
    span = f"{low:.2f}" if round(low, 2) == round(high, 2) else f"{low:.2f}–{high:.2f}"
    parts.append(f"Tokens per forward: {span}.")
    fastest = max(range(len(settings)), key=lambda i: speedup[i])
    faster = [s for s, v in zip(settings, speedup) if v > 1 + TIE_BAND]
    if not faster:
        parts.append(
            f"None ran clearly faster than plain decoding (the best: {_x(speedup[fastest])} at {name} = "
            f"{settings[fastest]})."
        )
    else:
        listed = ", ".join(str(s) for s in faster)
        parts.append(
            f"Faster than plain decoding at {name} = {listed} (the best: {_x(speedup[fastest])} at {name} = "
            f"{settings[fastest]})."
        )
    return " ".join(parts)


# -- it changes nothing ------------------------------------------------------------------------------------
def greedy_sentence(plain_texts: Sequence[str], speculative_texts: Sequence[str], first_difference: int | None) -> str:
    """Greedy speculative decoding against plain greedy, token by token."""
    if first_difference is None:
        return (
            f"Identical: all {fmt.count(len(plain_texts), 'token')} of greedy speculative decoding are plain greedy "
            "decoding's, in the same order."
        )
    plain = _q(plain_texts[first_difference]) if first_difference < len(plain_texts) else "the end of the text"
    spec = _q(speculative_texts[first_difference]) if first_difference < len(speculative_texts) else "the end"
    agree = (
        "the very first token differs"
        if first_difference == 0
        else f"the first {fmt.count(first_difference, 'token')} agree, then they part"
    )
    return f"Not identical: {agree}: plain greedy decoding gives {plain} and speculative decoding {spec}."


def seed_sentence(
    drafter: str, seeds: int, same_seeds: int, statistic: float, dof: int, p_value: float, cells: int
) -> str:
    """The χ² test of many seeds' first two tokens, said with its count and p-value, and what it can show."""
    head = f"Over {seeds:,} seeds (0…{seeds - 1:,}), the first two tokens of plain and of speculative decoding"
    if dof == 0:
        return (
            head + f" fell into {fmt.count(cells, 'pair')}: too few seeds per pair for a χ² test (pairs seen fewer "
            "than 10 times are pooled into one), so nothing is tested. More seeds, or a lower temperature, help."
        )
    test = f"χ² = {statistic:.2f} on {fmt.count(dof, 'degree')} of freedom, p = {fmt.prob(p_value)}"
    same = f" Both drew the same two tokens on {same_seeds:,} of the {seeds:,} seeds."
    if drafter == "lookup" and same_seeds == seeds:
        same = (
            f" Prompt lookup drew plain decoding's very tokens on all {seeds:,} seeds: its q is a point mass, so the "
            "one u plain decoding draws decides both the draft and the token."
        )
    if p_value < ALPHA:
        verdict = (
            f" At this size the two samples differ more than chance makes them (p < {ALPHA:g}): the draws do not "
            "look like one distribution."
        )
    else:
        verdict = (
            f" No sign that they differ (p ≥ {ALPHA:g}). With {seeds:,} seeds the test only sees large differences; "
            "the engine's own tests use 2,000."
        )
    return head + f": {test}." + same + verdict


SPREAD = 0.25  # two timings of one thing further apart than this share of the faster: the machine was busy


def spread_note(what: str, first: float, second: float) -> str | None:
    """A note when two timings of the same thing (seconds, or tokens/s) differ by more than ``SPREAD``."""
    low, high = sorted((float(first), float(second)))
    if low <= 0 or high / low - 1 <= SPREAD:
        return None
    return (
        f"The two timings of {what} differ by {fmt.pct(high / low - 1)} ({low:.3g} and {high:.3g}): the machine's "
        "speed changed while it measured, so the speed-up is rough."
    )
