#!/usr/bin/env bash
# Set everything up, then start the explorer on the embedded SmolLM2-135M-Instruct.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export STREAMLIT_CLIENT_SHOW_ERROR_DETAILS=${STREAMLIT_CLIENT_SHOW_ERROR_DETAILS:-none}  # .streamlit/config.toml: why
exec .venv/bin/python -m streamlit run app.py "$@"
