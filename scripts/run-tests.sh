#!/usr/bin/env bash
# Set everything up (dev extras and chromium included), then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
# The lint rules and the format first (pyproject.toml's [tool.ruff]): a finding fails the run before any test starts.
.venv/bin/ruff check .
.venv/bin/ruff format --check .
set +e
# Two workers, whole files to each (a file's module-scoped servers and browser stay in one worker). On two
# cores the browser and load tests spend much of their time waiting on a page, which the other worker fills.
# PYTEST_WORKERS=0 runs in one process.
.venv/bin/python -m pytest -n "${PYTEST_WORKERS:-2}" --dist loadfile "$@"
status=$?
set -e
[ "$status" = 5 ] && { echo "no tests were collected" >&2; exit 1; }
exit "$status"
