#!/usr/bin/env bash
# Set everything up, then start the explorer on the embedded SmolLM2-135M-Instruct, on this machine only
# (http://localhost:8501). Other Streamlit options pass through; --server.address 0.0.0.0 serves the network.
# In class mode (LLM_EXPLORER_TEACHER_KEY set) the address is asked for: --server.address 0.0.0.0 for the class's
# network, --server.address 127.0.0.1 for this machine only.
set -euo pipefail
cd "$(dirname "$0")/.."
address=${STREAMLIT_SERVER_ADDRESS:-}
for ((i = 1; i <= $#; i++)); do
  case "${!i}" in
    --server.address=*) address=${!i#--server.address=} ;;
    --server.address) j=$((i + 1)); address=${!j:-} ;;
  esac
done
if [ -n "${LLM_EXPLORER_TEACHER_KEY:-}" ]; then
  if [ -z "$address" ]; then
    echo "run-app.sh: class mode: say where students reach this server: --server.address 0.0.0.0 (every network" \
      "of this machine), an address of this machine, or 127.0.0.1 (this machine only)" >&2
    exit 2
  fi
  if [[ ! "$address" =~ ^(127\.|localhost$|::1$) ]]; then
    echo "warning: class mode is plain HTTP on $address: anyone on that network can read the teacher key as the" \
      "teacher sends it, and the teacher's cookie. Use a network you trust, or TLS in front (docs/school.md)." >&2
  fi
fi
bash scripts/setup.sh
[ -n "$address" ] || set -- --server.address 127.0.0.1 "$@"  # one user's laptop does not serve the network
export STREAMLIT_CLIENT_SHOW_ERROR_DETAILS=${STREAMLIT_CLIENT_SHOW_ERROR_DETAILS:-none}  # .streamlit/config.toml: why
exec .venv/bin/python -m streamlit run app.py "$@"
