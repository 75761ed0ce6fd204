#!/usr/bin/env bash
# Session 31, device call 2 (issue 18), ~6 min. Call 1 measured the stagger levels (psum 1.027x at level 1, every row
# faster; dense and expert ids within noise); the psum layout now defaults to level 1 (fp8_plan.STAGGER):
#   1. compute-sanitizer memcheck + synccheck over the three stagger cases (the extra per-stage mbarriers);
#   2. the confirmation A/B: psum and decode rows, plan (now level 1 for psum) against forced levels 0 and 1,
#      5 interleaved rounds;
#   3. the same-call yardstick: DeepGEMM's test_m_grouped_gemm_contiguous rows (psum and expert ids), ours then
#      DeepGEMM, one timer (scripts/gpu/moe.sh dg part).
set -uo pipefail
source research/scripts/device_call.sh "$0" 500
OUT=$L SANITIZE_ONLY="fp8/dense_ws_two_wave_128x256_stagger fp8/dense_ws_two_wave_256x128_stagger fp8/m_grouped_psum_ws_walk_stagger" \
  SANITIZE_TOOLS="memcheck synccheck" SANITIZE_TIMEOUT=100 timeout 220 bash scripts/gpu/sanitize.sh > $L/sanitize.txt 2>&1
t "sanitize exit $?"; grep -iE "error|hazard|correct|cases" $L/sanitize.txt | tail -n 8 >> $L/summary.txt
timeout 150 python3 research/probes/ws_stagger_ab.py --rows psum,decode --levels st0,st1 --rounds 5 > $L/stagger_ab.log 2>&1
t "stagger A/B exit $?"; grep -vE "Warning|warn_once" $L/stagger_ab.log >> $L/summary.txt
OUT=$L MOE_PARTS=dg MOE_DG_FUNCS="test_fp8_fp4:test_m_grouped_gemm_contiguous" MOE_DG_LIMIT=70 \
  timeout 170 bash scripts/gpu/moe.sh > $L/moe.txt 2>&1; t "moe contiguous exit $?"; cat $L/moe.txt >> $L/summary.txt
