#!/usr/bin/env bash
# mega_mhc on one GPU, in one call: its GPU tests, compute-sanitizer over its kernels, benchmarks/bench_mega_mhc.py.
# Writes $OUT/mhc/.
#   bash scripts/gpu/mhc.sh   (~4 minutes at most)
set -uo pipefail
D=${OUT:?run on the device machine with OUT set}/mhc; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
FAMILY=mhc
source scripts/gpu/steps.sh
gpu_info
gpu_tests "${MHC_TEST_TIMEOUT:-150}" tests/test_mega_mhc_gpu.py tests/test_mega_mhc_kernels_cpu.py
gpu_sanitize mega_mhc/ "${MHC_SAN_TIMEOUT:-55}"
gpu_bench "${MHC_BENCH_TIMEOUT:-90}" 40 python3 benchmarks/bench_mega_mhc.py
