#!/usr/bin/env bash
# GPU batch for kernel-variant decisions: the warp-specialised variants' correctness tests, then the config sweep
# (benchmarks/sweep_fp8_configs.py). Everything lands in $OUT.
set -o pipefail
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/env.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/env.txt"
timeout ${TEST_TIMEOUT:-180} python3 -m pytest tests/test_fp8_gemm_gpu.py -q -p no:cacheprovider -k "${TEST_K:-warp_specialised}" 2>&1 | tail -15 | tee "$OUT/gpu_tests.log"
timeout ${SWEEP_TIMEOUT:-360} python3 benchmarks/sweep_fp8_configs.py --out "$OUT/sweep.json" ${SWEEP_ARGS:-} 2>&1 | tee "$OUT/sweep.log"
