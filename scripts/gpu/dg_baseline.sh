#!/usr/bin/env bash
# DeepGEMM alone on its own SM90 tests (same timer as our comparisons: .dg/tools/run_dg_tests.py), one file at a time
# under a time limit. Two uses: today's DeepGEMM numbers for the kernel work, and a warm DeepGEMM JIT cache
# (DG_JIT_CACHE_DIR, sent back by all.sh) so later same-run comparisons do not spend their minutes in nvcc.
# Expected wall time: ~6 minutes cold (JIT), ~3 warm. DG_TESTS="test_bf16 test_einsum" narrows it.
set -uo pipefail
OUT_DIR=$OUT/dg_baseline
mkdir -p "$OUT_DIR"
export PYTHONPATH=$PWD/.dg/DeepGEMM LD_PRELOAD=/lib/x86_64-linux-gnu/libstdc++.so.6 SHIM=0
for spec in ${DG_TESTS:-test_hyperconnection test_layout test_einsum test_bf16 test_attention test_fp8_fp4:test_m_grouped_gemm_contiguous test_fp8_fp4:test_m_grouped_gemm_masked test_fp8_fp4:test_k_grouped_gemm_contiguous}; do
  start=$(date +%s)
  timeout "${DG_TEST_TIMEOUT:-100}" python3 .dg/tools/run_dg_tests.py .dg/DeepGEMM/tests "$spec" > "$OUT_DIR/${spec/:/.}.log" 2>&1
  echo "$spec: exit $? in $(( $(date +%s) - start )) s" | tee -a "$OUT_DIR/summary.txt"
done
