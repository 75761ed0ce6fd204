#!/usr/bin/env bash
# Indexer (DeepSeek V3.2 MQA logits) GPU batch, run by scripts/gpu/all.sh (FAMILIES=indexer FAMILY_TIMEOUT=330).
# Expected wall time: ~4 min warm (Triton and DeepGEMM JIT caches carried in .cache/), ~5.5 min cold (all.sh:
# FAMILY_TIMEOUT=360). Steps, each under its own limit:
#   1. our GPU tests (tests/test_attention_triton.py -m gpu)                                              <= 100 s
#   2. DeepGEMM's tests/test_attention.py (test_mqa_logits, test_paged_mqa_logits, DG_MQA_NUM_CASES sampled)
#      against deep_gemm with SHIM=0 (its own thresholds; its timer is scripts/dg/run_dg_tests.py's)      <= 2 x 55 s
#   3. bench_mqa_logits.py --quick for both packages in this call (compare_providers pairs them)          <= 60 + 45 s
#   4. host_overhead.py --only mqa (prefill, metadata, paged calls) for both packages                      <= 2 x 25 s
# Knobs: FULL=1 runs the whole benchmark and every DeepGEMM case (give all.sh FAMILY_TIMEOUT=900); DG_SELF=1 also
# runs DeepGEMM's test file against DeepGEMM; SWEEP=1 adds the tile-config sweep to our benchmark; DG_CASES=N samples
# N cases per DeepGEMM test function (default 4).
# Every step has its own timeout and none stops the others; failures are listed at the end (summary.txt).
set -uo pipefail
D=$OUT/indexer; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
DGENV="PYTHONPATH=$PWD/.dg/DeepGEMM LD_PRELOAD=/lib/x86_64-linux-gnu/libstdc++.so.6"
HAVE_DG=0; ls .dg/DeepGEMM/deep_gemm/_C*.so > /dev/null 2>&1 && HAVE_DG=1
CASES=${DG_CASES:-4}; [ "${FULL:-0}" = 1 ] && CASES=1000
QUICK="--quick"; [ "${FULL:-0}" = 1 ] && QUICK=""
SWEEP_ARG=""; [ "${SWEEP:-0}" = 1 ] && SWEEP_ARG="--sweep"
summary() { echo "$1: exit $2 in $3 s" | tee -a "$D/summary.txt"; }
step() {  # step NAME TIMEOUT COMMAND...
  local name=$1 limit=$2; shift 2
  local start=$(date +%s)
  timeout "$limit" "$@" > "$D/$name.log" 2>&1
  local rc=$?
  summary "$name" "$rc" "$(( $(date +%s) - start ))"
  return 0
}

# 1. Our GPU tests (correctness first: every later number is meaningless if these fail).
step pytest_gpu 100 python3 -m pytest tests/test_attention_triton.py -q -p no:cacheprovider -m gpu -rfE
tail -n 15 "$D/pytest_gpu.log"

# 2. DeepGEMM's own test file, ours then DeepGEMM (prefill and paged functions; skip-head-mid is an FP8 GEMM).
for fn in test_mqa_logits test_paged_mqa_logits; do
  step "dg_test_ours_$fn" 55 env SHIM=0 DG_MQA_NUM_CASES=$CASES python3 scripts/dg/run_dg_tests.py .dg/DeepGEMM/tests "test_attention:$fn"
  [ $HAVE_DG = 1 ] && [ "${DG_SELF:-0}" = 1 ] && step "dg_test_dg_$fn" 55 env $DGENV SHIM=0 DG_MQA_NUM_CASES=$CASES python3 scripts/dg/run_dg_tests.py .dg/DeepGEMM/tests "test_attention:$fn"
  # Without deep_gemm.utils.math/layout (issue 19, the compat work) the file fails at import: measure with SHIM=1.
  grep -q "IMPORT FAIL" "$D/dg_test_ours_$fn.log" && step "dg_test_ours_shim_$fn" 55 env SHIM=1 \
    DG_MQA_NUM_CASES=$CASES python3 scripts/dg/run_dg_tests.py .dg/DeepGEMM/tests "test_attention:$fn"
done
grep -h "### \|RESULTS" "$D"/dg_test_*.log

# 3. Benchmark, both packages, same timer; paired by compare_providers.
step bench_ours 60 python3 benchmarks/bench_mqa_logits.py $QUICK $SWEEP_ARG --out "$D/ours"
[ $HAVE_DG = 1 ] && step bench_dg 45 env $DGENV python3 benchmarks/bench_mqa_logits.py $QUICK --out "$D/dg"
grep -h " > " "$D/bench_ours.log" "$D/bench_dg.log" 2>/dev/null
[ -f "$D/dg/bench_mqa_logits.json" ] && python3 benchmarks/compare_providers.py "$D/ours/bench_mqa_logits.json" \
  "$D/dg/bench_mqa_logits.json" | tee "$D/compare.md"

# 4. Host time per call.
step host_ours 25 python3 benchmarks/host_overhead.py --only mqa --out "$D/host_ours"
[ $HAVE_DG = 1 ] && step host_dg 25 env $DGENV python3 benchmarks/host_overhead.py --only mqa --out "$D/host_dg"
grep -h "HOST" "$D"/host_*.log

echo "---- summary (non-zero exit = failed or timed out: see the step's log)"
cat "$D/summary.txt"
