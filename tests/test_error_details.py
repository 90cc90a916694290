"""``client.showErrorDetails``: what a student sees of an error that slipped through, on a served app.

A live ``streamlit run`` (from the repository root, so ``.streamlit/config.toml`` applies) of a one-line script that
raises, started as the served scripts start it (``STREAMLIT_CLIENT_SHOW_ERROR_DETAILS=none``, which both set unless
the operator says otherwise): the page holds Streamlit's one plain sentence with no message, type, file path or
source line, and the server's log holds the whole traceback. Development (``streamlit run app.py``, AppTest) keeps
the config file's ``full``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.redis_server import free_port
from tests.streamlit_client import StreamlitSession

ROOT = Path(__file__).resolve().parents[1]
SECRET = "the-secret-in-the-message"
FAILING = f'import streamlit as st\nst.write("before")\nraise ValueError("{SECRET}")\n'


def _serve(script: Path, log: Path, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(script), "--server.port", str(port)],
        cwd=ROOT,
        env={**{k: v for k, v in os.environ.items() if k != "STREAMLIT_CLIENT_SHOW_ERROR_DETAILS"}, **env},
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2):
                return process, url
        except OSError:
            time.sleep(0.3)
    process.kill()
    raise AssertionError(f"streamlit did not start: {log.read_text()[-2000:]}")


def test_a_served_page_shows_one_plain_sentence_and_the_log_holds_the_traceback(tmp_path):
    script, log = tmp_path / "failing.py", tmp_path / "server.log"
    script.write_text(FAILING)
    process, url = _serve(script, log, {"STREAMLIT_CLIENT_SHOW_ERROR_DETAILS": "none"})
    try:
        with StreamlitSession(url, timeout=60) as session:
            run = session.open("")
        [shown] = run.of_type("exception")
        page = f"{shown.exception.type} {shown.exception.message} {' '.join(shown.exception.stack_trace)}"
        assert "The original error message is redacted" in shown.exception.message
        for leak in (SECRET, "ValueError", str(script), "failing.py", "raise ValueError"):
            assert leak not in page, leak
    finally:
        process.terminate()
        process.wait(timeout=30)
    logged = re.sub(r"\x1b\[[0-9;]*m", "", log.read_text())  # Streamlit logs it through rich, in colour
    assert f"ValueError: {SECRET}" in logged and "failing.py" in logged  # the operator has every detail


@pytest.mark.parametrize("script", ["scripts/run-app.sh", "scripts/run-school.sh"])
def test_both_served_scripts_hide_details_unless_told(script):
    line = "export STREAMLIT_CLIENT_SHOW_ERROR_DETAILS=${STREAMLIT_CLIENT_SHOW_ERROR_DETAILS:-none}"
    text = (ROOT / script).read_text()
    assert line in text
    assert text.index(line) < text.index("streamlit run")  # set before any replica starts


def test_development_keeps_the_details():
    import tomllib

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["client"]["showErrorDetails"] == "full"
