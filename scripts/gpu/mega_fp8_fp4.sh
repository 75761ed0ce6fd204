#!/usr/bin/env bash
# The FP8 x FP4 Mega MoE (fp8_fp4_mega_moe at one rank) on one GPU, in one call: its GPU tests, compute-sanitizer
# over the Mega MoE cases (FP8, BF16 and FP8 x FP4), then benchmarks/bench_mega_moe.py --fp8-fp4 (fused kernels vs
# the reference on CUDA). Writes $OUT/mega_fp8_fp4/.
#   MEGA_SHAPES=v3 MEGA_TOKENS=8,64,256,1024 bash scripts/gpu/mega_fp8_fp4.sh   (~7 minutes at most)
set -uo pipefail
D=${OUT:?run on the device machine with OUT set}/mega_fp8_fp4; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
FAMILY=mega_fp8_fp4
source scripts/gpu/steps.sh
gpu_info
gpu_tests "${MEGA_TEST_TIMEOUT:-300}" tests/test_mega_moe_fp8_fp4_gpu.py
gpu_sanitize mega/ "${MEGA_SAN_TIMEOUT:-80}"
gpu_bench "${MEGA_BENCH_TIMEOUT:-110}" 40 python3 benchmarks/bench_mega_moe.py --fp8-fp4 --shapes "${MEGA_SHAPES:-v3}" \
  --tokens "${MEGA_TOKENS:-8,64,256,1024}"
