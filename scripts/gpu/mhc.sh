#!/usr/bin/env bash
# mega_mhc on one GPU, in one call: its GPU tests, compute-sanitizer over its kernels, benchmarks/bench_mega_mhc.py.
# Writes $OUT/mhc/.
#   bash scripts/gpu/mhc.sh   (~4 minutes at most)
set -uo pipefail
D=${OUT:?run on the device machine with OUT set}/mhc; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$D/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$D/gpu.txt"
start=$(date +%s)
timeout "${MHC_TEST_TIMEOUT:-150}" python3 -m pytest tests/test_mega_mhc_gpu.py tests/test_mega_mhc_kernels_cpu.py -q \
  -p no:cacheprovider -rfE --durations=8 > "$D/tests.log" 2>&1
echo "tests: exit $? in $(( $(date +%s) - start )) s: $(grep -E '[0-9]+ (passed|failed)' "$D/tests.log" | tail -1)"
grep -E "^(FAILED|ERROR) " "$D/tests.log" | head -20
start=$(date +%s)
OUT=$D SANITIZE_ONLY="mega_mhc/" SANITIZE_TOOLS="memcheck synccheck" SANITIZE_TIMEOUT=${MHC_SAN_TIMEOUT:-55} \
  bash scripts/gpu/sanitize.sh 2>&1 | tee "$D/sanitize.txt"
echo "sanitizer in $(( $(date +%s) - start )) s"
timeout "${MHC_BENCH_TIMEOUT:-90}" python3 benchmarks/bench_mega_mhc.py --out "$D" 2>&1 | tee "$D/bench.txt" \
  | grep -E "^ > |Error|error" | head -40
