"""The Generation & KV cache page's pure figure builders, on hand-made data."""

from __future__ import annotations

import numpy as np

from ui.generation import figures as figs


def test_sequence_html_marks_forced_tokens_and_escapes_text():
    out = figs.sequence_html(["<b>", " cat"], [" on", " under"], [False, True])
    assert "&lt;b&gt;" in out and "<b>" not in out.replace("<br>", "")
    assert out.count("prompt") == 2 and "step 1 ✎" in out and "step 0<" in out
    assert figs.FORCED_COLOR in out and figs.SAMPLED_COLOR in out


def test_kv_heatmaps_outline_only_the_new_rows():
    keys = np.arange(3 * 5 * 4, dtype=float).reshape(3, 5, 4)
    values = -keys / 100
    fig = figs.make_kv_heatmaps(keys, values, ["a", "b", "c", "d", "e"], new_rows=[4], layer=2)
    heatmaps = [t for t in fig.data if t.type == "heatmap"]
    assert len(heatmaps) == 6  # K and V for each of 3 KV heads
    assert np.array_equal(np.asarray(heatmaps[0].z), keys[0]) and np.array_equal(np.asarray(heatmaps[3].z), values[0])
    assert heatmaps[3].zmax == np.abs(values).max()  # V keeps its own scale
    rects = [s for s in fig.layout.shapes if s.type == "rect"]
    assert len(rects) == 6 and all(r.y0 == 3.5 and r.y1 == 4.5 for r in rects)
    assert "Layer 2" in fig.layout.title.text


def test_cache_timing_has_both_curves_with_the_given_numbers():
    fig = figs.make_cache_timing([4, 5, 6], [10.0, 10.5, 10.2], [30.0, 35.0, 41.0])
    names = [t.name for t in fig.data]
    assert names == ["no cache: recompute all", "KV cache: one new position"]
    assert list(fig.data[0].y) == [30.0, 35.0, 41.0] and list(fig.data[1].x) == [4, 5, 6]


def test_phase_timeline_lays_steps_end_to_end():
    fig = figs.make_phase_timeline(
        ["prefill", "decode", "decode"], [0.2, 0.05, 0.05], [11, 1, 1], [" on", " the", " mat"]
    )
    prefill, decode = fig.data
    assert list(prefill.base) == [0.0] and list(prefill.x) == [200.0]
    assert np.allclose(list(decode.base), [200.0, 250.0]) and np.allclose(list(decode.x), [50.0, 50.0])


def test_alternatives_bar_highlights_the_chosen_token():
    fig = figs.make_alternatives_bar([" on", " down"], [0.6, 0.2], " down", "step 0")
    colors = list(fig.data[0].marker.color)
    assert colors[1] == figs.SAMPLED_COLOR and colors[0] != figs.SAMPLED_COLOR
    assert list(fig.data[0].y) == ["·on", "·down"]
