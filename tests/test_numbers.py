"""``inference.number_text``: the one parser of outside numbers gives a value or one clear error, whatever the text.

Property tests (hypothesis) over arbitrary Unicode text, NaN, ±inf and huge values: every call either returns a
number of the right type within its bounds, or raises ``NumberError`` whose message quotes the input; no other
exception. Plus the examples that crashed before (Unicode digits that are not decimals) and what is accepted.
"""

from __future__ import annotations

import contextlib
import io
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inference.number_text import NumberError, real, whole, whole_list, whole_pair

FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
UNICODE_DIGITS = ["²", "①", "٣", "߃", "𝟙", "১২", "1²", "²1", "Ⅻ", "1_000", "0x10", "1e3", "٣.٥"]
bounds = st.one_of(st.none(), st.integers(-(10**6), 10**6))
# Text that looks like numbers often, and anything else too
texts = st.one_of(
    st.text(),
    st.from_regex(r"\A\s*[+-]?[0-9٣²①]{0,30}(\.[0-9]*)?([eE][+-]?[0-9]{0,4})?\s*\Z"),
    st.sampled_from(["nan", "NaN", "inf", "-inf", "Infinity", "1e999", "-1e999", "", " ", "+", "-", ".", "e5"]),
    st.sampled_from(UNICODE_DIGITS),
)
values = st.one_of(
    texts,
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(),
    st.booleans(),
    st.none(),
    st.just(10**5000),
)


def _message_names(error: NumberError, what: str) -> None:
    assert str(error).startswith(what + " "), str(error)
    assert ": use " in str(error)


@FAST
@given(value=values, low=bounds, high=bounds)
def test_whole_gives_a_bounded_int_or_one_clear_error(value, low, high):
    try:
        number = whole(value, "X", low, high)
    except NumberError as error:
        _message_names(error, "X")
        return
    assert type(number) is int
    assert (low is None or number >= low) and (high is None or number <= high)
    if isinstance(value, str):
        assert value.strip().lstrip("+-").isascii() and value.strip().lstrip("+-").isdecimal()


@FAST
@given(value=values, low=bounds, high=bounds)
def test_real_gives_a_bounded_finite_float_or_one_clear_error(value, low, high):
    try:
        number = real(value, "X", low, high)
    except NumberError as error:
        _message_names(error, "X")
        return
    assert type(number) is float and math.isfinite(number)
    assert (low is None or number >= low) and (high is None or number <= high)


@FAST
@given(text=st.one_of(texts, st.lists(texts).map(",".join), st.none(), st.integers()))
def test_lists_and_pairs_give_ints_or_one_clear_error(text):
    for call in (
        lambda: whole_list(text, "L", 0, 99),
        lambda: whole_pair(text, ".", "P", 0, 99),
        lambda: whole_pair(text, "-", "P"),
    ):
        try:
            result = call()
        except NumberError as error:
            assert str(error)[0] in "LP", str(error)
            continue
        assert all(type(n) is int and 0 <= n for n in result)


@pytest.mark.parametrize("text", UNICODE_DIGITS + ["nan", "inf", "-inf", "1e999", "", "3.5", "--1", "1 2"])
def test_what_crashed_before_is_refused_with_the_input_in_the_message(text):
    """'²' and '①' pass ``str.isdigit()`` and crash ``int()``; here they are one clear error, like any other text."""
    with pytest.raises(NumberError) as caught:
        whole(text, "LLM_EXPLORER_SLOTS", 1, 256)
    assert repr(text) in str(caught.value)
    assert "whole number from 1 to 256" in str(caught.value)


def test_what_is_accepted():
    assert whole(" 42 ") == 42 and whole("+7") == 7 and whole("-3", low=-5) == -3
    assert whole(3.0) == 3 and whole(np.int64(5)) == 5
    assert real("0.5") == 0.5 and real(".5") == 0.5 and real("1e-3") == 0.001 and real("-2") == -2.0
    assert real(np.float32(0.25)) == 0.25 and real(7) == 7.0
    assert whole_pair("13.8", ".") == (13, 8) and whole_pair("7-1", "-") == (7, 1)
    assert whole_list("2, 5,,9") == [2, 5, 9]


@pytest.mark.parametrize(
    "call",
    [
        lambda: whole(3.5),
        lambda: whole(True),
        lambda: whole("300", "n", 1, 256),
        lambda: real(float("nan")),
        lambda: real(float("inf")),
        lambda: real(10**400),
        lambda: real("0.5", "p", 1.0, 2.0),
        lambda: whole_pair("1.2.3", "."),
        lambda: whole_list("1,x"),
    ],
)
def test_what_is_refused(call):
    with pytest.raises(NumberError):
        call()


# ---- every outside-number site routes through the parser: a value or its own clear error, never a traceback ----


