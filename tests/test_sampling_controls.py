"""The sampling controls (ui.sampling.controls): clamps, messages and seed parsing."""

from __future__ import annotations

import pytest

from ui.sampling.controls import parse_seed, resolve

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
