"""The sampling helpers (ui.sampling.compute): the chi-square fit, and draws and continuations on the real model."""

from __future__ import annotations

import dataclasses
import threading
import time

import numpy as np
import pytest

from inference import SamplingParams, sample
from inference.generation.sampling import generator_for
from ui.common import resources
from ui.common.stats import chi_square_gof, homogeneity
from ui.sampling import compute as compute_sampling
from ui.sampling.compute import first_divergence

PROMPT = "The cat sat"
MODEL = "SmolLM2-135M-Instruct"  # the name every engine-backed helper is asked about


@pytest.fixture
def real(ui_engine_and_server):
    """The session's engine, behind the logits and sampling helpers (``ui_engine_and_server`` in conftest.py)."""
    return ui_engine_and_server


def _key(**changes) -> tuple:
    return dataclasses.replace(SamplingParams(temperature=1.0, seed=0), **changes).canonical()


def test_the_p_values_match_the_tables():
    """χ² = 3.841 on 1 degree of freedom and 18.307 on 10 are the tables' 5 % points."""
    d = (3.841 * 25) ** 0.5  # two bins of 100 draws expected 50/50, off by d each: χ² = 2 d² / 50 = 3.841 (1 dof)
    gof = chi_square_gof(np.array([50 + d, 50 - d]), np.array([0.5, 0.5]))
    assert gof.dof == 1 and gof.p_value == pytest.approx(0.05, abs=5e-4)
    eleven = np.full(11, 100.0)
    eleven[0] += (18.307 * 100 / 2) ** 0.5  # χ² = 2 d² / 100 with d moved from one bin to another (10 dof)
    eleven[1] -= (18.307 * 100 / 2) ** 0.5
    assert chi_square_gof(eleven, np.full(11, 1 / 11)).p_value == pytest.approx(0.05, abs=5e-4)
    assert chi_square_gof(np.array([50, 50]), np.array([0.5, 0.5])).p_value == pytest.approx(1.0)


def test_homogeneity_tells_one_distribution_from_two():
    from collections import Counter

    rng = np.random.default_rng(3)
    a = Counter(rng.choice(4, size=2000, p=[0.4, 0.3, 0.2, 0.1]).tolist())
    same = Counter(rng.choice(4, size=2000, p=[0.4, 0.3, 0.2, 0.1]).tolist())
    other = Counter(rng.choice(4, size=2000, p=[0.1, 0.2, 0.3, 0.4]).tolist())
    assert homogeneity(a, same).dof == 3 and homogeneity(a, same).p_value > 0.001
    assert homogeneity(a, other).p_value < 1e-12  # negative control
    assert homogeneity(Counter({"x": 3}), Counter({"x": 2})).p_value == 1.0  # one cell: nothing to test


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


# This test can fail: it draws with the page's own helper and checks the counts against the
# sampler's probabilities with a chi-square test, next to a negative control that must reject the
# same counts against a wrong distribution.
@pytest.mark.real_model
def test_histogram_agrees_with_the_probabilities(real):
    """The page's 1,000 draws fit the sampler's probabilities; the same counts reject a wrong distribution."""
    key = _key(temperature=1.0, top_p=0.95)
    drawn, order, probs = compute_sampling.draw_token_ids(MODEL, PROMPT, False, key, 1000)
    slot = {t: i for i, t in enumerate(order)}
    counts = np.bincount([slot[t] for t in drawn], minlength=len(order))
    assert chi_square_gof(counts, probs).p_value > 0.001
    histogram = compute_sampling.draw_many(MODEL, PROMPT, False, key, 1000)
    assert histogram.gof.p_value > 0.001 and histogram.observed.sum() == pytest.approx(1.0)
    assert histogram.expected.sum() == pytest.approx(1.0, abs=1e-5)
    # Negative control: the same counts against the T = 2 distribution must be rejected.
    wrong = compute_sampling.draw_token_ids(MODEL, PROMPT, False, _key(temperature=2.0, top_p=0.95), 1)
    wrong_probs = dict(zip(wrong[1], wrong[2]))
    assert chi_square_gof(counts, np.array([wrong_probs.get(t, 0.0) for t in order])).p_value < 1e-6


