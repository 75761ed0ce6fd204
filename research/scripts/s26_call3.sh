#!/usr/bin/env bash
# Session 26, device call 3 (two machine starts had failed, eating device time: what was planned as two calls
# is one batch, most valuable first). 1) the new prefill kernels' GPU tests (the Gluon WS kernel, the tl.* kernel's
# instruction levers; a barrier bug hangs, so every step is under a timeout), the prefill sweep of both kernels and
# DeepGEMM's prefill rows in the same call; 2) the eager metadata guards, the layout narrow tiles and the BF16 default
# tail tile under their GPU tests; host time for both packages; 3) the warp-specialised HC variant's tests and sweep
# with what time is left. Results under $OUT (one logs.tgz).
set -uo pipefail
if [ -z "${S26_INNER:-}" ]; then  # the whole batch under one limit, so the logs are always packed and returned
  S26_INNER=1 timeout -k 5 555 bash "$0"; echo "batch exit $?"
  tar -czf $OUT/logs.tgz -C $OUT logs 2>/dev/null && rm -rf $OUT/logs; exit 0
fi
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=$PWD/.cache/triton DG_JIT_CACHE_DIR=$PWD/.cache/dg-jit
L=$OUT/logs; mkdir -p $L
T0=$(date +%s); t() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $L/summary.txt; }
left() { echo $(( ${1:-550} - ($(date +%s) - T0) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $L/env.txt
bash scripts/gpu/setup_deepgemm.sh $L/dg-build.log > $L/dg-setup.log 2>&1; t "dg setup exit $?"
DGENV="PYTHONPATH=$PWD/.dg/DeepGEMM LD_PRELOAD=/lib/x86_64-linux-gnu/libstdc++.so.6"
# 1. prefill
timeout 150 python3 -m pytest tests/test_attention_triton.py -q -p no:cacheprovider -rf -k "prefill" \
  > $L/pytest_prefill.log 2>&1; t "pytest prefill exit $?: $(tail -n1 $L/pytest_prefill.log)"
timeout 120 python3 benchmarks/bench_mqa_logits.py --tables prefill --quick --sweep-prefill --reps 8 \
  --out $L/mqa_ours > $L/mqa_ours.log 2>&1; t "prefill sweep exit $?"
timeout 45 env $DGENV python3 benchmarks/bench_mqa_logits.py --quick --tables prefill --out $L/mqa_dg \
  > $L/mqa_dg.log 2>&1; t "dg prefill exit $?"
# 2. eager guards, layout, BF16 default
timeout 110 python3 -m pytest tests/test_eager_path_gpu.py tests/test_layout_host_path_gpu.py tests/test_layout_gpu.py \
  tests/test_bf16_gemm_gpu.py -q -p no:cacheprovider -rf > $L/pytest_host.log 2>&1
t "pytest eager/layout/bf16 exit $?: $(tail -n1 $L/pytest_host.log)"
timeout 35 python3 benchmarks/host_overhead.py --rounds 5 > $L/host_ours.log 2>&1; t "host ours exit $?"
timeout 30 env $DGENV python3 benchmarks/host_overhead.py --rounds 5 > $L/host_dg.log 2>&1; t "host dg exit $?"
# 3. HC WS variant
L2=$(left); [ $L2 -gt 40 ] && { timeout $(( L2 * 45 / 100 )) python3 -m pytest tests/test_hyperconnection_gpu.py \
  -k test_ws -q -p no:cacheprovider -rf -x > $L/pytest_hc_ws.log 2>&1; t "pytest hc ws exit $?: $(tail -n1 $L/pytest_hc_ws.log)"; }
L2=$(left); [ $L2 -gt 30 ] && { timeout $(( L2 - 3 )) python3 research/sweeps/hc_prenorm_sweep.py --ws --out $L/hc_ws \
  > $L/hc_ws_sweep.log 2>&1; t "hc ws sweep exit $?"; }
