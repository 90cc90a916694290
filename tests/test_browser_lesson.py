"""A self-study lesson in a real browser, end to end: opened by its link, each question answered by clicking and
typing, each reveal drawn, the score right.

The answers the test gives are computed in this process the way the page computes them (``ui.lesson.answers`` on
the session's SmolLM2 engine), so the test knows which count and checks the score the page shows.
"""

from __future__ import annotations

import re

import pytest

from tests.test_browser import RENDER_S, _outside, _record_requests, _wait_for_run_to_finish, browser, shared_server
from ui.common.token_text import visible_token
from ui.lesson import answers, files
from ui.lesson.answers import NextToken, Number

pytestmark = pytest.mark.browser
__all__ = ["browser", "shared_server"]  # the fixtures, shared with tests/test_browser.py

SMOLLM2 = "SmolLM2-135M-Instruct"
WRONG = {5, 7}  # the steps answered wrong: the pick and the direction, both from the Logits chapter


def _given(step, found, wrong: bool) -> str:
    """What the learner types or clicks: a number, a token as the radio shows it, a word, a direction."""
    if isinstance(found, NextToken):
        if step.question.kind == "type":
            return "xylophone" if wrong else found.texts[0].strip()
        token = next(i for i in found.options if i != found.right_id) if wrong else found.right_id
        return visible_token(dict(zip(found.token_ids, found.texts))[token])
    if isinstance(found, Number):
        scale = 2**20 if found.quantity == "kv_bytes" else 1  # the KV cache's bytes are typed in MiB
        value, tolerance = found.value / scale, found.tolerance / scale
        return f"{value + 10 * tolerance + 1 if wrong else value:g}"
    return ("falls" if found.answer == "rises" else "rises") if wrong else found.answer


def test_a_lesson_end_to_end_in_chromium(ui_engine, shared_server, browser):
    lesson = files.load("text-to-next-token")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    requested = _record_requests(page)
    page.goto(f"{shared_server}/lesson?lesson=text-to-next-token&at=1")
    page.wait_for_selector("h1", timeout=RENDER_S * 1000)
    for step in lesson.steps:
        page.get_by_text(f"step {step.number} of {len(lesson.steps)}").wait_for(timeout=RENDER_S * 1000)
        _wait_for_run_to_finish(page)
        last = step.number == len(lesson.steps)
        if step.question is None:
            page.get_by_role("button", name="See your score" if last else "Next step").click()
            continue
        found = answers.truth(SMOLLM2, lesson, step)
        given = _given(step, found, step.number in WRONG)
        form = page.locator('[data-testid="stForm"]')
        if isinstance(found, Number):
            form.locator("input").fill(given)
        elif step.question.kind == "type":
            form.locator("input").fill(given)
        else:
            form.get_by_text(given, exact=True).click()
        form.get_by_role("button", name="Answer").click()
        page.locator(".js-plotly-plot .main-svg").first.wait_for(timeout=RENDER_S * 1000)  # the reveal's chart
        _wait_for_run_to_finish(page)
        verdict = "not quite" if step.number in WRONG else "right"
        assert page.get_by_text(re.compile(rf"Your answer: .* — {verdict}\.")).count() == 1, step.number
        page.get_by_role("button", name="See your score" if last else "Next step").click()
    page.get_by_text("your score").first.wait_for(timeout=RENDER_S * 1000)
    _wait_for_run_to_finish(page)
    assert page.locator('[data-testid="stMetricValue"]').inner_text().strip() == "7 / 9"
    assert page.get_by_text("You answered 7 of 9 questions right.").count() == 1
    assert (
        f"at={len(lesson.steps) + 1}" in page.url and "lesson=text-to-next-token" in page.url
    )  # the score, in the link too
    assert page.locator('[data-testid="stException"]').count() == 0
    assert not _outside(requested, shared_server)
    page.close()
