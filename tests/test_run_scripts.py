"""Where the start scripts listen: ``scripts/run-app.sh`` serves this machine only unless told, class mode (a teacher
key) asks for the address and warns that a key over plain HTTP can be read on the network; ``scripts/run-school.sh``
asks for its address too. The real scripts run, from a copy whose set-up and Python only say what they were given
(no venv is made, nothing starts)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEY_WARNING = "anyone on that network can read the teacher key"


def run_app(tmp_path: Path, *args: str, key: str | None = None, **env: str) -> subprocess.CompletedProcess:
    """``run-app.sh`` from a copy whose ``setup.sh`` does nothing and whose ``.venv/bin/python`` prints its arguments."""
    (tmp_path / "scripts").mkdir(exist_ok=True)
    shutil.copy(ROOT / "scripts" / "run-app.sh", tmp_path / "scripts" / "run-app.sh")
    (tmp_path / "scripts" / "setup.sh").write_text("")
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True, exist_ok=True)
    python.write_text('#!/usr/bin/env bash\necho "python $*"\n')
    python.chmod(0o755)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_EXPLORER_", "STREAMLIT_"))} | env
    if key is not None:
        environ["LLM_EXPLORER_TEACHER_KEY"] = key
    return subprocess.run(
        ["bash", str(tmp_path / "scripts" / "run-app.sh"), *args], env=environ, capture_output=True, text=True
    )


def test_one_user_is_served_on_this_machine_only(tmp_path):
    started = run_app(tmp_path)
    assert started.returncode == 0, started.stderr
    assert started.stdout.strip() == "python -m streamlit run app.py --server.address 127.0.0.1"
    told = run_app(tmp_path, "--server.address=0.0.0.0", "--server.port", "8502")  # asked for: as given
    assert told.stdout.strip() == "python -m streamlit run app.py --server.address=0.0.0.0 --server.port 8502"
    assert KEY_WARNING not in told.stderr  # no key, nothing to read on the network
    by_env = run_app(tmp_path, STREAMLIT_SERVER_ADDRESS="0.0.0.0")  # Streamlit's own variable counts as asked
    assert by_env.stdout.strip() == "python -m streamlit run app.py"


def test_class_mode_asks_for_the_address_and_warns_about_plain_http(tmp_path):
    refused = run_app(tmp_path, key="a long phrase")
    assert refused.returncode == 2 and refused.stdout == ""  # nothing started
    assert "class mode: say where students reach this server: --server.address 0.0.0.0" in refused.stderr
    network = run_app(tmp_path, "--server.address", "0.0.0.0", key="a long phrase")
    assert network.returncode == 0 and KEY_WARNING in network.stderr
    assert network.stdout.strip() == "python -m streamlit run app.py --server.address 0.0.0.0"
    local = run_app(tmp_path, "--server.address", "127.0.0.1", key="a long phrase")
    assert local.returncode == 0 and KEY_WARNING not in local.stderr


def test_the_school_asks_for_its_address_and_haproxy_writes_the_forwarded_address():
    refused = subprocess.run(["bash", "scripts/run-school.sh"], cwd=ROOT, capture_output=True, text=True)
    assert refused.returncode == 2 and "say where students reach the school: --address 0.0.0.0" in refused.stderr
    config = subprocess.run(
        ["bash", "scripts/run-school.sh", "--address", "0.0.0.0", "--haproxy-config"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "bind 0.0.0.0:8501" in config
    assert "http-request set-header X-Forwarded-For %[src]" in config  # any the client sent is replaced
