#!/usr/bin/env bash
# Final GPU batch: ws smoke, the whole test suite on the GPU, host profile, FP8 benchmark, optionally an Nsight
# Compute look at the M=4096 kernel (NCU=1), and the self-check. Everything lands in $OUT.
# Knobs: PYTEST_ARGS, TEST_TIMEOUT, BENCH_ARGS (e.g. --compare-ws), BENCH_TIMEOUT, NCU=1.
# On a fresh machine Triton compiles every kernel cold and the suite needs more than the default 320 s (session 9:
# cut at 39 %; 184 s once the kernel cache was warm): run `pytest tests` in a call of its own first there.
set -o pipefail
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/env.txt"
timeout 60 python3 scripts/ws_smoke.py 2>&1 | tail -12 | tee "$OUT/ws_smoke.log"
timeout ${TEST_TIMEOUT:-320} python3 -m pytest tests -q -p no:cacheprovider --maxfail=10 ${PYTEST_ARGS:-} 2>&1 | tail -25 | tee "$OUT/gpu_tests.log"
timeout 60 python3 benchmarks/profile_host.py 2>&1 | head -34 > "$OUT/profile_host.log"; grep "us/call" "$OUT/profile_host.log"
timeout ${BENCH_TIMEOUT:-200} python3 benchmarks/bench_fp8_gemm.py --out "$OUT" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log" | grep -E "M= 4096|geometric|vs_|host|us/call|G="
[ "${NCU:-0}" = 1 ] && timeout 90 ncu --clock-control none -k regex:fp8_gemm --launch-skip 2 --launch-count 1 --section SpeedOfLight \
  --section WarpStateStats --section Occupancy python3 research/probes/ncu_one.py > "$OUT/ncu.txt" 2>&1 && grep -E "Duration|Throughput|Stall|Warp Cycles|Registers|Achieved Occ" "$OUT/ncu.txt" | head -30
timeout 60 python3 -m deep_gemm 2>&1 | tee "$OUT/demo.log"
