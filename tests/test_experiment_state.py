"""The experiment's link forms (``ui/experiments/settings.py``) and their parsing in ``ui/session/links.py``: hostile values
are left out or ignored with a note, good ones round-trip, and ``Settings`` builds the engine's spec."""

from __future__ import annotations

import pytest

from inference.model.interventions import EdgeCut, HeadEdit, MLPEdit
from ui.experiments import settings as exp
from ui.session import links as url_state

LIMITS = url_state.Limits(n_layers=30, n_heads=9, vocab_size=49152, n_tokens=11)


def parse(name: str, raw: str):
    return url_state.parse(url_state.BY_NAME[name], raw, LIMITS)


@pytest.mark.parametrize(
    "name, raw, value, note",
    [
        ("off", "13.8,3.8", ((3, 8), (13, 8)), None),
        ("off", "3.8,3.8, 3.8 ", ((3, 8),), None),  # repeats and spaces folded
        ("off", "30.1,3.9,-1.2,x.y,3.8,<b>", ((3, 8),), "left out `'30.1'`, `'3.9'`, `'-1.2'`, `'x.y'` …"),
        ("off", "", (), None),
        ("cut", "7-1,10-0", ((7, 1), (10, 0)), None),
        ("cut", "1-7,11-2,3-3,7-1", ((7, 1),), "key < query < 11"),
        ("mlp_off", "2,29,30,9999999", (2, 29), "left out `'30'`, `'9999999'`"),
        ("head_mode", "mean", "mean", None),
        ("head_scale", "99", 3.0, "clamped to 3"),
        ("target", " cat", " cat", None),
        ("sweep", "1", True, None),
    ],
)
def test_experiment_values_are_parsed_or_left_out_with_a_note(name, raw, value, note):
    parsed, message = parse(name, raw)
    assert parsed == value
    assert (message is None) if note is None else (note in message), message


@pytest.mark.parametrize(
    "name, raw, reason",
    [
        ("off", "1.1," * 200, "is not a list of settings"),
        ("head_mode", "loud", "not one of zero, mean, scale"),
        ("head_scale", "nan", "not a finite number"),
        ("target", "x" * 100, "characters is not a setting"),
    ],
)
def test_unusable_experiment_values_are_ignored(name, raw, reason):
    with pytest.raises(url_state._Ignored, match=reason):
        parse(name, raw)


def test_link_forms_round_trip():
    heads, edges, layers = ((3, 8), (13, 8)), ((7, 1),), (2, 5)
    assert exp.parse_heads(exp.format_heads(heads), 30, 9) == (heads, [])
    assert exp.parse_edges(exp.format_edges(edges), 11) == (edges, [])
    assert exp.parse_layers(exp.format_layers(layers), 30) == (layers, [])


def test_settings_build_the_engines_spec():
    settings = exp.Settings(heads=((3, 8),), head_mode="scale", head_factor=0.5, edges=((7, 1),), mlps=(2,))
    spec = settings.spec()
    assert spec.heads == (HeadEdit(3, 8, "scale", 0.5),) and spec.edges == (EdgeCut(7, 1),)
    assert spec.mlps == (MLPEdit(2, 0.0),)
    assert settings.heads_only() == exp.Settings(heads=((3, 8),)) and exp.Settings().empty
