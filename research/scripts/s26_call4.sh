#!/usr/bin/env bash
# Session 26, device call 4 (the last of the session's device time): the prefill levers' GPU bit-equality test and
# every prefill sweep config (fma_relu and interior apart; the WS kernel with 3 consumers and fma_relu); where the
# indexer ops' host time goes (it grew since session 24 on the H200 host); the BF16 dense M = 4096 rows and the
# layout rows of both packages in the same call. Results under $OUT (one logs.tgz).
set -uo pipefail
if [ -z "${S26_INNER:-}" ]; then  # the whole batch under one limit, so the logs are always packed and returned
  S26_INNER=1 timeout -k 5 420 bash "$0"; echo "batch exit $?"
  tar -czf $OUT/logs.tgz -C $OUT logs 2>/dev/null && rm -rf $OUT/logs; exit 0
fi
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=$PWD/.cache/triton DG_JIT_CACHE_DIR=$PWD/.cache/dg-jit
L=$OUT/logs; mkdir -p $L
T0=$(date +%s); t() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $L/summary.txt; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $L/env.txt
bash scripts/gpu/setup_deepgemm.sh $L/dg-build.log > $L/dg-setup.log 2>&1; t "dg setup exit $?"
DGENV="PYTHONPATH=$PWD/.dg/DeepGEMM LD_PRELOAD=/lib/x86_64-linux-gnu/libstdc++.so.6"
timeout 60 python3 -m pytest tests/test_attention_triton.py -q -p no:cacheprovider -rf -k "instruction_levers" \
  > $L/pytest_levers.log 2>&1; t "pytest levers exit $?: $(tail -n1 $L/pytest_levers.log)"
timeout 90 python3 benchmarks/bench_mqa_logits.py --tables none --sweep-prefill --sweep-all --reps 8 \
  --out $L/prefill_sweep > $L/prefill_sweep.log 2>&1; t "prefill sweep exit $?"
timeout 45 python3 research/probes/profile_host_indexer.py > $L/profile_host_indexer.log 2>&1; t "indexer host profile exit $?"
timeout 25 python3 benchmarks/host_overhead.py --only mqa --rounds 5 > $L/host_mqa_ours.log 2>&1; t "host mqa ours exit $?"
DG_NO_SIGNATURE_GUARDS=1 timeout 25 python3 benchmarks/host_overhead.py --only mqa --rounds 5 > $L/host_mqa_noguards.log 2>&1
t "host mqa noguards exit $?"
timeout 25 env $DGENV python3 benchmarks/host_overhead.py --only mqa --rounds 5 > $L/host_mqa_dg.log 2>&1; t "host mqa dg exit $?"
timeout 40 python3 benchmarks/bench_bf16_gemm.py --tables dense --ms 4096 --out $L/bf16_ours > $L/bf16_ours.log 2>&1
t "bf16 ours exit $?"
timeout 40 env $DGENV python3 benchmarks/bench_bf16_gemm.py --tables dense --ms 4096 --out $L/bf16_dg > $L/bf16_dg.log 2>&1
t "bf16 dg exit $?"
timeout 35 python3 benchmarks/bench_hc_prenorm.py --tables layout --out $L/layout_ours > $L/layout_ours.log 2>&1
t "layout ours exit $?"
timeout 35 env $DGENV python3 benchmarks/bench_hc_prenorm.py --tables layout --out $L/layout_dg > $L/layout_dg.log 2>&1
t "layout dg exit $?"
