#!/usr/bin/env bash
# Session 29, device call 2: the BF16 WS 128 x (256 + 8) tile (4096 x 2112 in 1.94 waves instead of 2.67), the
# plan's new default there: its GPU tests (forced, odd shapes, nt/tn), compute-sanitizer over the new tail cases, and
# the A/B against the 128 x (128 + 64) tile with DeepGEMM's times from the same call.
set -uo pipefail
source research/scripts/device_call.sh "$0" 300
timeout 90 python3 -m pytest -q -p no:cacheprovider -rf tests/test_bf16_gemm_gpu.py \
  -k "tail_columns or last_wave_split or default" > $L/pytest_tail.log 2>&1
t "pytest tail exit $?: $(tail -n1 $L/pytest_tail.log)"; grep -E "^(FAILED|ERROR)" $L/pytest_tail.log | head >> $L/summary.txt
timeout 40 python3 research/probes/bf16_tail_ab.py > $L/tail_ab_ours.log 2>&1; t "tail A/B ours exit $?"
timeout 80 env $DGENV python3 research/probes/bf16_tail_ab.py > $L/tail_ab_dg.log 2>&1; t "tail A/B dg exit $?"
cat $L/tail_ab_ours.log $L/tail_ab_dg.log | grep -v Warn >> $L/summary.txt
OUT=$L SANITIZE_TIMEOUT=60 SANITIZE_TOOLS="memcheck synccheck" SANITIZE_ONLY="bf16/dense_nt_ws_tail bf16/dense_tn_ws_tail" \
  bash scripts/gpu/sanitize.sh > $L/sanitize.txt 2>&1; t "sanitize exit $?"; cat $L/sanitize.txt >> $L/summary.txt
