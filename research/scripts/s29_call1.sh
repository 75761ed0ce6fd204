#!/usr/bin/env bash
# Session 29, device call 1: the BF16 masked 64-row WS tile (SPLIT_N, opt-in since session 28): its A/B on
# the G=32 x 192 rows, its GPU tests, and compute-sanitizer over its case.
set -uo pipefail
source research/scripts/device_call.sh "$0" 330
timeout 80 python3 research/probes/bf16_masked_ab.py --rows 192 > $L/bf16_masked_ws64_ab.log 2>&1
t "masked ws64 A/B exit $?"; grep -E "geomean|WRONG|TOUCHED|^  |auto64" $L/bf16_masked_ws64_ab.log | tail -n 12 >> $L/summary.txt
timeout 60 python3 -m pytest tests/test_bf16_masked_ws.py -x -q -p no:cacheprovider -k ws64 > $L/pytest_ws64.log 2>&1
t "pytest ws64 exit $?: $(tail -n1 $L/pytest_ws64.log)"
OUT=$L SANITIZE_TIMEOUT=40 SANITIZE_TOOLS="memcheck synccheck" SANITIZE_ONLY="bf16/masked_ws_forced_64x256" \
  bash scripts/gpu/sanitize.sh > $L/sanitize.txt 2>&1; t "sanitize exit $?"; cat $L/sanitize.txt >> $L/summary.txt
timeout 40 python3 research/probes/einsum_bmk_breakdown.py > $L/einsum_breakdown_ours.log 2>&1; t "breakdown ours exit $?"
env $DGENV timeout 60 python3 research/probes/einsum_bmk_breakdown.py > $L/einsum_breakdown_dg.log 2>&1; t "breakdown dg exit $?"
cat $L/einsum_breakdown_*.log >> $L/summary.txt
NCU="ncu --clock-control none -k regex:paged_mqa_logits --launch-skip 2 --launch-count 1 --section SpeedOfLight \
  --section WarpStateStats --section Occupancy --section MemoryWorkloadAnalysis --section SchedulerStats --section LaunchStats"
timeout 60 $NCU python3 research/probes/ncu_paged.py > $L/ncu_paged_ours.txt 2>&1; t "ncu paged ours exit $?"
env $DGENV timeout 60 $NCU python3 research/probes/ncu_paged.py > $L/ncu_paged_dg.txt 2>&1; t "ncu paged dg exit $?"
