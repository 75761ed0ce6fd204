#!/usr/bin/env bash
# Indexer (DeepSeek V3.2 MQA logits) GPU batch, run by scripts/gpu/all.sh (FAMILIES=indexer FAMILY_TIMEOUT=420).
# Expected wall time: ~5 min warm (Triton and DeepGEMM JIT caches carried in .cache/), up to ~10 min cold (all.sh:
# FAMILY_TIMEOUT=660; every step's limit below adds up to 655 s). Steps, each under its own limit:
#   1. our GPU tests (tests/test_attention_gpu.py)                                              <= 150 s
#   2. DeepGEMM's tests/test_attention.py (test_mqa_logits, test_paged_mqa_logits, DG_MQA_NUM_CASES sampled)
#      against deep_gemm with SHIM=0 (its own thresholds; its timer is scripts/dg/run_dg_tests.py's)      <= 2 x 50 s
#      and test_paged_mqa_logits against DeepGEMM itself (the same cases: its pass/fail and time)          <= 55 s
#   3. bench_mqa_logits.py --quick for both packages in this call (compare_providers pairs them)          <= 60 + 45 s
#   3b. the paged kernels side by side in one process (--sweep-paged): the persistent kernel (default,
#       PagedConfig()) against the grid kernel (PAGED_GRID_CONFIG) and stage / lane variants, 3 paged rows      <= 75 s
#   4. host_overhead.py --only mqa (prefill, metadata, paged calls) for both packages                      <= 2 x 15 s
#   5. the file's small odd-shape cases (CPU tensors copied to the GPU: compiled kernels, not the interpreter) <= 60 s
# Knobs: FULL=1 runs the whole benchmark and every DeepGEMM case (give all.sh FAMILY_TIMEOUT=900); DG_SELF=0 skips
# DeepGEMM's test_paged_mqa_logits against DeepGEMM itself (DG_SELF=all: both functions); SWEEP=1 adds the prefill
# tile-config sweep; SWEEP=0 drops the paged one; DG_CASES=N samples N cases per DeepGEMM test function (default 4).
# Every step has its own timeout and none stops the others; failures are listed at the end (summary.txt).
set -uo pipefail
D=$OUT/indexer; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
DGENV="PYTHONPATH=$PWD/.dg/DeepGEMM LD_PRELOAD=/lib/x86_64-linux-gnu/libstdc++.so.6"
HAVE_DG=0; ls .dg/DeepGEMM/deep_gemm/_C*.so > /dev/null 2>&1 && HAVE_DG=1
CASES=${DG_CASES:-4}; [ "${FULL:-0}" = 1 ] && CASES=1000
QUICK="--quick"; [ "${FULL:-0}" = 1 ] && QUICK=""
SWEEP_ARG=""; [ "${SWEEP:-0}" = 1 ] && SWEEP_ARG="--sweep"
# INDEXER_PARTS picks steps (default: all): pytest dgtest bench sweep host small.
PARTS=" ${INDEXER_PARTS:-pytest dgtest bench sweep host small} "
has() { [[ "$PARTS" == *" $1 "* ]]; }
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
has pytest && step pytest_gpu 150 python3 -m pytest tests/test_attention_gpu.py -q -p no:cacheprovider -rfE
tail -n 15 "$D/pytest_gpu.log"

# 2. DeepGEMM's own test file, ours then DeepGEMM (prefill and paged functions; skip-head-mid is an FP8 GEMM).
has dgtest && for fn in test_mqa_logits test_paged_mqa_logits; do
  step "dg_test_ours_$fn" 50 env SHIM=0 DG_MQA_NUM_CASES=$CASES python3 scripts/dg/run_dg_tests.py .dg/DeepGEMM/tests "test_attention:$fn"
  SELF=${DG_SELF:-1}; [ "$fn" = test_mqa_logits ] && [ "$SELF" != all ] && SELF=0
  [ $HAVE_DG = 1 ] && [ "$SELF" != 0 ] && step "dg_test_dg_$fn" 55 env $DGENV SHIM=0 DG_MQA_NUM_CASES=$CASES python3 scripts/dg/run_dg_tests.py .dg/DeepGEMM/tests "test_attention:$fn"
  # Without deep_gemm.utils.math/layout the file fails at import: measure with SHIM=1.
  grep -q "IMPORT FAIL" "$D/dg_test_ours_$fn.log" && step "dg_test_ours_shim_$fn" 55 env SHIM=1 \
    DG_MQA_NUM_CASES=$CASES python3 scripts/dg/run_dg_tests.py .dg/DeepGEMM/tests "test_attention:$fn"
done
grep -h "### \|RESULTS" "$D"/dg_test_*.log

# 3. Benchmark, both packages, same timer; paired by compare_providers.
has bench && step bench_ours 60 python3 benchmarks/bench_mqa_logits.py $QUICK $SWEEP_ARG --out "$D/ours"
has bench && [ $HAVE_DG = 1 ] && step bench_dg 45 env $DGENV python3 benchmarks/bench_mqa_logits.py $QUICK --out "$D/dg"
grep -h " > " "$D/bench_ours.log" "$D/bench_dg.log" 2>/dev/null
[ -f "$D/dg/bench_mqa_logits.json" ] && python3 benchmarks/compare_providers.py "$D/ours/bench_mqa_logits.json" \
  "$D/dg/bench_mqa_logits.json" | tee "$D/compare.md"

# 3b. Persistent vs grid paged kernel (and variants), one process, same timer.
has sweep && [ "${SWEEP:-}" != 0 ] && step bench_sweep_paged 75 python3 benchmarks/bench_mqa_logits.py --tables none --sweep-paged \
  --out "$D/sweep"
grep -h "sweep paged" "$D/bench_sweep_paged.log" 2>/dev/null

# 4. Host time per call.
has host && step host_ours 15 python3 benchmarks/host_overhead.py --only mqa --out "$D/host_ours"
has host && [ $HAVE_DG = 1 ] && step host_dg 15 env $DGENV python3 benchmarks/host_overhead.py --only mqa --out "$D/host_dg"
grep -h "HOST" "$D"/host_*.log

# 5. The small odd-shape cases of the same test file (interpreter cases on CPU) on the GPU's compiled kernels: ragged
#    and inverted windows, misaligned operands (pointer loads), padded pages, 1-D context_lens, FP4, schedule.
has small && step pytest_small_cases_on_gpu 60 python3 -m pytest tests/test_attention_cpu.py -q -p no:cacheprovider -rfE
tail -n 8 "$D/pytest_small_cases_on_gpu.log"

echo "---- summary (non-zero exit = failed or timed out: see the step's log)"
cat "$D/summary.txt"
