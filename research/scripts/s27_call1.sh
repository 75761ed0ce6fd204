#!/usr/bin/env bash
# Session 27, device call 1: what issue 16 still needs and the pending paged lever.
#   1. compute-sanitizer memcheck + synccheck over the layout cases (narrow tiles: 1/3/4/7 columns, odd rows), the
#      prefill cases (one with every key block interior) and the HC cases;
#   2. DeepGEMM's test_hyperconnection and test_layout against ours (SHIM=0);
#   3. bench_hc_prenorm (DeepGEMM's HC rows, decode rows, layout rows, host) for both packages, same call;
#   4. the paged interior patch (research/pending): its GPU tests, then --sweep-paged (interior rows vs defaults).
# Results under $OUT (one logs.tgz).
set -uo pipefail
source research/scripts/device_call.sh "$0" 540  # (the batch under one limit, logs packed)
OUT=$L SANITIZE_TIMEOUT=100 SANITIZE_TOOLS="memcheck synccheck" SANITIZE_ONLY="layout/ indexer/prefill hc/" \
  bash scripts/gpu/sanitize.sh > $L/sanitize.txt 2>&1; t "sanitize exit $?"; cat $L/sanitize.txt | tee -a $L/summary.txt
timeout 100 env SHIM=0 python3 scripts/dg/run_dg_tests.py .dg/DeepGEMM/tests test_hyperconnection \
  test_layout:test_sf_layout_kernels test_layout:test_k_grouped_sf_layout_kernels > $L/dg_tests_ours.log 2>&1
t "DeepGEMM's HC + layout tests on ours exit $?: $(grep -cE '### PASS' $L/dg_tests_ours.log) pass, $(grep -cE '### FAIL' $L/dg_tests_ours.log) fail"
timeout 90 python3 benchmarks/bench_hc_prenorm.py --out $L/hc_ours > $L/hc_ours.log 2>&1; t "hc bench ours exit $?"
timeout 120 env $DGENV python3 benchmarks/bench_hc_prenorm.py --out $L/hc_dg > $L/hc_dg.log 2>&1; t "hc bench dg exit $?"
python3 benchmarks/compare_providers.py $L/hc_ours/bench_hc_prenorm.json $L/hc_dg/bench_hc_prenorm.json \
  --out $L/hc_compare.md > $L/hc_compare.log 2>&1; t "compare exit $?"; tail -n 12 $L/hc_compare.log >> $L/summary.txt
timeout 120 python3 -m pytest tests/test_attention_triton.py -m gpu -k paged -q -p no:cacheprovider -rf \
  > $L/pytest_paged.log 2>&1; t "pytest paged exit $?: $(tail -n1 $L/pytest_paged.log)"
timeout 100 python3 benchmarks/bench_mqa_logits.py --tables none --sweep-paged --reps 8 --out $L/paged_sweep \
  > $L/paged_sweep.log 2>&1; t "paged sweep exit $?"
