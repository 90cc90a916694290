#!/usr/bin/env bash
# For a lent GPU machine, as it is: no network, no pip, the machine's own python3 (torch with CUDA, numpy,
# safetensors, tokenizers, transformers). Under 8 minutes; results under $OUT (else bench-results/gpu/).
#   bash scripts/gpu-wheels.sh    # here, beforehand: pure-Python wheels into .gpu-wheels/ (carried, not installed)
#   bash scripts/gpu-check.sh     # there: the CUDA tests (when pytest travelled), then python3 -m inference.bench.gpu
# Its logic is tested on the CPU by tests/test_gpu_check.py (--device cpu --tiny).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-bench-results/gpu}"
py="${PYTHON:-python3}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$out/gpu.txt" 2>&1 || echo "no nvidia-smi" > "$out/gpu.txt"
cat "$out/gpu.txt"
# Carried wheels are zip files: each one whose package the machine lacks is unpacked into a scratch folder
# on the path (nothing is installed; a package the machine has keeps its own version).
site="$(mktemp -d)"
for wheel in .gpu-wheels/*.whl; do
  [ -e "$wheel" ] || continue
  module="$(basename "$wheel" | cut -d- -f1 | tr '[:upper:]' '[:lower:]')"
  "$py" -c "import $module" 2>/dev/null || "$py" -m zipfile -e "$wheel" "$site"
done
export PYTHONPATH="$PWD:$site${PYTHONPATH:+:$PYTHONPATH}"
"$py" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())" \
  | tee "$out/torch.txt"
status=0
if "$py" -c "import pytest" 2>/dev/null; then
  timeout 70 "$py" -m pytest -q -p no:cacheprovider tests/test_gpu.py 2>&1 | tee "$out/gpu-tests.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
else
  echo "pytest did not travel (run scripts/gpu-wheels.sh and carry .gpu-wheels): CUDA tests left out" | tee "$out/gpu-tests.txt"
fi
# shellcheck disable=SC2086  # GPU_CHECK_ARGS: more arguments (the CPU test passes --tiny --compile-backend eager)
timeout 390 "$py" -m inference.bench.gpu --device "${GPU_CHECK_DEVICE:-cuda}" --out "$out" \
  --budget "${GPU_CHECK_BUDGET:-330}" ${GPU_CHECK_ARGS:-} 2>&1 | tee "$out/gpu-check.txt"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
exit "$status"
