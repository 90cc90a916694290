"""Sentences of the Batching page, each computed from the measurements it quotes.

Times are milliseconds measured in this run; a sentence compares them only in the direction they actually went.
"""

from __future__ import annotations

from collections.abc import Sequence

from ui.common import format as fmt


def _range_ms(values: Sequence[float]) -> str:
    low, high = min(values), max(values)
    if round(low) == round(high):
        return f"{fmt.ms(low)} for every request"
    return f"{fmt.ms(low).removesuffix(' ms')}–{fmt.ms(high)}"


def _tps(value: float) -> str:
    return f"{value:.1f}" if value >= 1 else f"{value:.3g}"


TIE_BAND = 0.05  # tokens/s within 5 % of each other: called a tie (the runs' own step-to-step noise is that large)


def mask_caption(n_pad: int, n_columns: int) -> str:
    """What one request's mask shows: its padded query rows see only themselves (the blue diagonal), why, and that
    no real query sees a pad key."""
    if n_pad == 0:
        return (
            f"This request is the longest of the batch: no padding, so its mask is the plain causal one over all "
            f"{n_columns} columns."
        )
    rows = "row 0" if n_pad == 1 else f"rows 0–{n_pad - 1}"
    return (
        f"{rows.capitalize()} {'is a pad query' if n_pad == 1 else 'are pad queries'}: each may attend only to "
        "itself (the blue diagonal there), because a row that sees no key would make softmax divide by zero; "
        f"their outputs are never used. No real query attends to a pad key (columns 0–{n_pad - 1} stay empty "
        "below the pads)."
    )


def curve_caption(prompt: str, largest: int, decode_steps: int, seconds: float | None) -> str:
    """What the throughput curve measured, with the time it took when it ran (no promise of a duration)."""
    took = f", in {seconds:.1f} s" if seconds is not None else ""
    return (
        f"What was measured: static batches of “{prompt}” in 1–{largest} rows, greedy, the median of "
        f"{decode_steps} decode steps each (forward + sampling), on this server now{took}."
    )


def mode_caption(n_steps: int, computed: int, wasted: int, ttft_ms: Sequence[float]) -> str:
    share = wasted / max(computed, 1)
    return (
        f"{n_steps} steps, {computed:,} positions computed, {wasted:,} wasted ({fmt.pct(share)}) on padding and finished "
        f"rows; time to first token {_range_ms(ttft_ms)}."
    )


def verdict_sentence(
    static_tps: float,
    continuous_tps: float,
    static_steps: int,
    continuous_steps: int,
    static_wasted: int,
    continuous_wasted: int,
    n_slots: int,
    n_requests: int,
    late_prefills: int,
    static_decode: tuple[float, float] = (0.0, 0.0),
    continuous_decode: tuple[float, float] = (0.0, 0.0),
) -> str:
    """Which mode produced more tokens per second in this run, and the reasons the run itself shows.

    ``*_decode`` is (median decode step ms, mean rows per decode step) of each mode: a mode whose
    steps were slower although they carried fewer rows ran while the machine was busier.
    """
    work = (
        f"continuous computed {continuous_wasted:,} wasted positions against {static_wasted:,}, in "
        f"{continuous_steps} steps against {static_steps}"
    )
    if static_tps and abs(continuous_tps / static_tps - 1) < TIE_BAND:
        return (
            f"**Both modes ran about as fast in this run**: {_tps(continuous_tps)} (continuous) against "
            f"{_tps(static_tps)} tok/s (static), within {TIE_BAND:.0%}; {work}."
        )
    if continuous_tps >= static_tps:
        ratio = continuous_tps / static_tps if static_tps else float("inf")
        why = (
            [
                f"it computed {static_wasted - continuous_wasted:,} fewer wasted positions "
                f"({continuous_wasted:,} against {static_wasted:,})"
            ]
            if continuous_wasted < static_wasted
            else []
        )
        if continuous_steps <= static_steps:
            why.append(f"in {continuous_steps} steps against {static_steps}")
        reason = f": {', '.join(why)}" if why else ""
        return (
            f"**Continuous batching won this run**: {_tps(continuous_tps)} against {_tps(static_tps)} tok/s "
            f"(×{ratio:.2f}){reason}."
        )
    reasons = []
    if n_slots < n_requests:
        reasons.append(
            f"it had {n_slots} cache slot{'s' * (n_slots != 1)} for {n_requests} requests, while the static "
            f"batch ran all {n_requests} at once, so it needed {continuous_steps} steps against "
            f"{static_steps}"
        )
    elif continuous_steps > static_steps:
        reasons.append(f"it needed {continuous_steps} steps against {static_steps}")
    if late_prefills:
        reasons.append(
            f"{late_prefills} of its steps were prefills of requests joining later, each pausing every "
            "running request's decoding for a step"
        )
    if static_wasted <= continuous_wasted:
        reasons.append(f"the static batch wasted no more positions ({static_wasted:,} against {continuous_wasted:,})")
    (static_ms, static_rows), (continuous_ms, continuous_rows) = static_decode, continuous_decode
    if continuous_ms > static_ms > 0 and continuous_rows < static_rows:
        reasons.append(
            f"its decode steps were slower although they carried fewer rows (median {fmt.ms(continuous_ms)} "
            f"for {continuous_rows:.1f} rows on average, against {fmt.ms(static_ms)} for {static_rows:.1f}): "
            "the machine was busier during its run — run both again"
        )
    if not reasons:
        reasons.append(
            "its steps took longer on this machine at this moment: the two modes did almost the same work "
            "(on a shared CPU a few busy milliseconds per step decide it)"
        )
    return (
        f"**Static batching won this run**: {_tps(static_tps)} against {_tps(continuous_tps)} tok/s. Why: "
        + "; ".join(reasons)
        + "."
    )