@FAST
@given(slots=texts, threads=texts)
def test_settings_give_settings_or_a_settings_error(slots, threads):
    from inference.settings import Settings, SettingsError

    try:
        read = Settings.from_env({"LLM_EXPLORER_SLOTS": slots, "LLM_EXPLORER_THREADS": threads})
    except SettingsError as error:
        assert "LLM_EXPLORER_SLOTS=" in str(error) or "LLM_EXPLORER_THREADS=" in str(error)
        return
    assert read.slots is None or 1 <= read.slots <= 256
    assert read.threads is None or read.threads >= 1


@pytest.mark.parametrize("name", ["SLOTS", "THREADS"])
@pytest.mark.parametrize("text", ["²", "①", "٣", "1²"])
def test_unicode_digits_in_a_setting_are_a_settings_error(name, text):
    from inference.settings import Settings, SettingsError

    with pytest.raises(SettingsError, match=f"LLM_EXPLORER_{name}={text!r}: use a whole number"):
        Settings.from_env({f"LLM_EXPLORER_{name}": text})


@FAST
@given(
    flag=st.sampled_from(["--threads", "--seed", "--top-k", "--max-new-tokens", "--temperature", "--top-p"]), text=texts
)
def test_cli_numbers_give_a_value_or_argparse_own_error(flag, text):
    from inference.__main__ import parse_args

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parse_args(["x", flag, text])
    except SystemExit as exit_:
        assert exit_.code == 2
        assert f"argument {flag}: " in err.getvalue()
        return
    value = getattr(args, flag.lstrip("-").replace("-", "_"))
    assert type(value) in (int, float) and math.isfinite(value)


@FAST
@given(text=st.one_of(texts, st.lists(texts).map(",".join), st.lists(texts).map(":".join)))
def test_link_lists_keep_good_items_and_name_bad_ones(text):
    from ui.experiments import settings as exp
    from ui.generation.compute import parse_forced

    heads, _ = exp.parse_heads(text, 30, 9)
    edges, _ = exp.parse_edges(text, 11)
    layers, _ = exp.parse_layers(text, 30)
    forced, _ = parse_forced(text, steps=8)
    assert all(0 <= layer < 30 and 0 <= head < 9 for layer, head in heads)
    assert all(0 <= key < query < 11 for query, key in edges)
    assert all(0 <= layer < 30 for layer in layers)
    assert all(0 <= step < 8 and type(token) is int for step, token in forced.items())


@FAST
@given(raw=texts, name=st.sampled_from(["seed", "temperature", "top_k", "layer", "head_scale", "step"]))
def test_link_numbers_are_clamped_or_ignored_with_a_note(raw, name):
    from ui.session import links

    limits = links.Limits(n_layers=30, n_heads=9, vocab_size=49152, n_tokens=11)
    try:
        value, _ = links.parse(links.BY_NAME[name], raw, limits)
    except links._Ignored as ignored:
        assert f"`{name}`" in str(ignored)
        return
    assert type(value) in (int, float) and math.isfinite(value)


@pytest.mark.parametrize("text", ["²", "①", "٣", "1.²", "²-1", "0:²", "①:5"])
def test_unicode_digits_in_link_lists_are_left_out(text):
    from ui.experiments import settings as exp
    from ui.generation.compute import parse_forced

    assert exp.parse_heads(text, 30, 9) == ((), [text])
    assert exp.parse_edges(text, 11) == ((), [text])
    assert exp.parse_layers(text, 30) == ((), [text])
    assert parse_forced(text, steps=8)[0] == {}


@FAST
@given(seed=st.one_of(texts, st.floats(), st.integers(), st.none(), st.booleans()))
def test_the_typed_seed_gives_params_or_a_message(seed):
    from ui.sampling.controls import DEFAULTS, resolve

    settings_ = resolve(dict(DEFAULTS), seed, 49152)
    assert (settings_.params is None) == (settings_.error is not None)
    if settings_.error:
        assert settings_.error.startswith("Invalid setting: ")


def test_no_site_reads_outside_numbers_around_the_parser():
    """The class, not the examples: no ``isdigit()``/``isdecimal()``/``isnumeric()`` check and no argparse
    ``type=int``/``type=float`` is left in the library, the UI, the pages or the app (each one was a way for '²',
    NaN or ±inf to get past); outside numbers go through ``inference.number_text``."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    pattern = re.compile(r"\.is(digit|decimal|numeric)\(|\btype=(int|float)\b")
    files = [root / "app.py", *(root / "inference").rglob("*.py"), *(root / "ui").rglob("*.py")]
    files = [path for path in files if path.name != "number_text.py"]  # its docstring says why not
    files += (root / "pages").rglob("*.py")
    found = [
        f"{path.relative_to(root)}:{number}: {line.strip()}"
        for path in files
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []
