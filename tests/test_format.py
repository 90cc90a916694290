"""The one formatting rule for every number on screen (``ui.common.format``)."""

from __future__ import annotations

import statistics

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ui.common import format as fmt
from ui.common.token_text import visible


def test_a_probability_is_zero_only_when_it_is_zero():
    assert fmt.prob(0.0) == "0" and fmt.prob(1.0) == "1"
    assert fmt.prob(1.45e-6) == "1.45e-6"  # the forced token of the issue: never "0"
    assert fmt.prob(0.000999) == "9.99e-4" and fmt.prob(0.001) == "0.001"
    assert fmt.prob(0.21449) == "0.214" and fmt.prob(0.5, 4) == "0.5000"
    assert fmt.prob(0.99996) == "1 − 4.0e-5"  # not certain: not written as 1.000
    for p in np.logspace(-12, -0.0001, 200):
        assert float(fmt.prob(p).split(" ")[0].replace("−", "-")) != 0 or fmt.prob(p).startswith("1 − ")


def test_percentages_never_round_a_share_to_nothing_or_to_everything():
    assert fmt.pct(0.0) == "0%" and fmt.pct(1.0) == "100%"
    assert fmt.pct(0.004) == "<1%" and fmt.pct(0.0004, 1) == "<0.1%"
    assert fmt.pct(0.996) == ">99%" and fmt.pct(0.9996, 1) == ">99.9%"
    assert fmt.pct(0.215) == "22%" and fmt.pct(0.2154, 1) == "21.5%"
    assert fmt.pct(-0.0001, 1) == "0.0%"  # no "-0.0%"


def test_parts_add_up_to_the_total_shown():
    parts, total = fmt.parts_pct([0.334, 0.0624])
    assert parts == ["33.4%", "6.2%"] and total == "39.6%"  # the PCA axes: 33% + 6% beside a 40% caption
    shares = [0.3334, 0.3333, 0.3333]
    shown = fmt.whole_pct(shares)
    assert sum(float(s.rstrip("%")) for s in shown) == pytest.approx(100.0)
    assert fmt.whole_pct([0.789, 0.2109, 0.0001]) == ["78.9%", "21.1%", "<0.1%"]  # a float sliver is not "0.0%"
    rng = np.random.default_rng(0)
    for _ in range(200):
        raw = rng.dirichlet(np.ones(rng.integers(2, 7)))
        shown = fmt.whole_pct(raw)
        assert sum(float(s.rstrip("%")) for s in shown if not s.startswith("<")) == pytest.approx(100.0)
        assert all(not s.startswith("<") or r < 0.0005 for s, r in zip(shown, raw))


def test_signs_and_decimals():
    assert fmt.fixed(-0.0001) == "0.00" and fmt.fixed(-0.01) == "-0.01" and fmt.fixed(1234.5, 1) == "1,234.5"
    assert fmt.signed(-0.0001) == "0.00" and fmt.signed(0.125) == "+0.12" and fmt.signed(-2.0, 1) == "-2.0"
    assert fmt.bits(-1e-12) == "0.00 bits"  # the "-0.00 bits" of a one-hot distribution
    assert fmt.ms(51.24) == "51.2 ms" and fmt.ms(1234.4) == "1,234 ms"
    assert fmt.count(1, "token") == "1 token" and fmt.count(1234, "token") == "1,234 tokens"


def test_one_median_for_the_metric_and_the_sentence():
    values = [52.7, 40.0, 51.2, 49.7, 60.0, 47.3]
    stats = fmt.summary(values)
    assert stats.median == statistics.median(values) == (49.7 + 51.2) / 2  # not the upper middle, 51.2
    assert stats.p95 == pytest.approx(float(np.percentile(values, 95)))
    assert (stats.low, stats.high, stats.n) == (40.0, 60.0, 6)
    with pytest.raises(ValueError):
        fmt.summary([])


def test_a_count_and_its_verb_agree_through_one_helper():
    import numpy as np

    from ui.logits.frames import Frames

    assert [fmt.count(n, "token") for n in (0, 1, 2)] == ["0 tokens", "1 token", "2 tokens"]
    assert [fmt.plural_of(n, "holds", "hold") for n in (0, 1, 2)] == ["hold", "holds", "hold"]
    frames = Frames([0.0, 1.0], [5, 6], ["a", "b"], np.array([[1.0, 0.0], [0.6, 0.4]]), np.zeros(2), np.ones(2), [1, 2])
    summaries = frames.payload(1.0)["summaries"]
    assert "1 token holds 90 %" in summaries[0] and "2 tokens hold 90 %" in summaries[1]


def test_figures_and_pages_write_plurals_through_the_helper():
    """A hand-made plural ('token{'s' * (n != 1)}') forgets the verb ('1 token hold'); the helper is the one rule."""
    assert _lines_matching(r"""\{['"]s['"] \* \(|\{['"]s['"] if """, files="figures.py") == []


def test_a_message_inside_a_sentence_never_doubles_its_full_stop():
    assert (
        f"Cannot run this prompt: {fmt.clause('Connection refused.')}." == "Cannot run this prompt: Connection refused."
    )
    assert fmt.clause("the prompt is empty: type some text") == "the prompt is empty: type some text"


@settings(max_examples=300, deadline=None)
@given(
    start=st.floats(min_value=0.0, max_value=1.0),
    exponent=st.floats(min_value=-12.0, max_value=0.0),
    where=st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
)
def test_an_interval_prints_as_wide_as_it_is(start, exponent, where):
    """A cumulative range of any width from 1e-12 up: its printed ends differ (never "[0.945, 0.945)" for a range
    2e-4 wide), each printed end is its value rounded, and a point inside printed with the same decimals stays
    inside: never on the upper end it is below."""
    end = min(1.0, start + 10.0**exponent)
    assume(end > start)
    u = start + where * (end - start)
    assume(start <= u < end)
    decimals = fmt.interval_digits(start, end, u)
    low, high = fmt.interval(start, end, decimals)[1:-1].split(", ")
    assert low != high
    if decimals < fmt.MAX_DECIMALS:  # the printed width is the width, to two significant digits
        assert abs((float(high) - float(low)) - (end - start)) <= 0.1 * (end - start) + 1e-15
    assert abs(float(low) - start) <= 0.5 * 10.0**-decimals + 1e-15
    assert abs(float(high) - end) <= 0.5 * 10.0**-decimals + 1e-15
    shown_u = f"{u:.{decimals}f}"
    assert shown_u != high or decimals == fmt.MAX_DECIMALS  # 20 decimals tell apart all but ~1e-21 gaps
    assert (shown_u == low) == (u == start) or decimals == fmt.MAX_DECIMALS
    assert (
        fmt.interval(start, end)
        == f"[{start:.{fmt.interval_digits(start, end)}f}, {end:.{fmt.interval_digits(start, end)}f})"
    )


def test_the_held_out_range_gets_its_digits():
    assert fmt.interval(0.94503, 0.94523) == "[0.94503, 0.94523)"
    assert fmt.interval(0.945031, 0.945051) == "[0.945031, 0.945051)"
    assert fmt.interval(0.1, 0.6) == "[0.1000, 0.6000)"


def test_no_message_of_an_exception_is_followed_by_our_own_full_stop():
    """An exception's text usually ends with its own '.': a sentence of ours that quotes it as ``{error}.`` prints
    '..'. Every such place goes through ``fmt.clause`` (the guard reads the source of the UI and the pages)."""
    import re

    quoted = r"\{(?:error|err|exc|exception|problem)(?:!s)?\}[.!]"
    assert _lines_matching(quoted) == []
    assert re.search(quoted, 'st.error(f"Cannot run: {error}. Edit it.")')  # the guard can see one


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_a_models_text_in_a_sentence_is_one_code_span_on_one_line(text):
    """Generated text holds anything (``{`` of code, ``$``, ``*``, backticks, line breaks): quoted, it is one code
    span, so markdown reads none of it, and its line breaks and quotes show as repr writes them."""
    quoted = fmt.quoted_text(text)
    assert quoted.startswith("`") and quoted.endswith("`") and quoted.count("`") == 2
    assert "\n" not in quoted and quoted[1:-1] == repr(text).replace("`", "ˋ")


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_a_token_in_bold_shows_its_text_and_no_markup(piece):
    """Every markdown mark in a token (``*``, ``_``, ``~``, backticks, brackets, backslashes, LaTeX's ``$``) is escaped:
    unescaped, the bold text is the token as ``visible`` shows it, and no mark is left bare inside the emphasis."""
    import re

    bold = fmt.bold_token(piece)
    inner = bold[2:-2]
    assert bold.startswith("**") and bold.endswith("**")
    assert re.sub(r"\\(.)", r"\1", inner) == (visible(piece) or "∅")
    bare = re.sub(r"\\.", "", inner)  # what is left once each escaped character is taken out
    assert not any(mark in bare for mark in fmt.MARKDOWN_MARKS)


def test_pages_put_tokens_in_bold_through_the_helper():
    """``**{visible(...)}**`` written by hand escapes nothing: a token ``*`` ends the emphasis, two ``$`` open LaTeX."""
    assert _lines_matching(r"\*\*\{visible") == []


def _lines_matching(pattern: str, files: str = "*.py") -> list[str]:
    """'path:line' of every line of ``ui/`` (its ``files``) and ``pages/`` that ``pattern`` finds: the source guards."""
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[1]
    found = re.compile(pattern)
    return [
        f"{path.relative_to(root)}:{number}"
        for path in sorted((root / "ui").rglob(files)) + sorted((root / "pages").glob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if found.search(line)
    ]
