#!/usr/bin/env bash
# Session 30, device call 5 (~6 min): the indexer's final state against DeepGEMM's acceptance test, then a same-call
# re-measure of the FP8 M-grouped contiguous rows (psum and expert ids; last measured in sessions 27 / 23).
#   1. DeepGEMM's test_attention.py against ours (SHIM=0): the register page scales and the vector clean pass are
#      new defaults since call 1 ran it;
#   2. the prefill GPU tests of tests/test_attention_triton.py (the clean pass's vector stores; the paged GPU tests
#      ran in call 3, and DeepGEMM's paged test covers the lane count now from _triton/launch.programs_per_sm);
#   3. DeepGEMM's test_m_grouped_gemm_contiguous rows (every 2nd), ours then DeepGEMM, one timer.
set -uo pipefail
source research/scripts/device_call.sh "$0" 450
timeout 190 env SHIM=0 python3 .dg/tools/run_dg_tests.py .dg/DeepGEMM/tests test_attention \
  > $L/dg_test_attention_ours.log 2>&1
t "DeepGEMM test_attention against ours exit $?"
grep -E "PASS|FAIL|Error" $L/dg_test_attention_ours.log | head -20 >> $L/summary.txt
timeout 80 python3 -m pytest tests/test_attention_triton.py -m gpu -k "not paged" -q -p no:cacheprovider -rf \
  > $L/pytest_attention.log 2>&1
t "pytest attention gpu exit $?: $(tail -n1 $L/pytest_attention.log)"
grep -E "^(FAILED|ERROR)" $L/pytest_attention.log | head >> $L/summary.txt
OUT=$L MOE_PARTS=dg MOE_DG_FUNCS="test_fp8_fp4:test_m_grouped_gemm_contiguous" MOE_DG_LIMIT=70 \
  timeout 150 bash scripts/gpu/moe.sh > $L/moe.txt 2>&1; t "moe contiguous exit $?"; cat $L/moe.txt >> $L/summary.txt
