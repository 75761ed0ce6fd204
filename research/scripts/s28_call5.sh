#!/usr/bin/env bash
# Session 28, device call 5: the new BF16 defaults checked and measured.
#   1. compute-sanitizer memcheck + synccheck over the BF16 masked and K-grouped cases (the WS kernel's new MASKED
#      and K_GROUPED groupings, forced and by default);
#   2. the GPU tests of both with the shipped defaults;
#   3. bench_bf16_gemm masked + K-grouped tables, ours (DeepGEMM's side: call 1, same session);
#   4. einsum bmk (DeepGEMM's s = 129 rows) ours then DeepGEMM, one timer.
set -uo pipefail
source research/scripts/device_call.sh "$0" 520
OUT=$L SANITIZE_TIMEOUT=110 SANITIZE_TOOLS="memcheck synccheck" SANITIZE_ONLY="bf16/masked bf16/k_grouped" \
  bash scripts/gpu/sanitize.sh > $L/sanitize.txt 2>&1; t "sanitize exit $?"; cat $L/sanitize.txt >> $L/summary.txt
timeout 150 python3 -m pytest -q -p no:cacheprovider -rf tests/test_bf16_masked_ws.py tests/test_bf16_gemm_gpu.py \
  -k "k_grouped or masked" > $L/pytest_bf16.log 2>&1
t "pytest bf16 masked/k_grouped exit $?: $(tail -n1 $L/pytest_bf16.log)"; grep -E "^(FAILED|ERROR)" $L/pytest_bf16.log | head -20 >> $L/summary.txt
timeout 60 python3 benchmarks/bench_bf16_gemm.py --tables masked,k_grouped --out $L/bf16_ours > $L/bf16_ours.log 2>&1
t "bf16 ours exit $?"; grep -E "geomean" $L/bf16_ours.log >> $L/summary.txt
timeout 40 python3 benchmarks/bench_einsum.py --tables einsum_bmk --out $L/einsum_ours > $L/einsum_ours.log 2>&1
t "einsum bmk ours exit $?"
timeout 80 env $DGENV python3 benchmarks/bench_einsum.py --tables einsum_bmk --out $L/einsum_dg > $L/einsum_dg.log 2>&1
t "einsum bmk dg exit $?"; grep -hE "einsum bmk" $L/einsum_ours.log $L/einsum_dg.log >> $L/summary.txt
