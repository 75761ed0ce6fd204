#!/usr/bin/env bash
# BF16 GEMM family on the GPU (issue 15, items 2 and 5). Expected wall time: ~5-6 min warm (Triton and DeepGEMM JIT
# caches carried), up to ~12 min cold (about 30 Triton configs compile on first use; every step is bounded by its
# own limit). Run it with FAMILY_TIMEOUT=720 (all.sh's default 240 s would cut the later steps). A failing step never
# stops the next; BF16_PARTS="pytest dgtest bench host" picks steps ("sweep" adds forced-config tuning rows, ~3 min).
# Writes $OUT/bf16/: pytest.log; dg_ours.log / dg_dg.log (DeepGEMM's tests/test_bf16.py against this package with
# SHIM=0, and against DeepGEMM, one timer) and dg_compare.txt; bench_{ours,ours_ws,dg}/ (ours_ws: DG_BF16_WS=1, the
# opt-in Gluon kernel) with bench_compare{,_ws}.md; host_{ours,dg}/; summary.txt (each step's exit status and time).
set -uo pipefail
D=$OUT/bf16; mkdir -p "$D"
PARTS=${BF16_PARTS:-pytest dgtest bench host}
FAMILY=bf16
source scripts/gpu/steps.sh

if has pytest; then
  step pytest 200 env PYTHONPATH=$PWD python3 -m pytest tests/test_bf16_gemm_gpu.py tests/test_bf16_gemm_triton.py \
    -q -p no:cacheprovider -rf > "$D/pytest.log" 2>&1
  tail -n 15 "$D/pytest.log"
fi
if has dgtest && [ -d .dg/DeepGEMM ]; then
  FNS="test_bf16:test_gemm test_bf16:test_m_grouped_gemm_contiguous test_bf16:test_m_grouped_gemm_masked test_bf16:test_k_grouped_gemm_contiguous"
  step dg_tests_ours 130 env SHIM=0 PYTHONPATH=$PWD python3 $DGT/run_dg_tests.py .dg/DeepGEMM/tests $FNS > "$D/dg_ours.log" 2>&1
  step dg_tests_dg 130 env $DGENV SHIM=0 python3 $DGT/run_dg_tests.py .dg/DeepGEMM/tests $FNS > "$D/dg_dg.log" 2>&1
  python3 $DGT/compare_perf_lines.py "$D/dg_ours.log" "$D/dg_dg.log" > "$D/dg_compare.txt" 2>&1
  grep -E "PASS|FAIL|Error|assert" "$D/dg_ours.log" | head -20; grep GEOMEAN "$D/dg_compare.txt"
fi
if has bench; then
  step bench_ours 110 env PYTHONPATH=$PWD python3 benchmarks/bench_bf16_gemm.py --out "$D/bench_ours" > "$D/bench_ours.log" 2>&1
  # The opt-in warp-specialised kernel on the rows it covers (dense without C, M-grouped contiguous).
  step bench_ours_ws 90 env DG_BF16_WS=1 PYTHONPATH=$PWD python3 benchmarks/bench_bf16_gemm.py --tables dense,contiguous \
    --ms 128,4096 --out "$D/bench_ours_ws" > "$D/bench_ours_ws.log" 2>&1
  [ -d .dg/DeepGEMM ] && step bench_dg 110 env $DGENV python3 benchmarks/bench_bf16_gemm.py --out "$D/bench_dg" > "$D/bench_dg.log" 2>&1
  python3 benchmarks/compare_providers.py "$D/bench_ours/bench_bf16_gemm.json" "$D/bench_dg/bench_bf16_gemm.json" \
    --out "$D/bench_compare.md" > "$D/bench_compare.log" 2>&1
  python3 benchmarks/compare_providers.py "$D/bench_ours_ws/bench_bf16_gemm.json" "$D/bench_dg/bench_bf16_gemm.json" \
    --out "$D/bench_compare_ws.md" > "$D/bench_compare_ws.log" 2>&1
  tail -n 12 "$D/bench_compare.log"; tail -n 6 "$D/bench_compare_ws.log"; grep -A8 "== summary" "$D/bench_ours.log"
fi
if has host; then
  step host_ours 45 env PYTHONPATH=$PWD python3 benchmarks/host_overhead.py --out "$D/host_ours" > "$D/host_ours.log" 2>&1
  [ -d .dg/DeepGEMM ] && step host_dg 60 env $DGENV python3 benchmarks/host_overhead.py --out "$D/host_dg" > "$D/host_dg.log" 2>&1
  grep -iE "bf16|add_" "$D"/host_*.log
fi
if has sweep; then  # optional: forced tile configs at M = 4096 (tuning data for bf16_plan)
  step sweep 200 env PYTHONPATH=$PWD python3 benchmarks/bench_bf16_gemm.py --tables sweep --reps 10 --out "$D/sweep" > "$D/sweep.log" 2>&1
fi
cat "$D/summary.txt"
