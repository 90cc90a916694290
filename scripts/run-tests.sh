#!/usr/bin/env bash
# Set everything up (dev extras and chromium included), then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
set +e
.venv/bin/python -m pytest "$@"
status=$?
set -e
[ "$status" = 5 ] && { echo "no tests were collected" >&2; exit 1; }
exit "$status"
