#!/usr/bin/env bash
# Session 29, masked split-K (issue 15): m_grouped_bf16_gemm_nt_masked's decode rows (20 expected rows per group) with
# the last, partial wave of 32 x 128 tiles split along K (kernels/bf16_gemm.py MASKED, bf16_plan.masked_split).
# DeepGEMM's times of the G=6 rows in this call (same timer), the in-process A/B of the plan against forced splits
# (split1 = the plan before) on the four G=6 rows, the GPU tests, compute-sanitizer memcheck + synccheck on
# bf16/masked_split_k*, and one G=32 control row. Carry [".dg"]. ~150 s.
set -uo pipefail
source research/scripts/device_call.sh "$0" 230
env $DGENV timeout 45 python3 research/probes/bf16_masked_ab.py --rows 20 --groups 6 --dg-out $L/dg_masked20.json \
  > $L/dg_masked20.log 2>&1; t "dg G=6 m=20 exit $?"; grep "^DeepGEMM" $L/dg_masked20.log >> $L/summary.txt
timeout 50 python3 research/probes/bf16_masked_ab.py --rows 20 --groups 6 --dg-json $L/dg_masked20.json \
  > $L/bf16_masked_split_ab.log 2>&1
t "masked split A/B (G=6) exit $?"; grep -E "^G=|geomean|^  " $L/bf16_masked_split_ab.log \
  | tail -n 24 >> $L/summary.txt
timeout 60 python3 -m pytest tests/test_bf16_gemm_gpu.py -x -q -p no:cacheprovider -rf \
  -k "masked_decode_rows_split_k or masked_split_k or masked_in_cuda_graph" > $L/pytest_masked_split.log 2>&1
t "pytest masked split exit $?: $(tail -n1 $L/pytest_masked_split.log)"
OUT=$L SANITIZE_TIMEOUT=30 SANITIZE_TOOLS="memcheck synccheck" SANITIZE_ONLY="bf16/masked_split_k bf16/dense_nt_ws_tail bf16/dense_tn_ws_tail" \
  bash scripts/gpu/sanitize.sh > $L/sanitize.txt 2>&1; t "sanitize exit $?"; cat $L/sanitize.txt >> $L/summary.txt
# (the control last: 1536 tiles, a last wave of 84 the kernel leaves whole, so split4 must time as split1 and plan)
timeout 25 python3 research/probes/bf16_masked_ab.py --rows 20 --groups 32 --nk 6144x7168 \
  --variants plan,split1,split4 > $L/bf16_masked_split_control.log 2>&1
t "masked split A/B (G=32 control) exit $?"; grep -E "^G=" $L/bf16_masked_split_control.log >> $L/summary.txt
