#!/usr/bin/env bash
# Correctness batch: every GPU-marked test file (scripts/gpu/gpu_tests.sh) and compute-sanitizer over the kernel
# cases (scripts/gpu/sanitize.sh) at the same time. Neither measures time, so they share the GPU, and the cold Triton
# compiles of both use every CPU core. Writes $OUT/check/{gpu_tests,sanitize}/. Wall time: the longer of the two
# (GPU_TEST_TIMEOUT; SANITIZE_TIMEOUT per sanitizer tool).
set -uo pipefail
export OUT=$OUT/check
mkdir -p "$OUT"
bash scripts/gpu/gpu_tests.sh > "$OUT/gpu_tests.log" 2>&1 &
bash scripts/gpu/sanitize.sh > "$OUT/sanitize.log" 2>&1 &
wait
cat "$OUT/gpu_tests.log" "$OUT/sanitize.log"
