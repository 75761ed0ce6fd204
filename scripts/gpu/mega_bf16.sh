#!/usr/bin/env bash
# The BF16 Mega MoE (bf16_mega_moe at one rank) on one GPU, in one call: its GPU tests, compute-sanitizer over the
# Mega MoE cases (FP8 and BF16), then benchmarks/bench_mega_moe.py --bf16 (fused vs the unfused BF16 pipeline).
# Writes $OUT/mega_bf16/.
#   MEGA_SHAPES=v3 MEGA_TOKENS=8,64,256,1024,4096 bash scripts/gpu/mega_bf16.sh   (~6 minutes at most)
set -uo pipefail
D=${OUT:?run on the device machine with OUT set}/mega_bf16; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$D/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$D/gpu.txt"
start=$(date +%s)
timeout "${MEGA_TEST_TIMEOUT:-240}" python3 -m pytest tests/test_mega_moe_bf16_gpu.py -q -p no:cacheprovider -rfE \
  --durations=8 > "$D/tests.log" 2>&1
echo "tests: exit $? in $(( $(date +%s) - start )) s: $(grep -E '[0-9]+ (passed|failed)' "$D/tests.log" | tail -1)"
grep -E "^(FAILED|ERROR) " "$D/tests.log" | head -20
start=$(date +%s)
OUT=$D SANITIZE_ONLY="mega/" SANITIZE_TOOLS="memcheck synccheck" SANITIZE_TIMEOUT=${MEGA_SAN_TIMEOUT:-80} \
  bash scripts/gpu/sanitize.sh 2>&1 | tee "$D/sanitize.txt"
echo "sanitizer in $(( $(date +%s) - start )) s"
timeout "${MEGA_BENCH_TIMEOUT:-110}" python3 benchmarks/bench_mega_moe.py --bf16 --out "$D" \
  --shapes "${MEGA_SHAPES:-v3}" --tokens "${MEGA_TOKENS:-8,64,256,1024,4096}" 2>&1 \
  | tee "$D/bench.txt" | grep -E "^ > |Error|error" | head -40
