"""Numbers that come from outside the program: the one parser for links, environment variables, the
command line and files people write.

Owns ``whole`` (an integer), ``real`` (a finite float), ``whole_pair`` (``"3.8"``, ``"7-1"``) and
``whole_list`` (``"2,5"``), each with optional bounds, and ``NumberError``, the one error they raise:
its message quotes the input and says what is accepted; ``whole_arg`` and ``real_arg`` are the same
two as argparse ``type``s (a bad flag is argparse's own error naming it). Nothing else in the project
turns outside text into a number.

Why not ``str.isdigit()`` then ``int()``: Unicode calls '²' and '①' digits, so they pass the first
and crash the second, and ``int()`` itself reads other scripts' digits ('٣'), underscores ('1_0')
and surrounding spaces. Here a number is written in ASCII only: an optional sign, digits, and for a
real number a decimal point and an exponent. NaN and ±inf are refused (a setting is a finite
number), and so is a value that overflows a float. (The file is not called ``numbers.py``: that
would shadow the standard library's module for a script run from this folder.)
"""

from __future__ import annotations

import argparse
import math
import numbers
import re

MAX_CHARS = 64  # longer text is not a number anyone typed
WHOLE = re.compile(r"[+-]?[0-9]+", re.ASCII)
REAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
SPELLED_NOT_FINITE = re.compile(r"[+-]?(?:nan|inf|infinity)", re.ASCII | re.IGNORECASE)  # what float() would read
NOT_FINITE = " is not a finite number"


class NumberError(ValueError):
    """Text (or a value) that is not the number asked for; the message quotes it and says what is accepted.
    ``not_finite``: it was a number, but NaN, ±inf or too large for a float."""

    not_finite: bool = False


def _show(bound: float) -> str:
    return f"{bound:,}" if isinstance(bound, int) else f"{bound:g}"


def _rule(kind: str, low: float | None, high: float | None) -> str:
    """``"a whole number from 1 to 256"``: what is accepted, in words."""
    if low is not None and high is not None:
        return f"{kind} from {_show(low)} to {_show(high)}"
    if low is not None:
        return f"{kind} of at least {_show(low)}"
    if high is not None:
        return f"{kind} of at most {_show(high)}"
    return kind


def _error(what: str, value: object, rule: str, why: str = "") -> NumberError:
    """The one error: the input's name, the input (repr-quoted, shortened), why, and what to use instead."""
    try:
        shown = repr(value)
    except ValueError:  # an int past Python's 4,300-digit limit for text
        shown = f"a {value.bit_length():,}-bit number"  # type: ignore[attr-defined]
    shown = shown if len(shown) <= MAX_CHARS + 2 else shown[:MAX_CHARS] + "…"
    error = NumberError(f"{what + ' ' if what else ''}{shown}{why}: use {rule}")
    error.not_finite = why == NOT_FINITE
    return error


def whole(value: object, what: str = "", low: int | None = None, high: int | None = None) -> int:
    """``value`` as an int within [``low``, ``high``] (either may be None), else ``NumberError``.

    Text must be ASCII digits with an optional sign (spaces around are ignored); an int is taken as it is, a
    float only when it is finite and whole (a JSON file's ``3.0``); bools and anything else are refused.
    ``what`` names the input in the message (``"LLM_EXPLORER_SLOTS"``, ``"--threads"``).
    """
    rule = _rule("a whole number", low, high)
    if isinstance(value, str):
        text = value.strip()
        if len(text) > MAX_CHARS or not WHOLE.fullmatch(text):
            raise _error(what, value, rule)
        number = int(text)
    elif isinstance(value, numbers.Integral) and not isinstance(value, bool):
        number = int(value)
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        as_float = _float(value)
        if as_float is None or not as_float.is_integer():
            raise _error(what, value, rule)
        number = int(as_float)
    else:
        raise _error(what, value, rule)
    if (low is not None and number < low) or (high is not None and number > high):
        raise _error(what, value, rule)
    return number


def real(value: object, what: str = "", low: float | None = None, high: float | None = None) -> float:
    """``value`` as a finite float within [``low``, ``high``], else ``NumberError``.

    Text is ASCII: ``2``, ``-0.5``, ``.5``, ``1e-3``; ``nan``, ``inf`` and text whose value overflows a float are
    refused. Ints and floats (numpy's too) are taken when finite; bools and anything else are refused.
    """
    rule = _rule("a number", low, high)
    if isinstance(value, str):
        text = value.strip()
        if SPELLED_NOT_FINITE.fullmatch(text):
            raise _error(what, value, rule, NOT_FINITE)
        if len(text) > MAX_CHARS or not REAL.fullmatch(text):
            raise _error(what, value, rule)
        number = _float(text)
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        number = _float(value)
    else:
        raise _error(what, value, rule)
    if number is None:
        raise _error(what, value, rule, NOT_FINITE)
    if (low is not None and number < low) or (high is not None and number > high):
        raise _error(what, value, rule)
    return number


def _float(value: object) -> float | None:
    """``float(value)`` when finite; None for NaN, ±inf and values too large for a float."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def whole_pair(text: str, sep: str, what: str = "", low: int | None = 0, high: int | None = None) -> tuple[int, int]:
    """``"13.8"`` with ``sep="."`` -> (13, 8): two whole numbers around ``sep``, each within the bounds."""
    rule = f"two whole numbers joined by {sep!r}" + (
        f" (each {_rule('', low, high).strip()})" if low is not None or high is not None else ""
    )
    if not isinstance(text, str):
        raise _error(what, text, rule)
    left, found, right = text.partition(sep)
    try:
        if not found:
            raise _error(what, text, rule)
        return whole(left, what, low, high), whole(right, what, low, high)
    except NumberError:
        raise _error(what, text, rule) from None


def whole_list(text: str, what: str = "", low: int | None = None, high: int | None = None, sep: str = ",") -> list[int]:
    """``"2, 5"`` -> [2, 5]: whole numbers separated by ``sep`` (empty items skipped); the first bad item is named."""
    if not isinstance(text, str):
        raise _error(what, text, f"whole numbers separated by {sep!r}")
    return [whole(item, what, low, high) for item in text.split(sep) if item.strip()]


def whole_arg(text: str) -> int:
    """An argparse ``type``: ``whole(text)``, or argparse's one-line error naming the flag (exit 2), not a traceback.
    Ranges are checked where the value is used, with that setting's own message."""
    try:
        return whole(text)
    except NumberError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def real_arg(text: str) -> float:
    """An argparse ``type``: ``real(text)`` (NaN and ±inf refused), or argparse's error naming the flag."""
    try:
        return real(text)
    except NumberError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
