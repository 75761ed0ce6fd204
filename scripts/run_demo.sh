#!/usr/bin/env bash
# Set up the environment and run the self-check: every op family once on the best device (python -m deep_gemm).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
"${VENV:-.venv}/bin/python" -m deep_gemm
