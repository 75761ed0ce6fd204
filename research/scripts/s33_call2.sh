#!/usr/bin/env bash
# Session 33, device call 2 (issue 18), <= 9 min, on the shipped code (call 1's joint split tiles dropped):
#   1. the stagger GPU tests call 1 did not reach (cut at 200 s while compiling; its first 14 passed): masked, 1D1D,
#      K-grouped, after session 32's refactor of the file;
#   2. the same-call yardstick for the closing note: DeepGEMM's own test_fp8_fp4.py MoE functions (contiguous psum and
#      expert ids, masked and masked through psum, K-grouped) against this package (SHIM=0), then against DeepGEMM,
#      one timer (scripts/gpu/moe.sh, every 2nd row).
set -uo pipefail
source research/scripts/device_call.sh "$0" 560
timeout 170 python3 -m pytest tests/test_fp8_stagger_gpu.py -q -p no:cacheprovider -rf \
  -k "masked or 1d1d or k_grouped" > $L/pytest_stagger.log 2>&1
t "pytest stagger (rest) exit $?: $(tail -n1 $L/pytest_stagger.log)"
grep -E "^(FAILED|ERROR)" $L/pytest_stagger.log | head >> $L/summary.txt
OUT=$L MOE_PARTS=dg MOE_DG_LIMIT=45 timeout 300 bash scripts/gpu/moe.sh > $L/moe.txt 2>&1
t "moe same-call exit $?"; cat $L/moe.txt >> $L/summary.txt
