#!/usr/bin/env bash
# Session 26, device call 3: the warp-specialised HC variant (its GPU tests, then its sweep against the plan on the
# M = 8192 rows); the BF16 GEMM GPU tests under the new default tail tile and the dense M = 4096 rows of both
# packages; the layout rows (narrow tiles) of both packages; the FP8 graph/thread tests under the eager guards.
# Results under $OUT (one logs.tgz).
set -uo pipefail
if [ -z "${S26_INNER:-}" ]; then  # the whole batch under one limit, so the logs are always packed and returned
  S26_INNER=1 timeout -k 5 550 bash "$0"; echo "batch exit $?"
  tar -czf $OUT/logs.tgz -C $OUT logs 2>/dev/null && rm -rf $OUT/logs; exit 0
fi
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=$PWD/.cache/triton DG_JIT_CACHE_DIR=$PWD/.cache/dg-jit
L=$OUT/logs; mkdir -p $L
T0=$(date +%s); t() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $L/summary.txt; }
left() { echo $(( ${1:-545} - ($(date +%s) - T0) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $L/env.txt
bash scripts/gpu/setup_deepgemm.sh $L/dg-build.log > $L/dg-setup.log 2>&1; t "dg setup exit $?"
DGENV="PYTHONPATH=$PWD/.dg/DeepGEMM LD_PRELOAD=/lib/x86_64-linux-gnu/libstdc++.so.6"
timeout 170 python3 -m pytest tests/test_hyperconnection_gpu.py -k test_ws -q -p no:cacheprovider -rf -x \
  > $L/pytest_hc_ws.log 2>&1; t "pytest hc ws exit $?: $(tail -n1 $L/pytest_hc_ws.log)"
timeout 130 python3 research/sweeps/hc_prenorm_sweep.py --ws --out $L/hc_ws > $L/hc_ws_sweep.log 2>&1
t "hc ws sweep exit $?"
timeout 90 python3 -m pytest tests/test_bf16_gemm_gpu.py -q -p no:cacheprovider -rf > $L/pytest_bf16.log 2>&1
t "pytest bf16 exit $?: $(tail -n1 $L/pytest_bf16.log)"
timeout 40 python3 benchmarks/bench_bf16_gemm.py --tables dense --ms 4096 --out $L/bf16_ours > $L/bf16_ours.log 2>&1
t "bf16 ours exit $?"
timeout 40 env $DGENV python3 benchmarks/bench_bf16_gemm.py --tables dense --ms 4096 --out $L/bf16_dg \
  > $L/bf16_dg.log 2>&1; t "bf16 dg exit $?"
timeout 40 python3 benchmarks/bench_hc_prenorm.py --tables layout --out $L/layout_ours > $L/layout_ours.log 2>&1
t "layout ours exit $?"
timeout 40 env $DGENV python3 benchmarks/bench_hc_prenorm.py --tables layout --out $L/layout_dg > $L/layout_dg.log 2>&1
t "layout dg exit $?"
L2=$(left); [ $L2 -gt 30 ] && { timeout $(( L2 - 5 )) python3 -m pytest tests/test_fp8_gemm_gpu.py -k "graph or thread" \
  -q -p no:cacheprovider -rf > $L/pytest_fp8_graph.log 2>&1; t "pytest fp8 graph/thread exit $?: $(tail -n1 $L/pytest_fp8_graph.log)"; }
