#!/usr/bin/env bash
# bf16_mega_gate on one GPU, in one call: its GPU tests, compute-sanitizer over its kernels,
# benchmarks/bench_mega_gate.py. Writes $OUT/gate/.
#   bash scripts/gpu/gate.sh   (~4 minutes at most)
set -uo pipefail
D=${OUT:?run on the device machine with OUT set}/gate; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
FAMILY=gate
source scripts/gpu/steps.sh
gpu_info
gpu_tests "${GATE_TEST_TIMEOUT:-150}" tests/test_mega_gate_gpu.py tests/test_mega_gate_kernels_cpu.py \
  tests/test_mega_gate.py
gpu_sanitize mega_gate/ "${GATE_SAN_TIMEOUT:-55}"
gpu_bench "${GATE_BENCH_TIMEOUT:-90}" 40 python3 benchmarks/bench_mega_gate.py