def curve_sentence(batch_sizes: Sequence[int], tokens_per_second: Sequence[float], step_ms: Sequence[float]) -> str:
    """What the measured throughput curve shows: how much one more row costs a decode step."""
    first, last = 0, len(batch_sizes) - 1
    gain = tokens_per_second[last] / tokens_per_second[first] if tokens_per_second[first] else float("inf")
    cost = step_ms[last] / step_ms[first] if step_ms[first] else float("inf")
    shape = (
        "so batching pays: the step's cost is mostly reading the weights, shared by every row"
        if gain > 1.2
        else "so on this machine extra rows cost about as much as they bring"
    )
    return (
        f"A decode step for {batch_sizes[last]} requests took {fmt.ms(step_ms[last])} against {fmt.ms(step_ms[first])} "
        f"for {batch_sizes[first]} (×{cost:.2f}), giving ×{gain:.2f} the tokens per second, {shape}."
    )


def prefill_pause_sentence(paused_steps: int, paused_ms: float) -> str | None:
    """How long prefills of joining requests held up the requests already decoding (None if none did)."""
    if paused_steps == 0:
        return None
    return (
        f"A prefill pauses decoding: in this continuous run, {paused_steps} prefill step{'s' * (paused_steps != 1)} "
        f"of newly admitted requests held every running request for {fmt.ms(paused_ms)} in all, without giving them "
        "a token."
    )


def shared_start_sentence(reused: dict[int, int], prompt_positions: int, labels: Sequence[int]) -> str:
    """What the continuous run's shared prompt starts saved: ``reused`` maps a request's index to the prompt
    positions it copied from a slot instead of computing; ``labels`` are the requests' row numbers."""
    if not reused:
        return (
            "**Shared prompt starts:** no prompt began with tokens a slot already held when it was admitted, "
            "so every prompt was computed whole. Give two requests the same opening words, with fewer slots "
            "than requests, so that the second joins after the first."
        )
    total = sum(reused.values())
    each = ", ".join(f"request {labels[i]}: {n}" for i, n in sorted(reused.items()))
    return (
        f"**Shared prompt starts:** {total:,} of the {prompt_positions:,} prompt positions "
        f"{'was' if total == 1 else 'were'} copied from a slot holding the same opening tokens instead of "
        f"computed ({fmt.pct(total / max(prompt_positions, 1))}; {each})."
    )


def memory_sentence(reserved_bytes: Sequence[int], used_bytes: Sequence[int], mode: str) -> str:
    """How much of the KV cache reserved for the rows/slots in use held real tokens, step by step."""
    shares = [u / r for r, u in zip(reserved_bytes, used_bytes) if r]
    if not shares:
        return f"{mode}: no cache was reserved."
    return (
        f"{mode}: up to {max(reserved_bytes) / 2**20:,.2f} MiB reserved for the rows or slots in use, up to "
        f"{max(used_bytes) / 2**20:,.2f} MiB holding real tokens; step by step, real tokens filled "
        f"{fmt.pct(min(shares))}–{fmt.pct(max(shares))} of what was reserved (mean {fmt.pct(sum(shares) / len(shares))})."
    )


def same_requests_sentence(n: int, shared: int, identical: bool, seconds: float) -> str:
    """What the server did with ``n`` identical requests sent at once, from its own per-result flag."""
    computed = n - shared
    sent = fmt.count(n, "identical request")
    if shared == 0:
        how = (
            f"The server computed every one of them ({computed:,}): none was still in flight when the next arrived, "
            "so there was nothing to ride on."
        )
    else:
        how = (
            f"The server computed it once and handed that result to the other {shared:,}, which arrived while it "
            "was in flight"
            if computed == 1
            else f"The server computed {computed:,} of them; the other {shared:,} arrived while an identical one was "
            "in flight and rode on it"
        ) + f" ({shared / n:.0%} of the work saved)."
    same = (
        "Every request got the same tokens, as identical seeded (or greedy) requests must."
        if identical
        else "The requests did not all get the same tokens — that would be a bug in the engine."
    )
    return f"{sent[0].upper()}{sent[1:]} sent at once, answered in {seconds:.2f} s. {how} {same}"
