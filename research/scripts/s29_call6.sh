#!/usr/bin/env bash
# Session 29, device call 6 (the last of the session's device time, ~4 minutes): the prefill lean interior loop and
# the bmk parallel reduction's new kernel. The two in-process A/B probes first (each checks the new default's bits
# against the old one's), then the GPU bit tests of both (the parts of s29_prefill.sh and s29_reduce.sh, reordered
# so the decisions come back first if the limit cuts the batch).
set -uo pipefail
source research/scripts/device_call.sh "$0" 235
timeout 60 python3 research/probes/prefill_lean_ab.py > $L/prefill_lean_ab.log 2>&1
t "prefill lean A/B exit $?"; cat $L/prefill_lean_ab.log >> $L/summary.txt
timeout 50 python3 research/probes/einsum_bmk_reduce_ab.py --rounds 2 > $L/einsum_reduce_ab.log 2>&1
t "reduce A/B exit $?"; grep -v Warning $L/einsum_reduce_ab.log | grep -v _warn_once >> $L/summary.txt
timeout 60 python3 -m pytest tests/test_attention_triton.py -m gpu \
  -k "lean_interior or 64k_context_and_20_bitwise" -q -p no:cacheprovider -rf > $L/pytest_lean.log 2>&1
t "pytest lean exit $?: $(tail -n1 $L/pytest_lean.log)"; grep -E "^(FAILED|ERROR)" $L/pytest_lean.log | head >> $L/summary.txt
timeout 55 python3 -m pytest tests/test_einsum_gpu.py \
  tests/test_einsum_bmk_grid_gpu.py::test_grid_reduction_gives_the_parallel_bits -q -p no:cacheprovider \
  -k "bmk or parallel_bits" > $L/pytest_reduce.log 2>&1
t "pytest reduce exit $?: $(tail -n1 $L/pytest_reduce.log)"; grep -E "^FAILED|^ERROR" $L/pytest_reduce.log | head -n 20 >> $L/summary.txt
