"""The logits figure builders (ui.logits.figures), on hand-made data."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ui.logits.figures import (
    GREEDY_COLOR,
    make_logits_bar,
    make_probability_overlay,
    make_stage_figure,
    make_temperature_sweep,
    visible_token,
)

TOKENS = [" on", " at", " atop"]


def test_visible_token_shows_whitespace():
    assert visible_token(" on") == "·on"
    assert visible_token("\n") == "↵"
    assert visible_token("") == "∅"


def test_logits_bar_marks_the_greedy_pick():
    fig = make_logits_bar(TOKENS, [5.2, 2.1, 1.8], greedy_index=0)
    assert isinstance(fig, go.Figure)
    bar = fig.data[0]
    assert list(bar.y) == [5.2, 2.1, 1.8]
    assert bar.marker.color[0] == GREEDY_COLOR and bar.marker.color[1] != GREEDY_COLOR
    assert fig.layout.annotations[0].text == "greedy pick"
    assert list(fig.layout.xaxis.ticktext) == ["·on", "·at", "·atop"]


def test_duplicate_token_texts_keep_separate_bars():
    fig = make_logits_bar(["\ufffd", "\ufffd"], [1.0, 0.5])
    assert list(fig.data[0].x) == [0, 1]


def test_probability_overlay_has_both_temperatures():
    fig = make_probability_overlay(TOKENS, [0.5, 0.3, 0.2], [0.8, 0.15, 0.05], "T = 1", "T = 0.5")
    assert [t.name for t in fig.data] == ["T = 1", "T = 0.5"]
    assert fig.layout.barmode == "group"


def test_temperature_sweep_marks_t_one_and_current():
    fig = make_temperature_sweep([0.5, 1.0, 2.0], [1.0, 2.0, 3.0], [0.9, 0.5, 0.2], current=0.5)
    assert len(fig.data) == 2 and fig.data[1].yaxis == "y2"
    xs = sorted(s.x0 for s in fig.layout.shapes if s.type == "line")
    assert xs == [0.5, 1.0]


def test_stage_figure_greys_out_cut_tokens():
    probs = np.array([[0.5, 0.3, 0.2], [1.0, 0.0, 0.0]])
    fig = make_stage_figure(TOKENS, ["softmax", "top-p"], probs, [49152, 1])
    heat = fig.data[0]
    assert np.isnan(heat.z[1][1]) and heat.text[1][1] == "cut"
    assert heat.y[1] == "top-p · 1 left"
