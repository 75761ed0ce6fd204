#!/usr/bin/env bash
# Session-7 GPU batch (1D1D on the warp-specialised kernel): the GPU tests that cover the changed kernel paths,
# then the 1D1D table with the tl.* kernel timed in the same process, then (STAGE=full) the whole suite and every
# table. Everything lands in $OUT.
set -o pipefail
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/env.txt"
timeout ${TEST_TIMEOUT:-240} python3 -m pytest ${TESTS:-tests/test_fp8_gemm_gpu.py} -q -p no:cacheprovider --maxfail=10 \
  ${PYTEST_ARGS:-} 2>&1 | tail -25 | tee "$OUT/gpu_tests.log"
timeout ${BENCH_TIMEOUT:-200} python3 benchmarks/bench_fp8_gemm.py --out "$OUT" ${BENCH_ARGS:---tables 1d1d --compare-ws} \
  2>&1 | tee "$OUT/bench.log" | grep -E "M=|geometric|vs_|host|us/call|G=|Error|error"
