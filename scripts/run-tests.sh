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
# Two workers, whole files to each (a file's module-scoped servers and browser stay in one worker).
# PYTEST_WORKERS=0 runs in one process. --no-loadscope-reorder: the files in tests/conftest.py's order (the long ones
# first, so no worker is left with one at the end); xdist's own order is by number of tests, which started the
# 3-test page sweep (~170 s) late.
workers="${PYTEST_WORKERS:-2}"
order="--no-loadscope-reorder"
if [ "$#" -gt 0 ]; then  # the caller's own selection: one run
    .venv/bin/python -m pytest -n "$workers" --dist loadfile $order "$@"
    status=$?
else
    # The main phase in two runs at once: the files that drive Chromium in a process of their own (one thread), the
    # rest on the workers. A browser test waits on a page most of the time, and in one of two workers it left a core
    # idle then (both cores were busy 92 % of the main phase, 97 % this way: docs/testing.md). Its output is printed
    # when both have ended.
    browser_files=(tests/test_browser.py tests/test_browser_lesson.py tests/test_browser_paged_kv.py)
    browser_log=$(mktemp)
    LLM_EXPLORER_TEST_THREADS=1 .venv/bin/python -m pytest -p no:xdist -m "not timing" "${browser_files[@]}" \
        > "$browser_log" 2>&1 &
    browser_job=$!
    ignored=(); for file in "${browser_files[@]}"; do ignored+=(--ignore="$file"); done
    .venv/bin/python -m pytest -n "$workers" --dist loadfile $order -m "not timing" "${ignored[@]}"
    first=$?
    wait "$browser_job"
    browser=$?
    echo "=== the browser files, run beside the workers ==="
    cat "$browser_log"
    rm -f "$browser_log"
    if [ "$first" = 0 ] || [ "$first" = 5 ]; then first=$browser; fi
    # The tests that assert a latency goal (marker "timing") run after the rest, alone: a goal such as "a follower
    # applies a broadcast within 2 s" is the app's on its machine, not the app's beside another busy test worker.
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
