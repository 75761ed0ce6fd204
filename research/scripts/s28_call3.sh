#!/usr/bin/env bash
# Session 28, device call 3: BF16 K-grouped and masked calls on the warp-specialised kernel (helper branches
# s28-bf16kg, s28-bf16masked, merged, both opt-in): their A/Bs against the tl.* plan and their GPU tests.
set -uo pipefail
source research/scripts/device_call.sh "$0" 540
timeout 150 python3 research/probes/bf16_kgrouped_ab.py --reps 10 > $L/bf16_kgrouped_ab.log 2>&1
t "bf16 k-grouped A/B exit $?"; grep -E "geomean|WRONG|UNSTABLE|DIFF|^  " $L/bf16_kgrouped_ab.log | tail -n 8 >> $L/summary.txt
timeout 150 python3 research/probes/bf16_masked_ab.py --reps 10 > $L/bf16_masked_ab.log 2>&1
t "bf16 masked A/B exit $?"; grep -E "geomean|WRONG|TOUCHED|^  " $L/bf16_masked_ab.log | tail -n 8 >> $L/summary.txt
timeout 230 python3 -m pytest -q -p no:cacheprovider -rf tests/test_bf16_masked_ws.py tests/test_bf16_gemm_gpu.py \
  -k "k_grouped or masked or warp_specialised" > $L/pytest_bf16.log 2>&1
t "pytest bf16 k_grouped/masked exit $?: $(tail -n1 $L/pytest_bf16.log)"; grep -E "^(FAILED|ERROR)" $L/pytest_bf16.log | head -20 >> $L/summary.txt
