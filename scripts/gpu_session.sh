#!/usr/bin/env bash
# One GPU session: environment, GPU tests, then benchmarks. Results and logs go to $OUT (default ./gpu_out).
# Usage on the device machine: bash scripts/gpu_session.sh [pytest -k expression] [bench --tables list]
set -o pipefail
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/env.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/env.txt"
TESTS=${TESTS:-tests/test_fp8_gemm_gpu.py tests/test_fp8_gemm_triton.py}
timeout ${TEST_TIMEOUT:-300} python3 -m pytest $TESTS -q -x -p no:cacheprovider ${PYTEST_ARGS:-} 2>&1 | tail -40 | tee "$OUT/gpu_tests.log"
timeout ${BENCH_TIMEOUT:-300} python3 benchmarks/bench_fp8_gemm.py --out "$OUT" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log"
