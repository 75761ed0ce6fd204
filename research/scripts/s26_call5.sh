#!/usr/bin/env bash
# Session 26, device call 5 (~2 min of device time left): the prefill tl.* kernel's register cap alone and with the
# interior loop, beside the default and call 4's best (fma_relu + interior + cap), on the sweep's 5 rows.
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=$PWD/.cache/triton
mkdir -p $OUT/logs
timeout 100 python3 benchmarks/bench_mqa_logits.py --tables none --sweep-prefill --reps 8 --out $OUT/logs/sweep \
  --prefill-configs "[{}, {'max_registers': 128}, {'interior': True, 'max_registers': 128}, {'interior': True}, {'fma_relu': True, 'interior': True, 'max_registers': 128}]" \
  > $OUT/logs/prefill_regcap.log 2>&1; echo "sweep exit $?"
grep "sweep prefill" $OUT/logs/prefill_regcap.log | sed 's/PrefillConfig(block_kv=64, num_warps=4, num_stages=4, score_cols=128, //; s/, ws=False, ws_consumers=2)//'
