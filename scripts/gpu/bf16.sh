#!/usr/bin/env bash
# BF16 GEMM family on the GPU. Expected wall time, warm (Triton cache carried): ours ~4 min (pytest ~2,
# bench ~0.7, sweep ~1.5) + DeepGEMM's bench (its JIT: up to 200 s) = ~6-7 min; every step is bounded by its own
# limit (sum 650 s), so run it with FAMILY_TIMEOUT=700 (all.sh's default 240 s would cut the later steps). Cold,
# about 40 Triton configs compile on first use (~2 min more, mostly in the sweep, which keeps every row it measured).
# A failing step never stops the next. BF16_PARTS picks steps (default "pytest bench sweep"; also "ws": the bench
# with DG_BF16_WS=1, the WS kernel wherever it covers; "dgtest": DeepGEMM's tests/test_bf16.py against us and
# DeepGEMM; "host": host time per call).
# Writes $OUT/bf16/: pytest.log; bench_{ours,dg}/ and bench_compare.md (DeepGEMM time / ours, one timer); sweep/
# (forced plan choices per dense row: plan, plan-tl, WS tiles, whole / last-wave-split / split tiles, rings) with
# sweep.log; optional bench_ours_ws/, dg_{ours,dg}.log, host_*; summary.txt (each step's exit status and time).
# BF16_K: a pytest -k expression for the pytest step (a short re-run); BF16_DG_JSON: an earlier call's DeepGEMM
# bench JSON to compare against when this call does not run DeepGEMM (BF16_DG=0).
set -uo pipefail
D=$OUT/bf16; mkdir -p "$D"
PARTS=${BF16_PARTS:-pytest bench sweep}
FAMILY=bf16
source scripts/gpu/steps.sh

if has pytest; then
  step pytest 180 env PYTHONPATH=$PWD python3 -m pytest tests/test_bf16_gemm_gpu.py tests/test_bf16_gemm_cpu.py \
    -q -p no:cacheprovider -rf ${BF16_K:+-k "$BF16_K"} > "$D/pytest.log" 2>&1
  tail -n 15 "$D/pytest.log"
fi
if has bench; then
  step bench_ours 90 env PYTHONPATH=$PWD python3 benchmarks/bench_bf16_gemm.py --out "$D/bench_ours" > "$D/bench_ours.log" 2>&1
  # BF16_DG=0: ours only (pair with an earlier call's DeepGEMM side, and say so)
  [ -d .dg/DeepGEMM ] && [ "${BF16_DG:-1}" = 1 ] && step bench_dg 200 env $DGENV python3 benchmarks/bench_bf16_gemm.py --out "$D/bench_dg" > "$D/bench_dg.log" 2>&1
  DGJSON=$D/bench_dg/bench_bf16_gemm.json
  [ -f "$DGJSON" ] || DGJSON=${BF16_DG_JSON:-$DGJSON}
  python3 benchmarks/compare_providers.py "$D/bench_ours/bench_bf16_gemm.json" "$DGJSON" \
    --out "$D/bench_compare.md" > "$D/bench_compare.log" 2>&1
  tail -n 12 "$D/bench_compare.log"; grep -A8 "== summary" "$D/bench_ours.log"
  grep -E "m=4096, n=2112, k=7168" "$D/bench_compare.md"
fi
if has sweep; then  # forced plan choices on the dense rows, worst rows first (tuning data for gemm/bf16/plan.py)
  step sweep 180 env PYTHONPATH=$PWD python3 benchmarks/bench_bf16_gemm.py --tables sweep --reps 10 \
    --out "$D/sweep" > "$D/sweep.log" 2>&1
  grep -E "^ > sweep" "$D/sweep.log" | head -200
fi
if has ws; then  # the WS kernel wherever it covers (A/B against the plan's own choice)
  step bench_ours_ws 90 env DG_BF16_WS=1 PYTHONPATH=$PWD python3 benchmarks/bench_bf16_gemm.py --tables dense,contiguous \
    --ms 128,4096 --out "$D/bench_ours_ws" > "$D/bench_ours_ws.log" 2>&1
  python3 benchmarks/compare_providers.py "$D/bench_ours_ws/bench_bf16_gemm.json" "$D/bench_dg/bench_bf16_gemm.json" \
    --out "$D/bench_compare_ws.md" > "$D/bench_compare_ws.log" 2>&1
  tail -n 6 "$D/bench_compare_ws.log"
fi
if has dgtest && [ -d .dg/DeepGEMM ]; then
  FNS="test_bf16:test_gemm test_bf16:test_m_grouped_gemm_contiguous test_bf16:test_m_grouped_gemm_masked test_bf16:test_k_grouped_gemm_contiguous"
  step dg_tests_ours 130 env SHIM=0 PYTHONPATH=$PWD python3 $DGT/run_dg_tests.py .dg/DeepGEMM/tests $FNS > "$D/dg_ours.log" 2>&1
  step dg_tests_dg 130 env $DGENV SHIM=0 python3 $DGT/run_dg_tests.py .dg/DeepGEMM/tests $FNS > "$D/dg_dg.log" 2>&1
  python3 $DGT/compare_perf_lines.py "$D/dg_ours.log" "$D/dg_dg.log" > "$D/dg_compare.txt" 2>&1
  grep -E "PASS|FAIL|Error|assert" "$D/dg_ours.log" | head -20; grep GEOMEAN "$D/dg_compare.txt"
fi
if has host; then
  step host_ours 45 env PYTHONPATH=$PWD python3 benchmarks/host_overhead.py --out "$D/host_ours" > "$D/host_ours.log" 2>&1
  [ -d .dg/DeepGEMM ] && step host_dg 60 env $DGENV python3 benchmarks/host_overhead.py --out "$D/host_dg" > "$D/host_dg.log" 2>&1
  grep -iE "bf16|add_" "$D"/host_*.log
fi
cat "$D/summary.txt"
