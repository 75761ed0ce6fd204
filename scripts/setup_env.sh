#!/usr/bin/env bash
# Create (or reuse) the virtual environment VENV (default .venv) with pinned torch/triton and deep_gemm installed.
# torch goes first and pinned: an unpinned torch pulled in by `pip install -e .` would resolve to a multi-GB CUDA
# build on a CPU machine. On a machine that already has a torch you want, set VENV_SYSTEM=1 to
# create the venv with --system-site-packages.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  if [ "${VENV_SYSTEM:-0}" = 1 ]; then "$PY" -m venv --system-site-packages "$VENV"; else "$PY" -m venv "$VENV"; fi
fi
if ! "$VENV/bin/python" -c "import torch, triton, numpy, pytest" 2>/dev/null; then
  "$VENV/bin/pip" install -q "torch==${TORCH_VERSION:-2.13.0}" "triton==3.6.0" "numpy<2.4" pytest
fi
"$VENV/bin/pip" install -q --no-deps -e .
echo "environment ready: $VENV ($("$VENV/bin/python" -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'))"
