#!/usr/bin/env bash
# Session 28, device call 4: the masked WS A/B (its probe fixed), the BF16 K-grouped / masked tables with the new
# K-grouped default (DeepGEMM's side: call 1), then DeepGEMM's tests/test_bf16.py and tests/test_einsum.py against
# this package (SHIM=0; issue 15's acceptance item).
set -uo pipefail
source research/scripts/device_call.sh "$0" 560
timeout 130 python3 research/probes/bf16_masked_ab.py --reps 10 > $L/bf16_masked_ab.log 2>&1
t "bf16 masked A/B exit $?"; grep -E "geomean|WRONG|TOUCHED|^  " $L/bf16_masked_ab.log | tail -n 8 >> $L/summary.txt
timeout 60 python3 benchmarks/bench_bf16_gemm.py --tables k_grouped,masked --out $L/bf16_ours > $L/bf16_ours.log 2>&1
t "bf16 ours exit $?"; grep -E "geomean" $L/bf16_ours.log >> $L/summary.txt
timeout 220 env SHIM=0 python3 .dg/tools/run_dg_tests.py .dg/DeepGEMM/tests test_bf16 > $L/dg_test_bf16_ours.log 2>&1
t "DeepGEMM test_bf16 against ours exit $?"; grep -E "PASS|FAIL|Error" $L/dg_test_bf16_ours.log | head -20 >> $L/summary.txt
timeout 120 env SHIM=0 python3 .dg/tools/run_dg_tests.py .dg/DeepGEMM/tests test_einsum > $L/dg_test_einsum_ours.log 2>&1
t "DeepGEMM test_einsum against ours exit $?"; grep -E "PASS|FAIL|Error" $L/dg_test_einsum_ours.log | head -20 >> $L/summary.txt
