#!/usr/bin/env bash
# Session 26, device call 2: the new prefill kernels (the Gluon WS kernel, the tl.* kernel's instruction levers):
# GPU tests first (a barrier bug hangs: every step under timeout), then the prefill sweep of both kernels and
# DeepGEMM's prefill rows in the same call; the eager metadata guards' GPU tests and host time for both packages
# (and ours with the guards off). Results under $OUT (returned as one logs.tgz).
set -uo pipefail
if [ -z "${S26_INNER:-}" ]; then  # the whole batch under one limit, so the logs are always packed and returned
  S26_INNER=1 timeout -k 5 550 bash "$0"; echo "batch exit $?"
  tar -czf $OUT/logs.tgz -C $OUT logs 2>/dev/null && rm -rf $OUT/logs; exit 0
fi
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=$PWD/.cache/triton DG_JIT_CACHE_DIR=$PWD/.cache/dg-jit
L=$OUT/logs; mkdir -p $L
T0=$(date +%s); t() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $L/summary.txt; }
left() { echo $(( ${1:-575} - ($(date +%s) - T0) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $L/env.txt
bash scripts/gpu/setup_deepgemm.sh $L/dg-build.log > $L/dg-setup.log 2>&1; t "dg setup exit $?"
DGENV="PYTHONPATH=$PWD/.dg/DeepGEMM LD_PRELOAD=/lib/x86_64-linux-gnu/libstdc++.so.6"
timeout 200 python3 -m pytest tests/test_attention_triton.py -q -p no:cacheprovider -rf -k "prefill" \
  > $L/pytest_prefill.log 2>&1; t "pytest prefill exit $?: $(tail -n1 $L/pytest_prefill.log)"
timeout 170 python3 benchmarks/bench_mqa_logits.py --tables prefill --quick --sweep-prefill --reps 10 \
  --out $L/mqa_ours > $L/mqa_ours.log 2>&1; t "prefill sweep exit $?"
timeout 60 env $DGENV python3 benchmarks/bench_mqa_logits.py --quick --tables prefill --out $L/mqa_dg \
  > $L/mqa_dg.log 2>&1; t "dg prefill exit $?"
timeout $(( $(left 430) > 30 ? $(left 430) : 30 )) python3 -m pytest tests/test_eager_path_gpu.py \
  tests/test_layout_host_path_gpu.py tests/test_layout_gpu.py -q -p no:cacheprovider -rf > $L/pytest_host.log 2>&1
t "pytest host/layout exit $?: $(tail -n1 $L/pytest_host.log)"
for who in ours dg noguards; do
  [ $(left 570) -lt 20 ] && break
  case $who in
    ours) timeout 70 python3 benchmarks/host_overhead.py --rounds 5 > $L/host_$who.log 2>&1 ;;
    dg) timeout 45 env $DGENV python3 benchmarks/host_overhead.py --rounds 5 > $L/host_$who.log 2>&1 ;;
    noguards) DG_NO_SIGNATURE_GUARDS=1 timeout 30 python3 benchmarks/host_overhead.py --rounds 5 > $L/host_$who.log 2>&1 ;;
  esac
  t "host $who exit $?"
done
