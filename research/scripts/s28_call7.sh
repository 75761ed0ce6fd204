#!/usr/bin/env bash
# Session 28, device call 7: the BF16 masked and K-grouped tables, ours then DeepGEMM in the same call (the final
# defaults), and the thread tests (Triton's first import now under a lock).
set -uo pipefail
source research/scripts/device_call.sh "$0" 330
timeout 60 python3 benchmarks/bench_bf16_gemm.py --tables k_grouped,masked --out $L/bf16_ours > $L/bf16_ours.log 2>&1
t "bf16 ours exit $?"
timeout 170 env $DGENV python3 benchmarks/bench_bf16_gemm.py --tables k_grouped,masked --out $L/bf16_dg > $L/bf16_dg.log 2>&1
t "bf16 dg exit $?"
python3 benchmarks/compare_providers.py $L/bf16_ours/bench_bf16_gemm.json $L/bf16_dg/bench_bf16_gemm.json \
  --out $L/bf16_compare.md > $L/bf16_compare.log 2>&1; tail -n 5 $L/bf16_compare.log >> $L/summary.txt
timeout 80 python3 -m pytest -q -p no:cacheprovider -rf tests/test_bf16_gemm_gpu.py tests/test_einsum_gpu.py \
  tests/test_fp8_gemm_gpu.py -k "thread" > $L/pytest_threads.log 2>&1
t "pytest threads exit $?: $(tail -n1 $L/pytest_threads.log)"
