#!/usr/bin/env bash
# bf16_mega_gate on one GPU, in one call: its GPU tests, compute-sanitizer over its kernels,
# benchmarks/bench_mega_gate.py. Writes $OUT/gate/.
#   bash scripts/gpu/gate.sh   (~4 minutes at most)
set -uo pipefail
D=${OUT:?run on the device machine with OUT set}/gate; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$D/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$D/gpu.txt"
start=$(date +%s)
timeout "${GATE_TEST_TIMEOUT:-150}" python3 -m pytest tests/test_mega_gate_gpu.py tests/test_mega_gate_kernels_cpu.py \
  tests/test_mega_gate.py -q -p no:cacheprovider -rfE --durations=8 > "$D/tests.log" 2>&1
echo "tests: exit $? in $(( $(date +%s) - start )) s: $(grep -E '[0-9]+ (passed|failed)' "$D/tests.log" | tail -1)"
grep -E "^(FAILED|ERROR) " "$D/tests.log" | head -20
start=$(date +%s)
OUT=$D SANITIZE_ONLY="mega_gate/" SANITIZE_TOOLS="memcheck synccheck" SANITIZE_TIMEOUT=${GATE_SAN_TIMEOUT:-55} \
  bash scripts/gpu/sanitize.sh 2>&1 | tee "$D/sanitize.txt"
echo "sanitizer in $(( $(date +%s) - start )) s"
timeout "${GATE_BENCH_TIMEOUT:-90}" python3 benchmarks/bench_mega_gate.py --out "$D" 2>&1 | tee "$D/bench.txt" \
  | grep -E "^ > |Error|error" | head -40
