"""AppTest for the Batching page: the padded batch, a static-vs-continuous run, batched == solo, bad rows."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.apptest_utils import chart, open_page

pytestmark = pytest.mark.real_model


def open_batching() -> AppTest:
    at = open_page("pages/batching.py", timeout=180)
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_padded_batch_and_a_comparison_run():
    at = open_batching()
    padded = chart(at, "batch_padded")["data"][0]
    assert len(padded["y"]) == 6  # the six default requests
    # leave row 1 out: every chart still calls the others by their table row (0, 2, 3, 4, 5); a short
    # longest answer (6 tokens) keeps the three runs quick
    at.session_state["batch_requests"] = {
        "edited_rows": {0: {"max new tokens": 6}, 1: {"prompt": ""}},
        "added_rows": [],
        "deleted_rows": [],
    }
    at.run()
    assert "Request 1 is left out" in at.warning[0].value
    assert chart(at, "batch_padded")["data"][0]["y"] == [f"request {r}" for r in (0, 2, 3, 4, 5)]
    at.number_input(key="batch_slots").set_value(2).run()
    at.button(key="batch_run").click().run()
    result = at.session_state["batch_comparison"]
    assert result.n_slots == 2 and result.continuous.grid.shape[0] == 2
    drawn = {cell for row in chart(at, "batch_static_timeline")["data"][0]["text"] for cell in row}
    assert {"0", "2", "5"} <= drawn and "1" not in drawn
    latency = chart(at, "batch_latency")["data"]
    assert latency[0]["x"] == [f"request {r}" for r in (0, 2, 3, 4, 5)]
    assert [round(v, 3) for v in latency[0]["y"]] == [round(v, 3) for v in result.static.ttft_ms]
    memory = chart(at, "batch_memory")["data"]
    assert max(memory[1]["y"]) <= max(memory[0]["y"])  # used never exceeds reserved
    assert any(
        m.value.startswith(("**Continuous batching won", "**Static batching won", "**Both modes")) for m in at.markdown
    )
    assert all(
        solo == static == cont
        for solo, static, cont in zip(result.solo, result.static.token_ids, result.continuous.token_ids)
    )
    assert "Every request produced exactly the same tokens" in at.success[0].value
    assert chart(at, "batch_static_timeline")["data"][0]["type"] == "heatmap"
    # static keeps a row per request for every step; continuous never holds more than its slots
    assert result.static.grid.shape == (5, len(result.static.phases))
    assert result.static.output_tokens == result.continuous.output_tokens
    assert not at.exception


def test_shared_prompt_starts_are_reused_and_counted():
    """Two slots, three requests on one opening: the late ones copy it; the sentence's numbers are the run's."""
    at = open_batching()
    opening = "The cat sat on the mat and looked at the"
    at.session_state["batch_requests"] = {
        "edited_rows": {
            0: {"prompt": f"{opening} door", "max new tokens": 2},
            1: {"prompt": f"{opening} dog", "max new tokens": 6},
            2: {"prompt": f"{opening} bird", "max new tokens": 3},
        },
        "added_rows": [],
        "deleted_rows": [3, 4, 5],
    }
    at.run()
    at.number_input(key="batch_slots").set_value(2).run()
    at.checkbox(key="batch_share").check().run()
    at.button(key="batch_run").click().run()
    result = at.session_state["batch_comparison"]
    assert result.share_prefixes and result.continuous.reused, "the request joining late reused the opening"
    assert result.static.computed_positions > 0 and not result.static.reused
    total = sum(result.continuous.reused.values())
    sentence = next(m.value for m in at.markdown if m.value.startswith("**Shared prompt starts:**"))
    assert f"{total:,} of the {result.continuous.prompt_positions:,} prompt positions" in sentence
    assert all(solo == cont for solo, cont in zip(result.solo, result.continuous.token_ids))
    assert "Every request produced exactly the same tokens" in at.success[0].value
    assert not at.exception


def test_bad_rows_are_explained_and_the_rest_still_runs():
    from ui.batching.compute import parse_requests

    at = open_batching()  # loads the engine into the cache for parse_requests
    requests = parse_requests(
        "SmolLM2-135M-Instruct",
        [
            {"prompt": "", "max new tokens": 4},
            {"prompt": "The cat sat", "max new tokens": 999},
            {"prompt": "x " * 200, "max new tokens": 3},
            {"prompt": "Hi", "max new tokens": "abc"},
        ],
    )
    assert requests.prompts == ["The cat sat", "Hi"] and requests.max_new_tokens == [32, 8]
    assert any("Request 0 is left out" in p and "empty" in p for p in requests.problems)
    assert any("Request 1: max new tokens 999" in p for p in requests.problems)
    assert any("Request 2 is left out" in p and "limit is 64" in p for p in requests.problems)
    assert not at.exception


def test_table_edits_survive_a_page_switch():
    """Streamlit drops a widget's state on a page that does not draw it: the table keeps its rows anyway."""
    at = open_batching()
    at.session_state["batch_requests"] = {
        "edited_rows": {0: {"max new tokens": 0}},
        "added_rows": [],
        "deleted_rows": [],
    }
    at.run()
    assert "Request 0: max new tokens 0 is outside 1–32, using 1" in at.warning[0].value
    at.switch_page("pages/logits.py").run()
    at.switch_page("pages/batching.py").run()
    assert not at.exception
    assert at.warning and "Request 0: max new tokens 0 is outside 1–32, using 1" in at.warning[0].value


def test_throughput_curve_is_measured_small(monkeypatch):
    from ui.batching import compute as compute_batching

    monkeypatch.setattr(compute_batching, "CURVE_SIZES", (1, 3))  # the page's own code path, at a test's size
    monkeypatch.setattr(compute_batching, "CURVE_STEPS", 2)
    at = open_batching()
    at.button(key="batch_curve_run").click().run()
    assert not at.exception
    curve = at.session_state["batch_curve"][1]
    assert curve.batch_sizes == [1, 3] and curve.decode_steps == 2 and all(ms > 0 for ms in curve.step_ms)
    assert curve.tokens_per_second == [1000 * b / ms for b, ms in zip(curve.batch_sizes, curve.step_ms)]
    assert chart(at, "batch_curve")["data"][0]["y"] == curve.tokens_per_second
    assert any("A decode step for 3 requests took" in m.value for m in at.markdown)


def test_a_class_asking_the_same_thing_is_computed_once_and_shared():
    """Identical seeded requests sent at once to the shared server: the counts shown are the results' own
    ``coalesced`` flags, and every tab got the same tokens (12 tokens each: the first is in flight for many
    forwards while the others are sent, microseconds apart)."""
    at = open_batching()
    at.number_input(key="batch_class_tabs").set_value(6).run()
    at.button(key="batch_class_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    model, prompt, sent = at.session_state["batch_class_result"]
    assert prompt == "Once upon a time there was" and sent.n == 6 and sent.identical
    assert 1 <= sent.shared <= 5 and sent.computed == 6 - sent.shared
    shown = {m.label: m.value for m in at.metric}
    assert shown["Requests sent"] == "6" and shown["Computed"] == str(sent.computed)
    assert shown["Rode on an identical one"] == str(sent.shared)
    assert any(m.value.startswith("6 identical requests sent at once") for m in at.markdown)
