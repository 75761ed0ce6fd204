#!/usr/bin/env bash
# Session 28, device call 2: the masked decode tiles (research/probes/bf16_masked_tiles.py) and the FP8 K-grouped
# GPU tests under the new default (fp8_plan.UNIFORM_K_GROUPED = True).
set -uo pipefail
source research/scripts/device_call.sh "$0" 330
timeout 150 python3 -m pytest -q -p no:cacheprovider -rf tests/test_fp8_gemm_gpu.py -k k_grouped > $L/pytest_fp8_kg.log 2>&1
t "pytest fp8 k_grouped exit $?: $(tail -n1 $L/pytest_fp8_kg.log)"; grep -E "^(FAILED|ERROR)" $L/pytest_fp8_kg.log | head >> $L/summary.txt
timeout 170 python3 research/probes/bf16_masked_tiles.py --reps 10 > $L/bf16_masked_tiles.log 2>&1
t "bf16 masked tiles exit $?"; grep -E "best|geomean|  |WRONG" $L/bf16_masked_tiles.log | tail -n 40 >> $L/summary.txt
