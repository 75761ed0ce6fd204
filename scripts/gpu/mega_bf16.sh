#!/usr/bin/env bash
# The BF16 Mega MoE (bf16_mega_moe at one rank) on one GPU, in one call: its GPU tests, compute-sanitizer over the
# Mega MoE cases (FP8 and BF16), then benchmarks/bench_mega_moe.py --bf16 (fused vs the unfused BF16 pipeline).
# Writes $OUT/mega_bf16/.
#   MEGA_SHAPES=v3 MEGA_TOKENS=8,64,256,1024,4096 bash scripts/gpu/mega_bf16.sh   (~6 minutes at most)
set -uo pipefail
D=${OUT:?run on the device machine with OUT set}/mega_bf16; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
FAMILY=mega_bf16
source scripts/gpu/steps.sh
gpu_info
gpu_tests "${MEGA_TEST_TIMEOUT:-240}" tests/test_mega_moe_bf16_gpu.py
gpu_sanitize mega/ "${MEGA_SAN_TIMEOUT:-80}"
gpu_bench "${MEGA_BENCH_TIMEOUT:-110}" 40 python3 benchmarks/bench_mega_moe.py --bf16 --shapes "${MEGA_SHAPES:-v3}" \
  --tokens "${MEGA_TOKENS:-8,64,256,1024,4096}"
