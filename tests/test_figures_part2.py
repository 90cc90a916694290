"""Part-2 figures and helpers: pure figure builders, the chi-square fit, sampling controls, and the
engine-backed helpers (stages, draws, the 1,000-draw histogram, the logit lens, the block walk).

The histogram test can fail: it draws with the page's own helper and checks the counts
against the sampler's probabilities with a chi-square test, next to a negative control
that must reject the same counts against a wrong distribution.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import plotly.graph_objects as go
import pytest
import streamlit as st
import torch

from inference import SamplingParams, sample
from ui import compute_logits, compute_sampling
from ui.compute_sampling import chi2_survival, chi_square_gof, first_divergence
from ui.figures.block import make_answer_formation, make_block_activations, make_block_diagram, make_logit_lens
from ui.figures.logits import (
    GREEDY_COLOR, make_logits_bar, make_probability_overlay, make_stage_figure, make_temperature_sweep, visible_token,
)
from ui.figures.sampling import make_cumulative_ranges, make_draw_histogram, make_token_strips, toy_ranges
from ui.sampling_controls import parse_seed, resolve

PROMPT = "The cat sat"
TOKENS = [" on", " at", " atop"]


# -- pure figure builders -----------------------------------------------------------------
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


def test_toy_ranges_are_the_articles():
    starts, ends = toy_ranges([0.1, 0.2, 0.7])
    assert starts == pytest.approx([0.0, 0.1, 0.3])
    assert ends == pytest.approx([0.1, 0.3, 1.0])


def test_cumulative_ranges_mark_u_and_add_the_tail():
    fig = make_cumulative_ranges(["a", "b"], [0.0, 0.5], [0.5, 0.8], u=0.6, chosen_index=1, title="t",
                                 other_label="5 other tokens")
    assert [t.name for t in fig.data] == ["a", "b", "5 other tokens"]
    assert fig.data[2].base[0] == pytest.approx(0.8) and fig.data[2].x[0] == pytest.approx(0.2)
    assert fig.data[1].marker.line.width == 4 and fig.data[0].marker.line.width == 1
    assert fig.layout.shapes[0].x0 == 0.6
    assert "·on" in make_cumulative_ranges([" on"], [0.0], [1.0], 0.5, 0, "t").data[0].text[0]
    assert make_cumulative_ranges(["token 0"], [0.0], [1.0], 0.5, 0, "t", token_labels=False).data[0].text[0] \
        .startswith("token 0")


def test_draw_histogram_reports_the_fit():
    fig = make_draw_histogram(["a", "b"], [0.6, 0.4], [0.55, 0.45], 1000, 10.1, 1, 0.0015)
    assert "χ² = 10.10" in fig.layout.title.text and "p = 0.0015" in fig.layout.title.text
    assert len(fig.data) == 2


def test_token_strips_box_the_divergence():
    fig = make_token_strips([[" on", " a"], [" on", " the"]], ["A", "B"], [[0.9, 0.5], [0.9, 0.2]], 1, "t")
    assert fig.layout.shapes[0].x0 == 0.5 and fig.layout.shapes[0].x1 == 1.5
    assert make_token_strips([["x"]], ["A"], [[1.0]], None, "t").layout.shapes == ()


def test_block_figures():
    stages = ["block input", "attention output", "residual add 1", "RMSNorm", "feed-forward output", "residual add 2"]
    diagram = make_block_diagram(stages, (3, 576), [1.0] * 6, "block 0")
    assert len(diagram.layout.shapes) == 6
    assert "3 × 576" in diagram.layout.annotations[0].text
    heat = make_block_activations(stages, np.random.default_rng(0).normal(size=(6, 576)), n_dims=64)
    assert np.asarray(heat.data[0].z).shape == (6, 64)
    strings = [[["a", "b", "c"]] * 2] * 3  # (L=3, T=2, k=3)
    lens = make_logit_lens(["embed", "layer 0", "layer 1"], ["x", "y"], np.full((3, 2, 3), 0.3), strings)
    assert np.asarray(lens.data[0].z).shape == (3, 2)
    assert make_answer_formation(["embed", "layer 0"], [0.1, 0.9], " on").data[0].y == (0.1, 0.9)


# -- chi-square goodness of fit -------------------------------------------------------------
def test_chi2_survival_matches_tables():
    assert chi2_survival(3.841, 1) == pytest.approx(0.05, abs=5e-4)
    assert chi2_survival(18.307, 10) == pytest.approx(0.05, abs=5e-4)
    assert chi2_survival(0.0, 3) == pytest.approx(1.0)


def test_chi_square_accepts_right_and_rejects_wrong_distribution():
    probs = np.array([0.7, 0.2, 0.1])
    counts = np.bincount(np.random.default_rng(1).choice(3, size=2000, p=probs), minlength=3)
    assert chi_square_gof(counts, probs).p_value > 0.001
    assert chi_square_gof(counts, np.array([0.1, 0.2, 0.7])).p_value < 1e-12  # negative control


def test_chi_square_pools_rare_bins_and_flags_impossible_draws():
    probs = np.array([0.5, 0.49, 0.004, 0.003, 0.003])
    gof = chi_square_gof(np.array([50, 49, 1, 0, 0]), probs)
    assert gof.n_bins == 2 and gof.dof == 1  # the three rare ones fold into the smaller big bin
    assert chi_square_gof(np.array([5, 5, 1]), np.array([0.5, 0.5, 0.0])).p_value == 0.0


def test_first_divergence():
    assert first_divergence([1, 2, 3], [1, 2, 4]) == 2
    assert first_divergence([1, 2], [1, 2]) is None
    assert first_divergence([1, 2], [1, 2, 3]) == 2


# -- sampling controls: clamps and messages -----------------------------------------------
RAW = {"temperature": 0.8, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "repetition_penalty": 1.0}


def test_temperature_zero_is_explained_as_greedy():
    settings = resolve({**RAW, "temperature": 0.0}, 0, 49152)
    assert settings.params.greedy and "greedy" in settings.notes[0]


def test_top_k_above_vocabulary_is_clamped_with_a_note():
    settings = resolve({**RAW, "top_k": 100_000}, 0, 49152)
    assert settings.params.top_k == 49152 and "clamped" in settings.notes[0]


def test_top_p_zero_is_clamped():
    settings = resolve({**RAW, "top_p": 0.0}, 0, 49152)
    assert settings.params.top_p == pytest.approx(0.001) and settings.notes


@pytest.mark.parametrize("seed", ["abc", "1.5", -3, True, None])
def test_bad_seed_gives_a_message_not_an_exception(seed):
    settings = resolve(RAW, seed, 49152)
    assert settings.params is None and "seed must be a whole number" in settings.error


def test_seed_parsing_accepts_whole_numbers():
    assert parse_seed("42") == 42 and parse_seed(7) == 7 and parse_seed(3.0) == 3


# -- engine-backed helpers (the real model, loaded once) ----------------------------------
@pytest.fixture
def real(engine, monkeypatch):
    """The helpers, pointed at the session's engine (and a server over it), with empty caches."""
    from inference import EngineServer

    server = EngineServer(engine, n_slots=4, max_waiting=4)
    monkeypatch.setattr(compute_logits, "get_engine", lambda: engine)
    monkeypatch.setattr(compute_sampling, "get_engine", lambda: engine)
    monkeypatch.setattr(compute_sampling, "get_server", lambda: server)
    st.cache_data.clear()
    yield engine
    st.cache_data.clear()
    server.close()


