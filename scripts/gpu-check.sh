#!/usr/bin/env bash
# For a lent GPU machine: the CUDA tests, then the engine benchmark on CUDA. Prepared to run as one short
# command (about 5 minutes: the setup is cached, the model loads in seconds).
#   bash scripts/gpu-check.sh            # results under $OUT when set (the device tool), else bench-results/
set -euo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-bench-results}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total --format=csv | tee "$out/gpu.txt"
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}" bash scripts/setup.sh --dev
.venv/bin/python -c "import torch; assert torch.cuda.is_available(), 'this torch build has no CUDA'; print(torch.__version__, torch.version.cuda)"
.venv/bin/python -m pytest -q -p no:cacheprovider tests/test_gpu.py tests/test_engine_bf16.py tests/test_quant.py \
  2>&1 | tee "$out/gpu-tests.txt"
.venv/bin/python -m inference.bench --device cuda --modes bf16,gguf --repeats 3 --out "$out/engine-cuda.json" \
  2>&1 | tee "$out/gpu-bench.txt"
