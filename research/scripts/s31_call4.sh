#!/usr/bin/env bash
# Session 31, device call 4 (issue 18), <= 9 min: validation of the psum default (stagger level 1 since call 2) and
# the level-3 probe (the two warpgroups meet before each tile's K loop, then issue together):
#   1. the psum GPU tests on the new default (tests/test_fp8_gemm_gpu.py contiguous and psum tiles, the walk tests;
#      the forced-variant tests force their own plans);
#   2. level 3 bit-identical to level 0 (psum and expert ids, empty groups); sanitizer memcheck + synccheck on its case;
#   3. research/probes/ws_stagger_ab.py: plan / levels 0, 1, 3 on the psum and dense rows;
#   4. DeepGEMM's test_m_grouped_gemm_masked (masked, and masked through the psum layout: level 1 by default now),
#      ours then DeepGEMM, one timer.
set -uo pipefail
source research/scripts/device_call.sh "$0" 540
timeout 200 python3 -m pytest tests/test_fp8_gemm_gpu.py tests/test_fp8_moe_walk_gpu.py -q -p no:cacheprovider -rf \
  -k "(psum or m_grouped_contiguous) and not variants" > $L/pytest_grouped.log 2>&1
t "pytest grouped exit $?: $(tail -n1 $L/pytest_grouped.log)"; grep -E "^(FAILED|ERROR)" $L/pytest_grouped.log | head >> $L/summary.txt
timeout 100 python3 -m pytest tests/test_fp8_stagger_gpu.py -q -p no:cacheprovider -rf -k "m_grouped and 4096" \
  > $L/pytest_stagger3.log 2>&1; rc=$?
t "pytest stagger (levels 0-3, grouped) exit $rc: $(tail -n1 $L/pytest_stagger3.log)"
[ $rc -le 1 ] || exit 1
OUT=$L SANITIZE_ONLY="fp8/m_grouped_ids_ws_stagger_meet" SANITIZE_TOOLS="memcheck synccheck" SANITIZE_TIMEOUT=60 \
  timeout 130 bash scripts/gpu/sanitize.sh > $L/sanitize.txt 2>&1
t "sanitize exit $?"; grep -iE "error|hazard|correct|cases" $L/sanitize.txt | tail -n 8 >> $L/summary.txt
timeout 130 python3 research/probes/ws_stagger_ab.py --rows dense,psum --levels st0,st1,st3 --rounds 3 \
  > $L/stagger_ab.log 2>&1; t "stagger A/B exit $?"; grep -vE "Warning|warn_once" $L/stagger_ab.log >> $L/summary.txt
OUT=$L MOE_PARTS=dg MOE_DG_FUNCS="test_fp8_fp4:test_m_grouped_gemm_masked" MOE_DG_LIMIT=60 \
  timeout 140 bash scripts/gpu/moe.sh > $L/moe.txt 2>&1; t "moe masked exit $?"; cat $L/moe.txt >> $L/summary.txt
