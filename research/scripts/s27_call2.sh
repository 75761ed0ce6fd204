#!/usr/bin/env bash
# Session 27, device call 2:
#   1. compute-sanitizer memcheck + synccheck on the corrected K-grouped layout case (call 1 had a bad MN);
#   2. the prefill store_direct lever (research/scripts/s27_prefill_store.sh: sweep rows + its GPU bit test);
#   3. the FP8 psum / masked-through-psum warp-uniform lever (research/probes/ws_uniform_ab.py: plan vs
#      uniform_tiles variants vs the expert-id layout of the same problems, one process);
#   4. the HC sweep's short rows (16/32-row blocks at M = 137);
#   5. Nsight Compute on the HC 8192 x 28672 unsplit row, ours and DeepGEMM's kernel.
# Results under $OUT (one logs.tgz).
set -uo pipefail
source research/scripts/device_call.sh "$0" 575  # (the batch under one limit, logs packed)
OUT=$L SANITIZE_TIMEOUT=60 SANITIZE_TOOLS="memcheck synccheck" SANITIZE_ONLY="layout/k_grouped" \
  bash scripts/gpu/sanitize.sh > $L/sanitize.txt 2>&1; t "sanitize exit $?"; cat $L/sanitize.txt >> $L/summary.txt
(OUT=$L bash research/scripts/s27_prefill_store.sh > $L/prefill_store.txt 2>&1); t "prefill store exit $?"
cat $L/prefill_store.txt >> $L/summary.txt
timeout 250 python3 research/probes/ws_uniform_ab.py > $L/ws_uniform_ab.log 2>&1; t "uniform A/B exit $?"
grep -E "geomean|WRONG|DIFF|Error" $L/ws_uniform_ab.log | tail -n 20 >> $L/summary.txt
timeout 55 python3 research/sweeps/hc_prenorm_sweep.py --short-only --out $L/hc_sweep > $L/hc_sweep.log 2>&1
t "hc sweep exit $?"; grep "^best" $L/hc_sweep.log >> $L/summary.txt
NCU="ncu --clock-control none -k regex:hc_prenorm --launch-skip 2 --launch-count 1 --section SpeedOfLight \
  --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats"
timeout 40 $NCU python3 research/probes/ncu_hc.py > $L/ncu_hc_ours.txt 2>&1; t "ncu hc ours exit $?"
timeout 40 env $DGENV $NCU python3 research/probes/ncu_hc.py > $L/ncu_hc_dg.txt 2>&1; t "ncu hc dg exit $?"
