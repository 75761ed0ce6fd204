#!/usr/bin/env bash
# Set up the environment and run the test suite (CPU: Triton kernels run in Triton's interpreter; GPU tests are
# skipped without CUDA). Extra arguments go to pytest. Exits non-zero if any test fails or none ran.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
VENV=${VENV:-.venv}
"$VENV/bin/python" scripts/generate_pyi.py --check
"$VENV/bin/python" -m pytest tests -q -p no:cacheprovider "$@"
