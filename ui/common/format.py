"""How every page writes a number: probabilities, percentages, parts that add up, signed values, times, statistics.

One rule per kind of number, so a table, a chart label and the sentence under it never disagree:

- ``prob``: a probability in fixed decimals from 1e-3 up, in scientific notation below it
  (``1.45e-6``), and ``0`` only for a true 0 (a rounded "0.000" reads as "impossible");
  likewise ``1`` only for a true 1.
- ``pct``: a share as a percentage; a nonzero share too small for the digits shown is
  ``<0.1%`` (never ``0%``), one just short of the whole ``>99.9%`` (never ``100%``).
- ``parts_pct`` / ``whole_pct``: shares written so that the shown parts add up to the shown
  total (the largest-remainder rule for parts of a whole).
- ``fixed`` / ``signed``: decimals without a ``-0.00``.
- ``summary``: the median and the 95th percentile of a list of measurements, computed once
  (``statistics.median``: the mean of the two middle values of an even count; ``p95`` by
  linear interpolation, numpy's default), for the metric and the sentence beside it alike.
- ``ms``: milliseconds, "51.2 ms" below 100, "1,234 ms" above.
- ``head``: an attention head, "L1 H0" (layer 1, head 0), never "1.0".
- ``interval`` / ``interval_digits``: a half-open range of the cumulative ranges, "[0.94512, 0.94531)", with as
  many decimals as its width needs: a range 2e-4 wide never prints as "[0.945, 0.945)", and a point printed with
  the same digits (``u``) is never rounded onto an endpoint it does not equal.

Plain Python in, ``str`` out (``summary``: a small dataclass); no Streamlit, no model.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ui.common.token_text import visible

SCIENTIFIC_BELOW = 1e-3  # probabilities below this are written 1.45e-6


def _no_negative_zero(text: str) -> str:
    """'-0.00' -> '0.00' (a value that rounds to zero has no sign)."""
    return text[1:] if text.startswith("-") and not text.strip("-0.,%") else text


def fixed(value: float, digits: int = 2) -> str:
    """``value`` with ``digits`` decimals and thousands separators, never '-0.00'."""
    return _no_negative_zero(f"{value:,.{digits}f}")


def signed(value: float, digits: int = 2) -> str:
    """``value`` with its sign ('+0.12', '−'), '0.00' (no sign) when it rounds to zero."""
    text = f"{value:+,.{digits}f}"
    return text[1:] if not text.strip("+-0.,") else text


def scientific(value: float, digits: int = 3) -> str:
    """'1.45e-6' (``digits`` significant figures, the exponent without its padding zero)."""
    mantissa, exponent = f"{value:.{digits - 1}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def prob(p: float, digits: int = 3, significant: int = 3) -> str:
    """A probability: '0.214' (``digits`` decimals), '1.45e-6' (``significant`` figures) below 1e-3, '0' only for a
    true 0 and '1' only for a true 1."""
    p = float(p)
    if math.isnan(p):
        return "nan"
    if p == 0:
        return "0"
    if p == 1:
        return "1"
    if abs(p) < SCIENTIFIC_BELOW:
        return scientific(p, significant)
    text = f"{p:.{digits}f}"
    if p < 1 and float(text) >= 1:  # 0.99996 is not certain: say how far from 1 it is
        return f"1 − {scientific(1 - p, 2)}"
    return text


def pct(share: float, digits: int = 0) -> str:
    """A share (0..1) as a percentage with ``digits`` decimals: '12%', '<1%' for a nonzero share that would
    round to 0, '>99%' for one short of the whole that would round to 100, '0%' and '100%' only when exact."""
    share = float(share)
    if math.isnan(share):
        return "nan"
    step = 10.0**-digits  # the smallest percentage the digits can show
    value = 100 * share
    if share == 0:
        return "0%"
    if 0 < value < step / 2:
        return f"<{step:.{digits}f}%"
    if share < 1 and float(f"{value:.{digits}f}") >= 100:
        return f">{100 - step:.{digits}f}%"
    return _no_negative_zero(f"{value:,.{digits}f}%")


def parts_pct(shares: Sequence[float], digits: int = 1) -> tuple[list[str], str]:
    """Each share as a percentage and their total written as the sum of the shown parts (so '33.4% + 6.2%'
    is said to hold '39.6%', never the '40%' of the unrounded sum)."""
    rounded = [round(100 * float(s), digits) for s in shares]
    return [f"{r:.{digits}f}%" for r in rounded], f"{sum(rounded):.{digits}f}%"


def whole_pct(shares: Sequence[float], digits: int = 1) -> list[str]:
    """Parts of a whole as percentages that add up to 100 to the digits shown: the largest-remainder rule (round
    every part down, then give the missing steps to the parts that lost the most). A nonzero part too small to show
    is written '<0.1%' (never '0.0%') and left out of the sum, which its size is within."""
    scale = 10**digits
    total = max(float(sum(shares)), 1e-300)
    exact = [100 * scale * float(s) / total for s in shares]
    tiny = [0 < x < 0.5 for x in exact]
    kept = [0.0 if t else x for x, t in zip(exact, tiny)]
    floors = [math.floor(x) for x in kept]
    missing = 100 * scale - sum(floors)
    for i in sorted((i for i in range(len(kept)) if not tiny[i]), key=lambda i: floors[i] - kept[i])[: max(missing, 0)]:
        floors[i] += 1
    step = f"{1 / scale:.{digits}f}"
    return [f"<{step}%" if t else f"{f / scale:.{digits}f}%" for f, t in zip(floors, tiny)]


MAX_DECIMALS = 20  # past this a double near 1 has no more digits to show


def interval_digits(start: float, end: float, *points: float, digits: int = 4) -> int:
    """The fewest decimals, at least ``digits``, that show every gap between ``start``, ``end`` and ``points`` to two
    significant digits (a gap is then at least ten units of the last decimal, so its printed size is within 10%),
    and at which values that differ print differently: a nonzero width never prints empty, and a point inside
    never prints on an edge."""
    values = sorted({float(v) for v in (start, end, *points) if math.isfinite(v)})
    gaps = [b - a for a, b in zip(values, values[1:]) if b - a > 0]
    if gaps:
        digits = max(digits, math.ceil(-math.log10(min(gaps))) + 1)
    for decimals in range(min(digits, MAX_DECIMALS), MAX_DECIMALS + 1):
        shown = [f"{v:.{decimals}f}" for v in values]
        if len(set(shown)) == len(shown):
            return decimals
    return MAX_DECIMALS


def interval(start: float, end: float, digits: int | None = None) -> str:
    """'[0.94512, 0.94531)': the half-open range, at ``digits`` decimals (by default ``interval_digits``)."""
    decimals = interval_digits(start, end) if digits is None else digits
    return f"[{start:.{decimals}f}, {end:.{decimals}f})"


def ms(value: float) -> str:
    """Milliseconds: '51.2 ms' below 100, '1,234 ms' from 100 up."""
    return f"{value:,.0f} ms" if value >= 100 else f"{fixed(value, 1)} ms"


def count(n: int, word: str, plural: str | None = None) -> str:
    """'1 token', '3 tokens', '1,234 tokens'."""
    return f"{n:,} {plural_of(n, word, plural)}"


def clause(text: object) -> str:
    """A message (an exception's text) as a clause inside a sentence of ours: its own closing full stop dropped, so
    ``f"Cannot run this prompt: {fmt.clause(error)}. Edit it."`` never prints '..' (or '.).')."""
    return str(text).strip().rstrip(".")


def plural_of(n: int, word: str, plural: str | None = None) -> str:
    """``word`` as ``n`` of it is written, without the number: 'token'/'tokens', and verbs agreeing with a count
    the same way (``plural_of(n, 'holds', 'hold')``). Every count word in the app goes through here or ``count``."""
    return word if n == 1 else (plural or word + "s")


def code_span(piece: str) -> str:
    """A token in a code span, whitespace visible (backticks inside would end the span)."""
    return "`" + (visible(piece) or "∅").replace("`", "ˋ") + "`"


def quoted_text(text: str) -> str:
    """A model's (or a student's) text in a sentence: its repr (quotes, line breaks as \\n) in a code span, so that
    none of its characters is read as markdown, LaTeX or an unformatted placeholder (``*``, ``$``, ``{``)."""
    return "`" + repr(text).replace("`", "ˋ") + "`"


MARKDOWN_MARKS = "\\`*_~$[]"  # what markdown (and Streamlit's LaTeX, ``$``) would read in a token's text


def markdown_safe(text: str) -> str:
    """``text`` with each character markdown would read as markup backslash-escaped: shown as it is."""
    return "".join("\\" + ch if ch in MARKDOWN_MARKS else ch for ch in text)


def bold_token(piece: str) -> str:
    """A token in bold, whitespace visible, its markdown marks escaped (an asterisk would end the emphasis, two
    dollar signs would open LaTeX)."""
    return "**" + markdown_safe(visible(piece) or "∅") + "**"


def head(layer: int, head_index: int) -> str:
    """A head's name, 'L1 H0' (never '1.0', which reads as a decimal)."""
    return f"L{layer} H{head_index}"


def bits(value: float) -> str:
    """An entropy in bits ('0.00 bits' for a certain outcome: rounding error never makes it negative)."""
    return f"{fixed(max(float(value), 0.0), 2)} bits"


@dataclass(frozen=True)
class Summary:
    """The statistics of a list of measurements, computed once and quoted everywhere they appear."""

    n: int
    median: float
    p95: float
    low: float
    high: float
    mean: float


def summary(values: Sequence[float]) -> Summary:
    """Median (the mean of the two middle values of an even count), 95th percentile (linear), range, mean."""
    data = [float(v) for v in values]
    if not data:
        raise ValueError("no values to summarise")
    return Summary(
        len(data), statistics.median(data), float(np.percentile(data, 95)), min(data), max(data), statistics.fmean(data)
    )
