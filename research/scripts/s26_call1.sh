#!/usr/bin/env bash
# Session 26, device call 1: build DeepGEMM (background) while the two pending patches' GPU tests run (BF16 WS tail
# tile; HC default-stream capture query); then the BF16 tail sweep with DeepGEMM's BF16 dense bench in the same call,
# host time of HC for both packages and the capture-query probe; last, an Nsight Compute look at the prefill
# indexer kernel (for the warp-specialised prefill work). Results under $OUT.
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=$PWD/.cache/triton DG_JIT_CACHE_DIR=$PWD/.cache/dg-jit
T0=$(date +%s); t() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $OUT/summary.txt; }
left() { echo $(( ${1:-570} - ($(date +%s) - T0) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/env.txt
(bash scripts/gpu/setup_deepgemm.sh $OUT/dg-build.log > $OUT/dg-setup.log 2>&1; echo "dg setup exit $?" >> $OUT/dg-setup.log) &
BUILD=$!
timeout 210 python3 -m pytest tests/test_bf16_gemm_gpu.py -q -p no:cacheprovider -rf -x > $OUT/pytest_bf16.log 2>&1
t "pytest bf16 exit $?: $(tail -n1 $OUT/pytest_bf16.log)"
timeout 150 python3 -m pytest tests/test_hyperconnection_gpu.py tests/test_eager_path_gpu.py tests/test_einsum_gpu.py \
  "tests/test_fp8_gemm_gpu.py" -k "hyperconnection or hc or eager or graph or split_k" -q -p no:cacheprovider -rf \
  > $OUT/pytest_hc.log 2>&1; t "pytest hc/graph exit $?: $(tail -n1 $OUT/pytest_hc.log)"
wait $BUILD; t "$(tail -n1 $OUT/dg-setup.log)"
DGENV="PYTHONPATH=$PWD/.dg/DeepGEMM LD_PRELOAD=/lib/x86_64-linux-gnu/libstdc++.so.6"
timeout 100 python3 benchmarks/bench_bf16_gemm.py --tables sweep --ms 4096 \
  --rows 4096x576x7168,4096x2112x7168,4096x7168x2048 --out $OUT/bf16 > $OUT/bf16_sweep.log 2>&1; t "bf16 sweep exit $?"
timeout 60 env $DGENV python3 benchmarks/bench_bf16_gemm.py --tables dense --ms 4096 --out $OUT/bf16_dg \
  > $OUT/bf16_dg.log 2>&1; t "dg bf16 dense exit $?"
timeout 90 python3 benchmarks/host_overhead.py > $OUT/host_ours.log 2>&1; t "host ours exit $?"
timeout 90 env $DGENV python3 benchmarks/host_overhead.py > $OUT/host_dg.log 2>&1; t "host dg exit $?"
timeout 40 python3 research/probes/hc_capture_query_gpu.py > $OUT/hc_capture_probe.log 2>&1; t "capture probe exit $?"
L=$(left 575); if [ $L -gt 60 ]; then
  timeout $(( L - 15 )) ncu --clock-control none -k regex:mqa_logits --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    --section LaunchStats --section Occupancy --section SourceCounters \
    python3 research/probes/ncu_prefill.py > $OUT/ncu_prefill.txt 2>&1; t "ncu prefill exit $?"
fi
ls .dg/DeepGEMM/deep_gemm/_C*.so >/dev/null 2>&1 && tar -czf $OUT/dg_so.tgz .dg/DeepGEMM/deep_gemm/_C*.so
tar -czf $OUT/logs.tgz -C $OUT --exclude logs.tgz --exclude dg_so.tgz . 2>/dev/null; t done
