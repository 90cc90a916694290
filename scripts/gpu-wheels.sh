#!/usr/bin/env bash
# Here, once (a registry is reachable): the small pure-Python wheels the GPU check carries to a machine
# without pip or network, into .gpu-wheels/ (ignored by git, carried by the device tool's `carry`).
# gguf reads the real model where its file is found; pytest and its own dependencies run tests/test_gpu.py.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m pip download -q --no-deps --only-binary=:all: -d .gpu-wheels \
  gguf==0.19.0 pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1 pygments==2.21.0 packaging==26.4
for wheel in .gpu-wheels/*.whl; do
  case "$wheel" in *-py3-none-any.whl|*-py2.py3-none-any.whl) ;; *) echo "not pure Python: $wheel" >&2; exit 1 ;; esac
done
du -sh .gpu-wheels