@pytest.mark.real_model
def test_draws_are_the_samplers_own(real):
    """Draw k (one at a time, and inside the 1,000) equals sample() with draw k's generator of the seeded stream."""
    params = SamplingParams(temperature=0.9, top_k=20, seed=5)
    key = params.canonical()
    ids = real.encode_prompt(PROMPT)
    logits = real.recompute_last(ids)  # what the cached prompt logits are
    expected = [sample(logits, params, generator_for(params, k), previous_ids=ids) for k in range(25)]
    drawn, _, _ = compute_sampling.draw_token_ids(MODEL, PROMPT, False, key, 25)
    assert drawn == [r.token_id for r in expected]
    for k in (0, 1, 7, 24):
        one = compute_sampling.draw(MODEL, PROMPT, False, key, k)
        assert (one.token_id, one.u) == (expected[k].token_id, expected[k].u)
        assert one.chosen_start <= one.u < one.chosen_end
    assert (
        compute_sampling.draw(MODEL, PROMPT, False, key, 3).u == compute_sampling.draw(MODEL, PROMPT, False, key, 3).u
    )
    history = compute_sampling.draw_history(MODEL, PROMPT, False, key, 7, last=3)
    assert history == [(k, real.tokenizer.decode([expected[k].token_id])) for k in (5, 6, 7)]


@pytest.mark.real_model
def test_greedy_continuation_starts_with_on(real):
    run = compute_sampling.continuation(MODEL, PROMPT, False, _key(temperature=0.0), 4)
    assert run.token_strings[0] == " on" and len(run.token_ids) == 4
    assert all(p == 1.0 for p in run.probabilities)  # greedy: the chosen token has all the final mass


@pytest.mark.real_model
def test_sampled_continuation_comes_from_the_shared_server_and_equals_generate(real):
    key = _key(temperature=1.2, top_p=0.95)
    run = compute_sampling.continuation(MODEL, PROMPT, False, key, 6)
    params = dataclasses.replace(key, max_new_tokens=6)
    steps = list(real.generate(PROMPT, params))
    assert run.token_ids == [s.token_id for s in steps]
    assert run.probabilities == pytest.approx([s.probability for s in steps], abs=1e-6)
    assert resources.server_for(MODEL).recent_steps, "the request went through the server's batcher"


@pytest.mark.real_model
def test_sessions_asking_for_the_same_continuations_at_once_share_one_request_each(real, monkeypatch):
    """A class following the teacher onto the Sampling page asks for the same four at once: each continuation
    is generated once (the others wait for it), and every session gets the tokens ``generate`` gives."""
    server = resources.server_for(MODEL)
    submitted: list[object] = []
    release = threading.Event()
    real_submit = server.submit

    def counting_submit(prompt, params, **kwargs):
        submitted.append(params)
        release.wait(timeout=60)  # hold the first session's submission until every session has asked
        return real_submit(prompt, params, **kwargs)

    monkeypatch.setattr(server, "submit", counting_submit)
    keys = [_key(temperature=t, seed=41) for t in (0.0, 0.7, 1.1, 1.6)]
    results: list[list] = [None] * 6
    errors: list[BaseException] = []

    def session(i: int) -> None:
        try:
            results[i] = compute_sampling.continuations(MODEL, "A class of six", False, keys, 5)
        except BaseException as error:  # noqa: BLE001  (reported below)
            errors.append(error)

    threads = [threading.Thread(target=session, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)  # every session has claimed its keys (and five wait on the first)
    release.set()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert len(submitted) == len(keys)  # one request per continuation, not one per session
    for key, got in zip(keys, results[0]):
        params = dataclasses.replace(key, max_new_tokens=5)
        assert got.token_ids == [s.token_id for s in real.generate("A class of six", params)]
    assert all(r == results[0] for r in results)


def test_a_failed_shared_continuation_reaches_the_sessions_waiting_for_it():
    store = compute_sampling.ContinuationStore()
    future, mine = store.claim(("p", False, (), 4))
    again, also_mine = store.claim(("p", False, (), 4))
    assert mine and not also_mine and again is future
    store.finish(("p", False, (), 4), error=ValueError("busy"))
    with pytest.raises(ValueError, match="busy"):
        future.result(timeout=1)
    _, mine_now = store.claim(("p", False, (), 4))
    assert mine_now  # a failure is not stored: the next session generates it
