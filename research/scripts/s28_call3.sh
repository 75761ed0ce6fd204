#!/usr/bin/env bash
# Session 28, device call 3: BF16 K-grouped on the warp-specialised kernel (helper branch s28-bf16kg): its A/B
# against the tl.* plan (research/probes/bf16_kgrouped_ab.py) and its GPU tests; then DeepGEMM's tests/test_einsum.py
# against this package (SHIM=0, issue 15's acceptance item).
set -uo pipefail
source research/scripts/device_call.sh "$0" 520
timeout 150 python3 research/probes/bf16_kgrouped_ab.py --reps 10 > $L/bf16_kgrouped_ab.log 2>&1
t "bf16 k-grouped A/B exit $?"; grep -E "geomean|WRONG|UNSTABLE|DIFF|  (plan|tl_uni|ws)" $L/bf16_kgrouped_ab.log | tail -n 12 >> $L/summary.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider -rf tests/test_bf16_gemm_gpu.py -k k_grouped > $L/pytest_bf16_kg.log 2>&1
t "pytest bf16 k_grouped exit $?: $(tail -n1 $L/pytest_bf16_kg.log)"; grep -E "^(FAILED|ERROR)" $L/pytest_bf16_kg.log | head -20 >> $L/summary.txt
timeout 150 env SHIM=0 python3 .dg/tools/run_dg_tests.py .dg/DeepGEMM/tests test_einsum > $L/dg_test_einsum_ours.log 2>&1
t "DeepGEMM test_einsum against ours exit $?"; grep -E "PASS|FAIL|Error" $L/dg_test_einsum_ours.log | head -20 >> $L/summary.txt
