#!/usr/bin/env bash
# Session 29, device call 5: after the merges. (1) the bmk grid GPU tests with the grid plan pinned (the plan keeps
# parallel), the whole einsum GPU file; (2) the prefill GPU tests and the prefill rows ours then DeepGEMM, same call
# (the interior loop's unmasked scale load); (3) compute-sanitizer over the prefill cases.
set -uo pipefail
source research/scripts/device_call.sh "$0" 420
timeout 100 python3 -m pytest tests/test_einsum_bmk_grid_gpu.py tests/test_einsum_gpu.py -q -p no:cacheprovider -rf \
  > $L/pytest_einsum.log 2>&1
t "pytest einsum exit $?: $(tail -n1 $L/pytest_einsum.log)"; grep -E "^(FAILED|ERROR)" $L/pytest_einsum.log | head >> $L/summary.txt
timeout 90 python3 -m pytest tests/test_attention_triton.py -m gpu -k "prefill or mqa_logits and not paged" -q \
  -p no:cacheprovider -rf > $L/pytest_prefill.log 2>&1
t "pytest prefill exit $?: $(tail -n1 $L/pytest_prefill.log)"; grep -E "^(FAILED|ERROR)" $L/pytest_prefill.log | head >> $L/summary.txt
timeout 60 python3 benchmarks/bench_mqa_logits.py --tables prefill --quick --out $L/prefill_ours > $L/prefill_ours.log 2>&1
t "bench prefill ours exit $?"
timeout 100 env $DGENV python3 benchmarks/bench_mqa_logits.py --tables prefill --quick --out $L/prefill_dg \
  > $L/prefill_dg.log 2>&1; t "bench prefill dg exit $?"
python3 benchmarks/compare_providers.py $L/prefill_ours/bench_mqa_logits.json $L/prefill_dg/bench_mqa_logits.json \
  --out $L/prefill_compare.md > $L/prefill_compare.txt 2>&1; cat $L/prefill_compare.txt >> $L/summary.txt
OUT=$L SANITIZE_TIMEOUT=50 SANITIZE_TOOLS="memcheck synccheck" SANITIZE_ONLY="indexer/prefill" \
  bash scripts/gpu/sanitize.sh > $L/sanitize.txt 2>&1; t "sanitize exit $?"; cat $L/sanitize.txt >> $L/summary.txt
