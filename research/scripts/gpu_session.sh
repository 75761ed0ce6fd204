#!/usr/bin/env bash
# One GPU session: environment, GPU tests, then benchmarks. Results and logs go to $OUT (default ./gpu_out).
# Knobs (environment): TESTS (pytest paths), PYTEST_ARGS, BENCH_ARGS, TEST_TIMEOUT, BENCH_TIMEOUT, PROFILE_HOST=1,
# SWEEP=1 (+ SWEEP_ARGS: research/sweeps/sweep_fp8_configs.py, kernel variants side by side), BENCH=0 (skip the benchmark).
set -o pipefail
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/env.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/env.txt"
if [ "${WS_SMOKE:-1}" = 1 ]; then timeout 90 python3 scripts/ws_smoke.py 2>&1 | tail -20 | tee "$OUT/ws_smoke.log" || { echo "ws smoke FAILED: DG_FP8_WS=0 for the rest" | tee -a "$OUT/ws_smoke.log"; export DG_FP8_WS=0; }; fi
TESTS=${TESTS:-tests/test_fp8_gemm_gpu.py tests/test_fp8_gemm_triton.py}
timeout ${TEST_TIMEOUT:-300} python3 -m pytest $TESTS -q -p no:cacheprovider ${PYTEST_ARGS:-} 2>&1 | tail -60 | tee "$OUT/gpu_tests.log"
if [ "${PROFILE_HOST:-0}" = 1 ]; then
  timeout 120 python3 benchmarks/profile_host.py 2>&1 | head -60 | tee "$OUT/profile_host.log"
fi
if [ "${SWEEP:-0}" = 1 ]; then
  timeout ${SWEEP_TIMEOUT:-360} python3 research/sweeps/sweep_fp8_configs.py --out "$OUT/sweep.json" ${SWEEP_ARGS:-} 2>&1 | tee "$OUT/sweep.log"
fi
if [ "${BENCH:-1}" = 1 ]; then
  timeout ${BENCH_TIMEOUT:-300} python3 benchmarks/bench_fp8_gemm.py --out "$OUT" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log"
fi
