#!/usr/bin/env bash
# Session 33, device call 1 (issue 18), ~7 min. Split 128 x 192 tiles with both waves in flight together
# (Fp8Overrides.joint_split, fp8_gemm_ws._mainloop_split_joint: DeepGEMM's one-wave 128 x 192 structure, written as a
# 128- and a 64-wide wgmma issued back to back) against the interleaved split tile (each wave promoted while the
# other runs) and the shipped 128 x 256 two-wave plan. Prediction: if the ~300 lost cycles per K block are per-wave
# issue/wait/promotion gaps the other warpgroup does not cover, one wait per block instead of two makes n192j faster
# than n192 by ~5 % and level with the plan per column; if they come from elsewhere (operand traffic), n192j ~ n192.
# Then the stagger GPU tests after session 32's refactor (not yet run), and the joint sanitizer cases.
set -uo pipefail
source research/scripts/device_call.sh "$0" 540
timeout 200 python3 -m pytest tests/test_fp8_joint_split_gpu.py -q -p no:cacheprovider -rf > $L/pytest_joint.log 2>&1
rc=$?; t "pytest joint exit $rc: $(tail -n1 $L/pytest_joint.log)"
grep -E "^(FAILED|ERROR)" $L/pytest_joint.log | head >> $L/summary.txt
[ $rc -le 1 ] || exit 1
timeout 220 python3 research/probes/ws_stagger_ab.py --rows dense,psum --levels n192,n192j --ids n192,n192j \
  --rounds 5 > $L/joint_ab.log 2>&1
t "joint A/B exit $?"; grep -vE "Warning|warn_once" $L/joint_ab.log >> $L/summary.txt
OUT=$L SANITIZE_ONLY="fp8/dense_ws_split_tile_128x192_joint fp8/m_grouped_psum_ws_walk_split_tile_joint" \
  SANITIZE_TOOLS="memcheck synccheck" SANITIZE_TIMEOUT=60 timeout 100 bash scripts/gpu/sanitize.sh > $L/sanitize.txt 2>&1
t "sanitize exit $?"; grep -iE "error|correct|cases" $L/sanitize.txt | tail -n 6 >> $L/summary.txt
timeout 200 python3 -m pytest tests/test_fp8_stagger_gpu.py -q -p no:cacheprovider -rf > $L/pytest_stagger.log 2>&1
t "pytest stagger exit $?: $(tail -n1 $L/pytest_stagger.log)"
grep -E "^(FAILED|ERROR)" $L/pytest_stagger.log | head >> $L/summary.txt