def _key(**changes) -> tuple:
    return compute_logits.params_key(dataclasses.replace(SamplingParams(temperature=1.0, seed=0), **changes))


@pytest.mark.real_model
def test_histogram_agrees_with_the_probabilities(real):
    """The page's 1,000 draws fit the sampler's probabilities; the same counts reject a wrong distribution."""
    key = _key(temperature=1.0, top_p=0.95)
    drawn, order, probs = compute_sampling.draw_token_ids(PROMPT, False, key, 1000)
    slot = {t: i for i, t in enumerate(order)}
    counts = np.bincount([slot[t] for t in drawn], minlength=len(order))
    assert chi_square_gof(counts, probs).p_value > 0.001
    histogram = compute_sampling.draw_many(PROMPT, False, key, 1000)
    assert histogram.gof.p_value > 0.001 and histogram.observed.sum() == pytest.approx(1.0)
    assert histogram.expected.sum() == pytest.approx(1.0, abs=1e-5)
    # Negative control: the same counts against the T = 2 distribution must be rejected.
    wrong = compute_sampling.draw_token_ids(PROMPT, False, _key(temperature=2.0, top_p=0.95), 1)
    wrong_probs = dict(zip(wrong[1], wrong[2]))
    assert chi_square_gof(counts, np.array([wrong_probs.get(t, 0.0) for t in order])).p_value < 1e-6


