#!/usr/bin/env bash
# Session 30, device call 3 (issue 17 then 18), ~6 min:
#   1. the GPU tests of the paged kernel (register page scales now the row-pair default) and of the clean pass
#      (whole blocks in 16-byte stores; the CPU-style clean tests run on the GPU here);
#   2. research/probes/clean_pass_ab.py: vector vs per-element stores and block / warp sizes, with torch's fill_ as
#      the write ceiling (target: >= 2 TB/s on every prefill row);
#   3. bench_mqa_logits paged rows 0-6 (DeepGEMM's paged grid + H=32) and prefill quick rows, ours then DeepGEMM;
#   4. DeepGEMM's test_k_grouped_gemm_contiguous rows, ours then DeepGEMM, one timer (scripts/gpu/moe.sh dg part:
#      the SM90 K-grouped function is the nt one, which call 1's bench_fp8_gemm tn comparison could not run).
set -uo pipefail
source research/scripts/device_call.sh "$0" 470
timeout 100 python3 -m pytest tests/test_attention_triton.py -q -p no:cacheprovider -rf \
  -k "gpu_paged or clean_kernel_parts or clean_vector or gpu_prefill and clean" > $L/pytest_attention.log 2>&1
t "pytest attention exit $?: $(tail -n1 $L/pytest_attention.log)"; grep -E "^(FAILED|ERROR)" $L/pytest_attention.log | head >> $L/summary.txt
timeout 90 python3 research/probes/clean_pass_ab.py > $L/clean_ab.log 2>&1; t "clean A/B exit $?"
grep -vE "Warning|warn_once" $L/clean_ab.log >> $L/summary.txt
ROWS=0,1,2,3,4,5,6
timeout 45 python3 benchmarks/bench_mqa_logits.py --tables paged,prefill --quick --paged-rows $ROWS --out $L/mqa_ours \
  > $L/mqa_ours.log 2>&1; t "bench mqa ours exit $?"
timeout 90 env $DGENV python3 benchmarks/bench_mqa_logits.py --tables paged,prefill --quick --paged-rows $ROWS \
  --out $L/mqa_dg > $L/mqa_dg.log 2>&1; t "bench mqa dg exit $?"
python3 benchmarks/compare_providers.py $L/mqa_ours/bench_mqa_logits.json $L/mqa_dg/bench_mqa_logits.json \
  --out $L/mqa_compare.md > $L/mqa_compare.txt 2>&1; cat $L/mqa_compare.txt >> $L/summary.txt
OUT=$L MOE_PARTS=dg MOE_DG_FUNCS="test_fp8_fp4:test_k_grouped_gemm_contiguous" MOE_DG_LIMIT=70 \
  timeout 150 bash scripts/gpu/moe.sh > $L/moe.txt 2>&1; t "moe k-grouped exit $?"; cat $L/moe.txt >> $L/summary.txt
