#!/usr/bin/env bash
# Session 31, device call 5 (issue 18), <= 7 min: closing validation of the psum default (stagger level 1):
#   1. the forced warp-specialised variants on psum layouts (tests/test_fp8_gemm_gpu.py, psum=True: two-wave tiles at
#      3 and 4 stages take level 1 by default; split, tail and one-wave tiles do not stagger);
#   2. compute-sanitizer memcheck + synccheck over the FP8 two-wave cases (dense, psum, ids, masked, K-grouped: 20 cases,
#      the five stagger cases included; every FP8 case would not fit this call's budget with cold Triton caches).
set -uo pipefail
source research/scripts/device_call.sh "$0" 390
timeout 170 python3 -m pytest tests/test_fp8_gemm_gpu.py -q -p no:cacheprovider -rf \
  -k "contiguous_warp_specialised_variants and True" > $L/pytest_psum_variants.log 2>&1
t "pytest psum variants exit $?: $(tail -n1 $L/pytest_psum_variants.log)"; grep -E "^(FAILED|ERROR)" $L/pytest_psum_variants.log | head >> $L/summary.txt
OUT=$L SANITIZE_ONLY="fp8/dense_ws_two_wave fp8/m_grouped_psum_ws fp8/masked_ws_two_wave fp8/k_grouped_nt_ws \
  fp8/k_grouped_tn_ws fp8/m_grouped_ids_ws" SANITIZE_TOOLS="memcheck synccheck" SANITIZE_TIMEOUT=130 \
  timeout 200 bash scripts/gpu/sanitize.sh > $L/sanitize.txt 2>&1
t "sanitize fp8 exit $?"; grep -iE "error|hazard|correct|cases|FAIL" $L/sanitize.txt | tail -n 12 >> $L/summary.txt