@pytest.mark.real_model
def test_draws_are_the_samplers_own(real):
    """Draw k (one at a time, and inside the 1,000) equals sample() after k earlier draws of the seeded stream."""
    params = SamplingParams(temperature=0.9, top_k=20, seed=5)
    key = compute_logits.params_key(params)
    ids = real.encode_prompt(PROMPT)
    logits = real.forward_logits(ids)[-1]
    generator = params.make_generator()
    expected = [sample(logits, params, generator, previous_ids=ids) for _ in range(25)]
    drawn, _, _ = compute_sampling.draw_token_ids(PROMPT, False, key, 25)
    assert drawn == [r.token_id for r in expected]
    for k in (0, 1, 7, 24):
        one = compute_sampling.draw(PROMPT, False, key, k)
        assert (one.token_id, one.u) == (expected[k].token_id, expected[k].u)
        assert one.chosen_start <= one.u < one.chosen_end
    assert compute_sampling.draw(PROMPT, False, key, 3).u == compute_sampling.draw(PROMPT, False, key, 3).u
    history = compute_sampling.draw_history(PROMPT, False, key, 7, last=3)
    assert history == [(k, real.tokenizer.decode([expected[k].token_id])) for k in (5, 6, 7)]


@pytest.mark.real_model
def test_stages_follow_the_engine_and_tiny_top_p_keeps_one(real):
    view = compute_logits.sampling_stages(PROMPT, False, _key(top_p=0.01), 8)
    assert view.stage_names == ["softmax", "temperature", "top_k", "top_p", "min_p", "final"]
    assert view.survivors["top_p"] == 1 and view.survivors["final"] == 1
    assert real.tokenizer.decode([view.greedy_token_id]) == " on"  # seed 004: "The cat sat" -> " on"
    greedy = compute_logits.sampling_stages(PROMPT, False, _key(temperature=0.0), 8)
    assert greedy.stage_names == ["softmax", "final"] and greedy.entropy_bits == 0.0


@pytest.mark.real_model
def test_temperature_sharpens_below_one_and_flattens_above(real):
    sweep = compute_logits.temperature_sweep(PROMPT, False, (0.3, 1.0, 1.5))
    assert sweep.entropy_bits[0] < sweep.entropy_bits[1] < sweep.entropy_bits[2]
    assert sweep.top_probability[0] > sweep.top_probability[1] > sweep.top_probability[2]


@pytest.mark.real_model
def test_greedy_continuation_starts_with_on(real):
    run = compute_sampling.continuation(PROMPT, False, _key(temperature=0.0), 4)
    assert run.token_strings[0] == " on" and len(run.token_ids) == 4
    assert all(p == 1.0 for p in run.probabilities)  # greedy: the chosen token has all the final mass


@pytest.mark.real_model
def test_sampled_continuation_comes_from_the_shared_server_and_equals_generate(real):
    key = _key(temperature=1.2, top_p=0.95)
    run = compute_sampling.continuation(PROMPT, False, key, 6)
    params = dataclasses.replace(compute_logits.params_from_key(key), max_new_tokens=6)
    steps = list(real.generate(PROMPT, params))
    assert run.token_ids == [s.token_id for s in steps]
    assert run.probabilities == pytest.approx([s.probability for s in steps], abs=1e-6)
    assert compute_sampling.get_server().recent_steps, "the request went through the server's batcher"


@pytest.mark.real_model
def test_logit_lens_last_layer_is_the_models_output_and_block_adds_up(real):
    traced = compute_logits.traced_prompt(PROMPT, False)
    lens, walk = traced.lens, traced.walk
    ids = real.encode_prompt(PROMPT)
    argmax = real.forward_logits(ids).argmax(-1).tolist()
    assert lens.top_ids.shape == (real.config.n_layers + 1, len(ids), 3)
    assert lens.top_ids[-1, :, 0].tolist() == argmax
    assert lens.final_token_probability[-1] == pytest.approx(float(lens.top_probs[-1, -1, 0]))
    vec = torch.from_numpy(walk.last_vectors)  # (L, S, D)
    torch.testing.assert_close(vec[:, 2], vec[:, 0] + vec[:, 1], atol=1e-3, rtol=1e-4)  # residual add 1
    torch.testing.assert_close(vec[:, 5], vec[:, 2] + vec[:, 4], atol=1e-3, rtol=1e-4)  # residual add 2
    assert walk.shape == (len(ids), real.config.d_model)
