#!/usr/bin/env bash
# A ring-buffer Mega MoE layer at one rank on one GPU, in one call: LAYER=bf16 (bf16_mega_moe, the default) or
# LAYER=fp8-fp4 (fp8_fp4_mega_moe). Its GPU tests, compute-sanitizer over the Mega MoE cases (every layer's), then
# benchmarks/bench_mega_moe.py --<LAYER> (BF16: fused vs the unfused BF16 pipeline; FP8 x FP4: fused vs the
# reference on CUDA, the package having no unfused FP8 x FP4 pipeline). Writes $OUT/mega_<layer>/.
#   LAYER=fp8-fp4 MEGA_SHAPES=v3 MEGA_TOKENS=8,64,256,1024 bash scripts/gpu/mega_ring.sh   (~7 minutes at most)
set -uo pipefail
LAYER=${LAYER:-bf16}
case "$LAYER" in bf16|fp8-fp4) ;; *) echo "LAYER: expected bf16 or fp8-fp4, got $LAYER" >&2; exit 2 ;; esac
FAMILY=mega_${LAYER//-/_}
D=${OUT:?run on the device machine with OUT set}/$FAMILY; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
source scripts/gpu/steps.sh
gpu_info
gpu_tests "${MEGA_TEST_TIMEOUT:-300}" "tests/test_mega_moe_${LAYER//-/_}_gpu.py"
gpu_sanitize mega/ "${MEGA_SAN_TIMEOUT:-80}"
gpu_bench "${MEGA_BENCH_TIMEOUT:-110}" 40 python3 benchmarks/bench_mega_moe.py "--$LAYER" --shapes "${MEGA_SHAPES:-v3}" \
  --tokens "${MEGA_TOKENS:-8,64,256,1024}"
