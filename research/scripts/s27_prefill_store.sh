#!/usr/bin/env bash
# Session 27 (issue 17): the prefill tl.* kernel's store_direct lever (a warp-local layout change before the logits
# store instead of a CTA-wide one: 4 -> 3 bar.sync per 64-key block, scripts/compile_check_indexer.py --loops) on
# the default tile (interior loop + 128-register cap) and on the plain one, beside both, on the sweep's 5 rows;
# then the GPU tests that check its bits against the default.
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=$PWD/.cache/triton
mkdir -p $OUT/logs
timeout 110 python3 benchmarks/bench_mqa_logits.py --tables none --sweep-prefill --reps 8 --out $OUT/logs/sweep \
  --prefill-configs "[{'interior': True, 'max_registers': 128}, {'interior': True, 'max_registers': 128, 'store_direct': True}, {}, {'store_direct': True}, {'fma_relu': True, 'interior': True, 'max_registers': 128, 'store_direct': True}]" \
  > $OUT/logs/prefill_store.log 2>&1; echo "sweep exit $?"
grep "sweep prefill" $OUT/logs/prefill_store.log | sed 's/PrefillConfig(block_kv=64, num_warps=4, num_stages=4, score_cols=128, //; s/, ws=False, ws_consumers=2//'
timeout 100 python3 -m pytest -q tests/test_attention_triton.py -k "store_direct" > $OUT/logs/pytest_store.log 2>&1
echo "pytest exit $?"; tail -3 $OUT/logs/pytest_store.log
