"""The class's guesses chart says the temperature its model bars were computed at (a lesson step's own, not always 1)."""

from __future__ import annotations

import pytest

from ui.class_page import figures as figs


@pytest.mark.parametrize("temperature", [1.0, 0.7, 1.5])
def test_the_model_bars_are_labelled_with_their_temperature(temperature):
    call = figs.guesses(["·the", "·a"], [0.5, 0.5], [0.6, 0.1], 2, temperature)
    model, _ = call.figure().data
    assert model.name == f"the model's probability (T = {temperature:g})"
    assert (call.table()["temperature"] == temperature).all()


def test_the_class_page_bars_stay_at_t_1():
    (model, _) = figs.guesses(["·the"], [1.0], [0.6], 1).figure().data
    assert model.name == "the model's probability (T = 1)"
