#!/usr/bin/env bash
# Set everything up (dev extras and chromium included), then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
# The suite's Python processes (two workers, servers, replicas, engine servers) write the .pyc of what they import,
# once for all of them, so the setup need not compile all of site-packages ahead (~20 s of a fresh clone's run).
unset PYTHONDONTWRITEBYTECODE
bash scripts/setup.sh --dev
# The lint rules and the format first (pyproject.toml's [tool.ruff]): a finding fails the run before any test starts.
.venv/bin/ruff check .
.venv/bin/ruff format --check .
set +e
# Two workers, whole files to each (a file's module-scoped servers and browser stay in one worker). On two
# cores the browser and load tests spend much of their time waiting on a page, which the other worker fills.
# PYTEST_WORKERS=0 runs in one process. --no-loadscope-reorder: the files in tests/conftest.py's order (the long ones
# first, so no worker is left with one at the end); xdist's own order is by number of tests, which started the
# 3-test page sweep (~170 s) late.
workers="${PYTEST_WORKERS:-2}"
order="--no-loadscope-reorder"
if [ "$#" -gt 0 ]; then  # the caller's own selection: one run
    .venv/bin/python -m pytest -n "$workers" --dist loadfile $order "$@"
    status=$?
else
    # The tests that assert a latency goal (marker "timing") run after the rest, alone: a goal such as "a follower
    # applies a broadcast within 2 s" is the app's on its machine, not the app's beside another busy test worker.
    .venv/bin/python -m pytest -n "$workers" --dist loadfile $order -m "not timing"
    first=$?
    # Only the files that mark a test so are collected (collecting all of them imports every test module: ~7 s).
    mapfile -t timing_files < <(grep -l 'pytest\.mark\.timing' tests/test_*.py)
    .venv/bin/python -m pytest -p no:xdist -m timing "${timing_files[@]}"
    second=$?
    if [ "$first" = 5 ] && [ "$second" = 5 ]; then status=5
    elif [ "$first" != 0 ] && [ "$first" != 5 ]; then status=$first
    elif [ "$second" != 0 ] && [ "$second" != 5 ]; then status=$second
    else status=0
    fi
fi
set -e
[ "$status" = 5 ] && { echo "no tests were collected" >&2; exit 1; }
exit "$status"
