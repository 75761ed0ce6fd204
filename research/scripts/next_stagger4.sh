#!/usr/bin/env bash
# Prepared in session 31 for the next device call (issue 18), ~8 min: stagger level 4 (level 2 plus warpgroup 0 at
# most one K block ahead of warpgroup 1; fp8_gemm_ws._stagger_wait) and the phase probe with the ready-wait sums.
# Call 6 found warpgroup 1 trailing by one to two K blocks; a trailing warpgroup holds stages the producer cannot
# refill, so the leading one may wait for data although the ring is full (session 12: consumers wait for data ~10 %
# of their K loops while the producer waits for a free stage ~90 % of its loop). Predicted if that is the cost: level
# 4 faster on dense, ids and psum rows by up to the ~10 % ready-wait share; the probe's leading warpgroup waiting
# longer than the trailing one at level 0, and both short at level 4.
#   1. GPU tests: level 4 bit-identical to level 0 (grouped and one dense shape); sanitizer on its case;
#   2. research/probes/ws_phase_probe.py at levels 0, 1 and 4 (skipped when step 1 fails or hangs);
#   3. research/probes/ws_stagger_ab.py: plan / levels 0, 1, 4 on dense, psum, wgrad and K-grouped rows.
set -uo pipefail
source research/scripts/device_call.sh "$0" 590
timeout 240 python3 -m pytest tests/test_fp8_stagger_gpu.py -q -p no:cacheprovider -rf \
  -k "m_grouped or (dense and 4096-2112)" > $L/pytest_stagger4.log 2>&1; rc=$?
t "pytest stagger (levels 0-4) exit $rc: $(tail -n1 $L/pytest_stagger4.log)"
[ $rc -le 1 ] || exit 1  # (a hang or a crash: skip the rest)
timeout 260 python3 research/probes/ws_stagger_ab.py --rows dense,psum,wgrad,k_grouped --levels st0,st1,st4 \
  --rounds 3 > $L/stagger_ab.log 2>&1; t "stagger A/B exit $?"; grep -vE "Warning|warn_once" $L/stagger_ab.log >> $L/summary.txt
OUT=$L SANITIZE_ONLY="fp8/m_grouped_psum_ws_stagger_bounded" SANITIZE_TOOLS="memcheck synccheck" \
  SANITIZE_TIMEOUT=60 timeout 130 bash scripts/gpu/sanitize.sh > $L/sanitize.txt 2>&1
t "sanitize exit $?"; grep -iE "error|correct|cases" $L/sanitize.txt | tail -n 6 >> $L/summary.txt
timeout 150 python3 research/probes/ws_phase_probe.py --levels 0,1,4 > $L/phase.log 2>&1; t "phase probe exit $?"
grep -vE "Warning|warn_once" $L/phase.log >> $L/summary.txt
