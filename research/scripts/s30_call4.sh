#!/usr/bin/env bash
# Session 30, device call 4 (issue 17), ~4 min: the paged row pairs sit at 0.895-0.900x of DeepGEMM (call 3), so
#   1. the GPU bit tests of the paged levers (register page scales, the new opt-in fma_relu);
#   2. in-process A/Bs on the 3 row-pair rows: fma_relu on, and 6 stages instead of 7 (register page scales free
#      the scale ring, so the stage count is re-checked);
#   3. research/probes/clean_pass_ab.py (its fill ceiling fixed after call 3): vector vs per-element stores;
#   4. compute-sanitizer memcheck + synccheck over the indexer cases (the clean pass's vector stores are new);
#   5. a second same-call sample of the paged row pairs, ours then DeepGEMM.
set -uo pipefail
source research/scripts/device_call.sh "$0" 330
timeout 60 python3 -m pytest tests/test_attention_triton.py -q -p no:cacheprovider -rf -k "gpu_paged_bit_levers" \
  > $L/pytest_levers.log 2>&1; t "pytest levers exit $?: $(tail -n1 $L/pytest_levers.log)"
grep -E "^(FAILED|ERROR)" $L/pytest_levers.log | head >> $L/summary.txt
timeout 50 python3 research/probes/paged_default_ab.py --quick --field fma_relu > $L/ab_fma_relu.log 2>&1
t "A/B fma_relu exit $?"; grep -E "^BSZ|Error" $L/ab_fma_relu.log >> $L/summary.txt
timeout 50 python3 research/probes/paged_default_ab.py --quick --field num_stages=6 > $L/ab_stages6.log 2>&1
t "A/B stages 6 exit $?"; grep -E "^BSZ|Error" $L/ab_stages6.log >> $L/summary.txt
timeout 60 python3 research/probes/clean_pass_ab.py > $L/clean_ab.log 2>&1; t "clean A/B exit $?"
grep -vE "Warning|warn_once" $L/clean_ab.log >> $L/summary.txt
OUT=$L SANITIZE_TIMEOUT=60 SANITIZE_TOOLS="memcheck synccheck" SANITIZE_ONLY="indexer/" \
  bash scripts/gpu/sanitize.sh > $L/sanitize.txt 2>&1; t "sanitize exit $?"; cat $L/sanitize.txt >> $L/summary.txt
timeout 30 python3 benchmarks/bench_mqa_logits.py --tables paged --quick --out $L/mqa_ours > $L/mqa_ours.log 2>&1
t "bench paged ours exit $?"
timeout 50 env $DGENV python3 benchmarks/bench_mqa_logits.py --tables paged --quick --out $L/mqa_dg > $L/mqa_dg.log 2>&1
t "bench paged dg exit $?"
python3 benchmarks/compare_providers.py $L/mqa_ours/bench_mqa_logits.json $L/mqa_dg/bench_mqa_logits.json \
  --out $L/mqa_compare.md > $L/mqa_compare.txt 2>&1; cat $L/mqa_compare.txt >> $L/summary.txt
