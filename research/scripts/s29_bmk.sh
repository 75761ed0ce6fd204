#!/usr/bin/env bash
# Session 29, issue 15: einsum('bmk,bnk->mn') in one deterministic launch (BmkPlan reduce="grid"): its GPU tests,
# the per-kernel breakdown of ours and DeepGEMM's, an in-process A/B of the grid and parallel reductions at the
# planned splits, and compute-sanitizer (memcheck, synccheck) over its odd-shaped cases. ~130 s expected.
#   bash research/scripts/s29_bmk.sh     (device call, carry [".dg"])
set -uo pipefail
source research/scripts/device_call.sh "$0" 180
timeout 65 python3 -m pytest tests/test_einsum_bmk_grid_gpu.py tests/test_einsum_gpu.py -q -p no:cacheprovider \
  -k "grid" > $L/pytest_grid.log 2>&1
t "pytest grid exit $?: $(tail -n1 $L/pytest_grid.log)"; grep -E "^FAILED|^ERROR" $L/pytest_grid.log | head -n 20 >> $L/summary.txt
timeout 20 python3 research/probes/einsum_bmk_breakdown.py > $L/einsum_breakdown_ours.log 2>&1; t "breakdown ours exit $?"
env $DGENV timeout 35 python3 research/probes/einsum_bmk_breakdown.py > $L/einsum_breakdown_dg.log 2>&1; t "breakdown dg exit $?"
grep -hE "^(deep_gemm|DeepGEMM) " $L/einsum_breakdown_dg.log $L/einsum_breakdown_ours.log >> $L/summary.txt
timeout 30 python3 research/probes/einsum_bmk_grid_ab.py --rounds 2 > $L/einsum_grid_ab.log 2>&1; t "grid A/B exit $?"
cat $L/einsum_grid_ab.log >> $L/summary.txt
OUT=$L SANITIZE_TIMEOUT=22 SANITIZE_TOOLS="memcheck synccheck" SANITIZE_ONLY="einsum/bmk_bnk_mn_grid" \
  bash scripts/gpu/sanitize.sh > $L/sanitize.txt 2>&1; t "sanitize exit $?"; cat $L/sanitize.txt >> $L/summary.txt
