#!/usr/bin/env bash
# Session 31, device call 3 (issue 18), ~6 min: the stagger on the 1D1D two-wave mainloop (weight gradient,
# K-grouped), which calls 1-2 did not cover (psum keeps level 1; the 1D1D default stays off):
#   1. GPU tests: 1D1D dense (C = D) and K-grouped tn with empty groups, every level bit-identical to level 0;
#   2. compute-sanitizer memcheck + synccheck over the K-grouped stagger case;
#   3. research/probes/ws_stagger_ab.py: plan / levels 0, 1, 2 on DeepGEMM's wgrad rows and the K-grouped tn rows;
#   4. the same-call yardstick for K-grouped: DeepGEMM's test_k_grouped_gemm_contiguous rows, ours then DeepGEMM.
set -uo pipefail
source research/scripts/device_call.sh "$0" 520
timeout 200 python3 -m pytest tests/test_fp8_stagger_gpu.py -q -p no:cacheprovider -rf -k "1d1d or k_grouped" \
  > $L/pytest_stagger_1d1d.log 2>&1; rc=$?
t "pytest stagger 1d1d exit $rc: $(tail -n1 $L/pytest_stagger_1d1d.log)"; grep -E "^(FAILED|ERROR)" $L/pytest_stagger_1d1d.log | head >> $L/summary.txt
[ $rc -le 1 ] || exit 1  # (a hang or a crash: skip the rest)
OUT=$L SANITIZE_ONLY="fp8/k_grouped_tn_ws_stagger" SANITIZE_TOOLS="memcheck synccheck" SANITIZE_TIMEOUT=80 \
  timeout 180 bash scripts/gpu/sanitize.sh > $L/sanitize.txt 2>&1
t "sanitize exit $?"; grep -iE "error|hazard|correct|cases" $L/sanitize.txt | tail -n 8 >> $L/summary.txt
timeout 200 python3 research/probes/ws_stagger_ab.py --rows wgrad,k_grouped --levels st0,st1,st2 --rounds 3 \
  > $L/stagger_ab.log 2>&1; t "stagger A/B exit $?"; grep -vE "Warning|warn_once" $L/stagger_ab.log >> $L/summary.txt
OUT=$L MOE_PARTS=dg MOE_DG_FUNCS="test_fp8_fp4:test_k_grouped_gemm_contiguous" MOE_DG_LIMIT=60 \
  timeout 140 bash scripts/gpu/moe.sh > $L/moe.txt 2>&1; t "moe k-grouped exit $?"; cat $L/moe.txt >> $L/summary.txt
