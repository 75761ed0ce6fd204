#!/usr/bin/env bash
# Session 24, device call 1: build DeepGEMM (background) while the layout host-path patch's GPU tests run; then the
# HC config sweep; then the FP8 dense levers against DeepGEMM's dense bench (same call). Results under $OUT.
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=$PWD/.cache/triton DG_JIT_CACHE_DIR=$PWD/.cache/dg-jit
T0=$(date +%s); t() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $OUT/summary.txt; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/env.txt
(bash scripts/gpu/setup_deepgemm.sh $OUT/dg-build.log > $OUT/dg-setup.log 2>&1; echo "dg setup exit $?" >> $OUT/dg-setup.log) &
BUILD=$!
timeout 200 python3 -m pytest tests/test_layout_host_path_gpu.py tests/test_layout_gpu.py tests/test_layout_host_path.py \
  -q -p no:cacheprovider -rf > $OUT/pytest_layout.log 2>&1; t "pytest layout exit $?: $(tail -n1 $OUT/pytest_layout.log)"
wait $BUILD; t "$(tail -n1 $OUT/dg-setup.log)"
timeout 150 python3 research/sweeps/hc_prenorm_sweep.py --out $OUT/hc > $OUT/hc_sweep.log 2>&1; t "hc sweep exit $?"
DGENV="PYTHONPATH=$PWD/.dg/DeepGEMM LD_PRELOAD=/lib/x86_64-linux-gnu/libstdc++.so.6"
LEFT=$(( 560 - ($(date +%s) - T0) ))
if [ $LEFT -gt 150 ]; then
  timeout 120 env $DGENV python3 benchmarks/bench_fp8_gemm.py --quick --tables dense,1d1d --out $OUT/dense_dg \
    > $OUT/dense_dg.log 2>&1; t "dg dense bench exit $?"
  LEFT=$(( 570 - ($(date +%s) - T0) ))
  timeout -s INT -k 20 $LEFT python3 research/sweeps/sweep_fp8_configs.py --out $OUT/dense \
    --only dense4096,wgrad,wgrad_tail --dg-log $OUT/dense_dg.log > $OUT/dense_sweep.log 2>&1; t "dense sweep exit $?"
fi
mkdir -p $OUT/x; ls .dg/DeepGEMM/deep_gemm/_C*.so >/dev/null 2>&1 && tar -czf $OUT/dg_so.tgz .dg/DeepGEMM/deep_gemm/_C*.so
[ -d .cache/dg-jit ] && tar -czf $OUT/cache_dg_jit.tgz .cache/dg-jit
