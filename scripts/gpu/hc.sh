#!/usr/bin/env bash
# HyperConnection prenorm GEMM + scale-layout ops on the GPU. Expected wall time: ~4-5 min warm (Triton and DeepGEMM
# JIT caches in .cache, e.g. after dg_baseline.sh), ~8 min cold (~20 Triton configs compile once; DeepGEMM JIT-compiles
# its shapes): run it with FAMILY_TIMEOUT=600. Every step has its own limit (sum 13.5 min) and the last step (the
# config sweep) is the one a short family limit cuts.
#   1. our GPU tests (tests/test_hyperconnection_gpu.py, tests/test_layout_gpu.py)
#   2. DeepGEMM's test_hyperconnection.py and test_layout.py against ours (SHIM=0) and against DeepGEMM
#   3. benchmarks/bench_hc_prenorm.py for both packages + the comparison table
#   4. scripts/compile_check_hc.py is CPU-side (not run here)
# Writes $OUT/hc/. No `set -e`: every step runs and reports.
set -uo pipefail
D=$OUT/hc; mkdir -p "$D"
DGENV="PYTHONPATH=$PWD/.dg/DeepGEMM LD_PRELOAD=/lib/x86_64-linux-gnu/libstdc++.so.6"
step() { echo "=== $1: exit $2 ($(( $(date +%s) - T0 )) s)" | tee -a "$D/summary.txt"; }

T0=$(date +%s)
timeout 240 env PYTHONPATH=$PWD python3 -m pytest tests/test_hyperconnection_gpu.py tests/test_layout_gpu.py -q \
  -p no:cacheprovider -rf > "$D/pytest_gpu.log" 2>&1
step "pytest gpu (hc + layout)" $?
tail -n 15 "$D/pytest_gpu.log"

T0=$(date +%s)
timeout 120 env SHIM=0 PYTHONPATH=$PWD python3 .dg/tools/run_dg_tests.py .dg/DeepGEMM/tests \
  test_hyperconnection test_layout:test_sf_layout_kernels test_layout:test_k_grouped_sf_layout_kernels \
  > "$D/dg_tests_ours.log" 2>&1
step "DeepGEMM tests vs ours (SHIM=0)" $?
grep -E "^### (PASS|FAIL)|RESULTS" "$D/dg_tests_ours.log"

T0=$(date +%s)
[ -d .dg/DeepGEMM ] && timeout 150 env $DGENV SHIM=0 python3 .dg/tools/run_dg_tests.py .dg/DeepGEMM/tests \
  test_hyperconnection test_layout:test_sf_layout_kernels test_layout:test_k_grouped_sf_layout_kernels \
  > "$D/dg_tests_dg.log" 2>&1
step "DeepGEMM tests vs DeepGEMM" $?
grep -E "^### (PASS|FAIL)" "$D/dg_tests_dg.log"
python3 .dg/tools/compare_perf_lines.py "$D/dg_tests_ours.log" "$D/dg_tests_dg.log" > "$D/dg_tests_compare.txt" 2>&1
tail -n 12 "$D/dg_tests_compare.txt"

T0=$(date +%s)
timeout 90 env PYTHONPATH=$PWD python3 benchmarks/bench_hc_prenorm.py --out "$D/ours" > "$D/bench_ours.log" 2>&1
step "bench ours" $?
[ -d .dg/DeepGEMM ] && timeout 120 env $DGENV python3 benchmarks/bench_hc_prenorm.py --out "$D/dg" > "$D/bench_dg.log" 2>&1
step "bench DeepGEMM" $?
python3 benchmarks/compare_providers.py "$D/ours/bench_hc_prenorm.json" "$D/dg/bench_hc_prenorm.json" \
  --out "$D/compare.md" > "$D/compare.txt" 2>&1
tail -n 12 "$D/compare.txt"; grep -h "host" "$D/bench_ours.log" "$D/bench_dg.log"

# Config sweep (ours only: heuristic vs neighbours) for the next tuning round; last, so it cannot starve the rest.
T0=$(date +%s)
timeout 120 env PYTHONPATH=$PWD python3 benchmarks/sweeps/hc_prenorm_sweep.py --out "$D" > "$D/sweep.log" 2>&1
step "config sweep" $?
