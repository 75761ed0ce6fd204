#!/usr/bin/env bash
# Session 29, issue 15: the cheaper partial-sum kernel of einsum('bmk,bnk->mn') (BmkPlan "parallel": every range's
# 8-byte load and C's issued before the first add; 16-byte partial stores in the GEMM kernel): the GPU tests that
# cover the reduction (new against legacy bits, grid against parallel bits, determinism, every split), an in-process
# A/B of the legacy and new reduction kernels at DeepGEMM's 6 rows (per-kernel times, bits, ratio to DeepGEMM's
# call-4 times), and memcheck over the split's odd-shaped case. ~110 s expected.
#   bash research/scripts/s29_reduce.sh     (device call, carry [".dg"])
set -uo pipefail
source research/scripts/device_call.sh "$0" 150
timeout 55 python3 -m pytest tests/test_einsum_gpu.py \
  tests/test_einsum_bmk_grid_gpu.py::test_grid_reduction_gives_the_parallel_bits -q -p no:cacheprovider \
  -k "bmk or parallel_bits" > $L/pytest_reduce.log 2>&1
t "pytest reduce exit $?: $(tail -n1 $L/pytest_reduce.log)"; grep -E "^FAILED|^ERROR" $L/pytest_reduce.log | head -n 20 >> $L/summary.txt
timeout 50 python3 research/probes/einsum_bmk_reduce_ab.py --rounds 2 > $L/einsum_reduce_ab.log 2>&1
t "reduce A/B exit $?"; grep -v Warning $L/einsum_reduce_ab.log | grep -v _warn_once >> $L/summary.txt
OUT=$L SANITIZE_TIMEOUT=20 SANITIZE_TOOLS="memcheck" SANITIZE_ONLY="einsum/bmk_bnk_mn_split" \
  bash scripts/gpu/sanitize.sh > $L/sanitize.txt 2>&1; t "sanitize exit $?"; cat $L/sanitize.txt >> $L/summary.txt
