#!/usr/bin/env bash
# Session 28, device call 1: measurements that steer the session.
#   1. the FP8 K-grouped warp-uniform lever (research/pending: plan vs uni on benchmarks/shapes.K_GROUPED);
#   2. bench_bf16_gemm k_grouped / contiguous / masked tables, ours then DeepGEMM (cold JIT: k_grouped first, never
#      measured against DeepGEMM before), one timer;
set -uo pipefail
source research/scripts/device_call.sh "$0" 500
timeout 170 python3 research/probes/ws_uniform_ab.py --rows k_grouped --reps 10 > $L/kg_uniform_ab.log 2>&1
t "fp8 k-grouped uniform A/B exit $?"; grep -E "geomean|DIFF|WRONG" $L/kg_uniform_ab.log | tail -n 6 >> $L/summary.txt
timeout 60 python3 benchmarks/bench_bf16_gemm.py --tables k_grouped,contiguous,masked --out $L/bf16_ours > $L/bf16_ours.log 2>&1
t "bf16 ours exit $?"
timeout 200 env $DGENV python3 benchmarks/bench_bf16_gemm.py --tables k_grouped,contiguous,masked --out $L/bf16_dg > $L/bf16_dg.log 2>&1
t "bf16 dg exit $?"
grep -E "geomean|k_grouped " $L/bf16_ours.log $L/bf16_dg.log >> $L/summary.txt
