#!/usr/bin/env bash
# Next session's first device call (prepared in session 29, ~8 minutes): re-check what session 29 changed against
# DeepGEMM's own acceptance tests (SHIM=0), which it could not re-run for lack of device time, then take the same-call
# figures issue 18 is missing.
#   1. DeepGEMM's test_bf16.py and test_einsum.py against ours (masked split-K, the new bmk reduction kernel);
#   2. DeepGEMM's test_attention.py against ours (the lean paged and prefill loops; all three functions);
#   3. the grid reduction's two-stream test (its assertion was fixed after call 5 without a re-run);
#   4. compute-sanitizer memcheck + synccheck over the kernels session 29 changed after its last sanitizer run: the
#      indexer cases (the prefill lean interior loop, the paged lean loop via paged_1d_context_lens, the opt-in
#      register page scales), the bmk parallel reduction's new kernel (einsum/bmk_bnk_mn_split*, _bf16);
#   5. FP8 K-grouped against DeepGEMM in the same call (last same-call figure: 0.850x, session 23).
set -uo pipefail
source research/scripts/device_call.sh "$0" 590
timeout 150 env SHIM=0 python3 .dg/tools/run_dg_tests.py .dg/DeepGEMM/tests test_bf16 test_einsum \
  > $L/dg_tests_bf16_einsum_ours.log 2>&1
t "DeepGEMM test_bf16 + test_einsum against ours exit $?"
grep -E "PASS|FAIL|Error" $L/dg_tests_bf16_einsum_ours.log | head -20 >> $L/summary.txt
timeout 200 env SHIM=0 python3 .dg/tools/run_dg_tests.py .dg/DeepGEMM/tests test_attention \
  > $L/dg_test_attention_ours.log 2>&1
t "DeepGEMM test_attention against ours exit $?"
grep -E "PASS|FAIL|Error" $L/dg_test_attention_ours.log | head -20 >> $L/summary.txt
timeout 40 python3 -m pytest tests/test_einsum_bmk_grid_gpu.py -q -p no:cacheprovider -rf -k "two_streams" \
  > $L/pytest_two_streams.log 2>&1; t "pytest two streams exit $?: $(tail -n1 $L/pytest_two_streams.log)"
OUT=$L SANITIZE_TIMEOUT=120 SANITIZE_TOOLS="memcheck synccheck" SANITIZE_ONLY="indexer/ einsum/bmk_bnk_mn_split einsum/bmk_bnk_mn_bf16" \
  bash scripts/gpu/sanitize.sh > $L/sanitize.txt 2>&1; t "sanitize exit $?"; cat $L/sanitize.txt >> $L/summary.txt
timeout 60 python3 benchmarks/bench_fp8_gemm.py --tables k_grouped --out $L/fp8_ours > $L/fp8_ours.log 2>&1
t "fp8 k_grouped ours exit $?"
timeout 120 env $DGENV python3 benchmarks/bench_fp8_gemm.py --tables k_grouped --out $L/fp8_dg > $L/fp8_dg.log 2>&1
t "fp8 k_grouped dg exit $?"
python3 benchmarks/compare_providers.py $L/fp8_ours/bench_fp8_gemm.json $L/fp8_dg/bench_fp8_gemm.json \
  --out $L/fp8_compare.md > $L/fp8_compare.txt 2>&1; tail -n 12 $L/fp8_compare.txt >> $L/summary.txt
