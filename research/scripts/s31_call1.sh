#!/usr/bin/env bash
# Session 31, device call 1 (issue 18), ~6 min: the staggered consumer warpgroups (Fp8Overrides.stagger,
# fp8_gemm_ws._mainloop_two_waves), default off:
#   1. GPU tests: every stagger level computes the same bits as the unstaggered kernel (dense 128 x 256 and 256 x 128,
#      psum and expert ids with empty groups, masked), and matches the reference;
#   2. research/probes/ws_stagger_ab.py: plan / stagger 1 / stagger 2 in interleaved rounds, one process, on
#      DeepGEMM's dense M=4096 rows, its psum rows (and the same problems in the expert-id layout) and three decode
#      rows; bit identity checked per variant.
set -uo pipefail
source research/scripts/device_call.sh "$0" 480
# A barrier bug shows up as a hang: one small case per level first, under a short limit; the rest only if it passes.
timeout 120 python3 -m pytest tests/test_fp8_stagger_gpu.py -q -p no:cacheprovider -x \
  -k "dense and 129-320-128 and variant0" > $L/pytest_stagger_smoke.log 2>&1; rc=$?
t "stagger smoke exit $rc: $(tail -n1 $L/pytest_stagger_smoke.log)"; [ $rc -eq 0 ] || exit 1
timeout 220 python3 -m pytest tests/test_fp8_stagger_gpu.py -q -p no:cacheprovider -rf > $L/pytest_stagger.log 2>&1
t "pytest stagger exit $?: $(tail -n1 $L/pytest_stagger.log)"; grep -E "^(FAILED|ERROR)" $L/pytest_stagger.log | head >> $L/summary.txt
timeout 240 python3 research/probes/ws_stagger_ab.py --rounds 3 > $L/stagger_ab.log 2>&1; t "stagger A/B exit $?"
grep -vE "Warning|warn_once" $L/stagger_ab.log >> $L/summary.txt
