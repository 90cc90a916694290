"""The command line: streams text, reports speeds, and turns bad input into one line + exit 2."""

from __future__ import annotations

import subprocess
import sys

import pytest


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inference", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.real_model
def test_streams_and_reports_speeds():
    result = run_cli("The cat sat", "--max-new-tokens", "6", "--temperature", "0", "--device", "cpu")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("The cat sat on a cliff")
    assert "prefill: 3 tokens" in result.stderr and "decode:  5 tokens" in result.stderr


@pytest.mark.real_model
def test_speculates_with_the_same_text_and_reports_acceptance():
    result = run_cli("The cat sat", "--max-new-tokens", "6", "--temperature", "0", "--speculate", "self:20")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("The cat sat on a cliff")
    assert "speculation: self-speculation (the first 20 layers, up to 7 tokens a step, adaptive):" in result.stderr
    assert "tokens per forward" in result.stderr
    result = run_cli("x", "--speculate", "self:30")
    assert result.returncode == 2 and result.stderr.strip() == (
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
def test_bad_input_is_one_line_and_exit_2(args, message):
    result = run_cli(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
