"""A page that waits for a model load says so: what it waits for, and whether another session is loading it."""

from __future__ import annotations

import contextlib
import time

from ui.common import resources


def _spinners(monkeypatch) -> list[str]:
    shown: list[str] = []

    def spinner(text: str, **_kwargs):
        shown.append(text)
        return contextlib.nullcontext()

    monkeypatch.setattr(resources.st, "spinner", spinner)
    monkeypatch.setattr(resources, "_ready", set())  # no model built yet, whatever ran before in this process
    return shown


def test_a_session_waiting_on_another_session_s_load_says_who_and_how_long(monkeypatch):
    shown = _spinners(monkeypatch)
    monkeypatch.setattr(resources, "client_for", lambda model: f"client of {model}")
    monkeypatch.setitem(resources._loading_since, "gemma-3-270m", time.monotonic() - 40)
    assert resources.client_with_notice("gemma-3-270m") == "client of gemma-3-270m"
    assert "gemma-3-270m" in shown[0] and "another session began loading it 40 s ago" in shown[0]


def test_a_load_is_marked_while_it_runs_and_unmarked_after_even_when_it_fails(monkeypatch):
    seen: list[bool] = []

    def load_engine(**_kwargs):
        seen.append("tiny" in resources._loading_since)
        raise OSError("no such file")

    monkeypatch.setattr(resources, "load_engine", load_engine)
    monkeypatch.setattr(resources, "engine_settings", lambda model: {})
    try:
        resources.engine_for.__wrapped__("tiny")
    except OSError:
        pass
    assert seen == [True] and "tiny" not in resources._loading_since
    shown = _spinners(monkeypatch)
    monkeypatch.setattr(resources, "client_for", lambda model: None)
    resources.client_with_notice("tiny")
    assert "first use on this server" in shown[0]


def test_a_built_client_is_handed_out_with_no_spinner_and_a_failed_one_is_tried_again_with_it(monkeypatch):
    shown = _spinners(monkeypatch)
    outcomes = iter([OSError("no such file"), "client"])

    def client_for(model):
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    monkeypatch.setattr(resources, "client_for", client_for)
    try:
        resources.client_with_notice("tiny")
    except OSError:
        pass
    assert len(shown) == 1 and "tiny" not in resources._ready
    assert resources.client_with_notice("tiny") == "client" and len(shown) == 2
    monkeypatch.setattr(resources, "client_for", lambda model: "client")
    assert resources.client_with_notice("tiny") == "client" and len(shown) == 2  # built: no spinner again
