"""The command line: streams text, reports speeds, and turns bad input into one line + exit 2.

One run goes through ``python -m inference`` in a new process (the entry point, a real load, the exit status); the
rest call the same ``main`` in this process (each new process costs an interpreter, torch's import and a model load:
~10 s on two shared cores), with the suite's thread setting kept and, where a model is needed, the session's engine.
"""

from __future__ import annotations

import subprocess
import sys

import pytest


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inference", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture
def cli_main(monkeypatch, capsys):
    """``main`` in this process: (exit status, stdout, stderr). ``engine``, when given, is what it loads."""
    from inference import __main__ as cli

    monkeypatch.setattr(cli, "set_threads", lambda count: count)  # the suite's one thread setting stays

    def run(*args: str, engine=None) -> tuple[int, str, str]:
        if engine is not None:
            monkeypatch.setattr(cli, "load_engine", lambda *_, **__: engine)
        capsys.readouterr()
        status = cli.main(list(args))
        out, err = capsys.readouterr()
        return status, out, err

    return run


@pytest.mark.real_model
def test_streams_and_reports_speeds():
    result = run_cli("The cat sat", "--max-new-tokens", "6", "--temperature", "0", "--device", "cpu")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("The cat sat on a cliff")
    assert "prefill: 3 tokens" in result.stderr and "decode:  5 tokens" in result.stderr


def test_the_entry_point_gives_one_line_and_exit_2():
    result = run_cli("x", "--speculate", "lookup", "--no-cache")
    assert result.returncode == 2
    assert result.stderr.strip() == "error: --speculate works through the KV cache: leave out --no-cache"


def test_speculates_with_the_same_text_and_reports_acceptance(cli_main, engine):
    status, out, err = cli_main(
        "The cat sat", "--max-new-tokens", "6", "--temperature", "0", "--speculate", "self:20", engine=engine
    )
    assert status == 0, err
    assert out.startswith("The cat sat on a cliff")
    assert "speculation: self-speculation (the first 20 layers, up to 7 tokens a step, adaptive):" in err
    assert "tokens per forward" in err
    status, out, err = cli_main("x", "--speculate", "self:30", engine=engine)
    assert status == 2 and err.strip() == (
        "error: self-speculation drafts with fewer blocks than the model's 30: choose 1..29 layers, got 30"
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["x", "--top-p", "2"], "top_p must be in (0, 1]"),
        (["x", "--temperature", "-1"], "temperature must be"),
        (["x", "--top-k", "-5"], "top_k must be"),
        (["x", "--model", "/no/such/model"], "model path not found"),
        (["x", "--device", "tpu"], "unknown device"),
        (["x", "--speculate", "medusa"], "speculate as lookup, lookup:n or self:k"),
        (["x", "--speculate", "lookup", "--draft-tokens", "0"], "draft_tokens must be a whole number in 1..16"),
        (["x", "--speculate", "lookup", "--no-cache"], "--speculate works through the KV cache"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message, cli_main):
    status, _, err = cli_main(*args)
    assert status == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
