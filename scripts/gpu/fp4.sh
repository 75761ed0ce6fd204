#!/usr/bin/env bash
# The FP4 GEMM kernel on one GPU, in one call: its compile check, its GPU tests (K-grouped, NVFP4, the FP8 GEMMs'
# FP4 forms; opted in with Fp4Overrides(kernels=True)), then benchmarks/bench_fp4_gemm.py. Writes $OUT/fp4/.
#   bash scripts/gpu/fp4.sh      (~9 minutes at most: the first call compiles every variant)
set -uo pipefail
D=${OUT:?run on the device machine with OUT set}/fp4; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$D/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$D/gpu.txt"
timeout "${FP4_COMPILE_TIMEOUT:-90}" python3 scripts/compile_check_fp4.py > "$D/compile.txt" 2>&1
echo "compile check: exit $?: $(tail -1 "$D/compile.txt")"
start=$(date +%s)
timeout "${FP4_TEST_TIMEOUT:-300}" python3 -m pytest tests/test_fp4_gemm_gpu.py -q -p no:cacheprovider -rfE \
  --durations=8 > "$D/tests.log" 2>&1
echo "tests: exit $? in $(( $(date +%s) - start )) s: $(grep -E '[0-9]+ (passed|failed)' "$D/tests.log" | tail -1)"
grep -E "^(FAILED|ERROR) " "$D/tests.log" | head -20
timeout "${FP4_BENCH_TIMEOUT:-150}" python3 benchmarks/bench_fp4_gemm.py --out "$D" 2>&1 | tee "$D/bench.txt" \
  | grep -E "^ > |Error|error" | head -60
