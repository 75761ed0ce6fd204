#!/usr/bin/env bash
# The FP4 GEMM kernel on one GPU, in one call: its compile check, its GPU tests (K-grouped, NVFP4, the FP8 GEMMs'
# FP4 forms; opted in with Fp4Overrides(kernels=True)), then benchmarks/bench_fp4_gemm.py. Writes $OUT/fp4/.
#   bash scripts/gpu/fp4.sh      (~9 minutes at most: the first call compiles every variant)
set -uo pipefail
D=${OUT:?run on the device machine with OUT set}/fp4; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
FAMILY=fp4
source scripts/gpu/steps.sh
gpu_info
timeout "${FP4_COMPILE_TIMEOUT:-90}" python3 scripts/compile_check_fp4.py > "$D/compile.txt" 2>&1
echo "compile check: exit $?: $(tail -1 "$D/compile.txt")"
gpu_tests "${FP4_TEST_TIMEOUT:-300}" tests/test_fp4_gemm_gpu.py
gpu_bench "${FP4_BENCH_TIMEOUT:-150}" 60 python3 benchmarks/bench_fp4_gemm.py
