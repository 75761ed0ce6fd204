#!/usr/bin/env bash
# The SM90 FP8 Mega MoE on one GPU, in one call: its GPU tests (and the checked mode's), compute-sanitizer over its
# kernels, benchmarks/bench_mega_moe.py (fused vs the unfused pipelines, world size 1), then the soak of every family
# (scripts/gpu/soak.py) and a short soak under memcheck. Writes $OUT/mega/.
#   MEGA_SHAPES=v3,v3-671b MEGA_TOKENS=8,64,256,1024,4096,8192 bash scripts/gpu/mega.sh   (~7 minutes at most)
# Carry .sgl (DeepGEMM's sgl-deep-gemm wheel) to learn whether DeepGEMM's own layer loads on the machine's torch.
set -uo pipefail
D=${OUT:?run on the device machine with OUT set}/mega; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$D/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$D/gpu.txt"
# Whether DeepGEMM's own build of the layer (the sgl-deep-gemm wheel, carried as .sgl/*.whl) loads on this torch:
# it is built against one torch and CUDA 13, and the fused-vs-DeepGEMM comparison needs it to.
if ls .sgl/*.whl > /dev/null 2>&1; then
  rm -rf /tmp/sglsite && mkdir -p /tmp/sglsite && (cd /tmp/sglsite && python3 -m zipfile -e "$OLDPWD"/.sgl/*.whl .)
  (cd /tmp && PYTHONPATH=/tmp/sglsite timeout 60 python3 -c "import torch, deep_gemm as d; \
print('upstream', d.__file__, 'loads:', hasattr(d, 'fp8_mega_moe'), 'torch', torch.__version__, torch.version.cuda)") \
    > "$D/upstream.txt" 2>&1
  echo "upstream wheel: exit $?"; tail -3 "$D/upstream.txt"
fi
start=$(date +%s)
timeout "${MEGA_TEST_TIMEOUT:-150}" python3 -m pytest tests/test_mega_moe_gpu.py tests/test_checked_mode_gpu.py -q \
  -p no:cacheprovider -rfE --durations=8 > "$D/tests.log" 2>&1
echo "tests: exit $? in $(( $(date +%s) - start )) s: $(grep -E '[0-9]+ (passed|failed)' "$D/tests.log" | tail -1)"
grep -E "^(FAILED|ERROR) " "$D/tests.log" | head -20
start=$(date +%s)
OUT=$D SANITIZE_ONLY="mega/" SANITIZE_TOOLS="memcheck synccheck" SANITIZE_TIMEOUT=${MEGA_SAN_TIMEOUT:-55} \
  bash scripts/gpu/sanitize.sh 2>&1 | tee "$D/sanitize.txt"
echo "sanitizer in $(( $(date +%s) - start )) s"
timeout "${MEGA_BENCH_TIMEOUT:-110}" python3 benchmarks/bench_mega_moe.py --out "$D" \
  --shapes "${MEGA_SHAPES:-v3,v3-671b}" --tokens "${MEGA_TOKENS:-8,64,256,1024,4096,8192}" 2>&1 \
  | tee "$D/bench.txt" | grep -E "^ > |Error|error" | head -40
# The soak: every family from 8 threads on 2 streams against the CPU kernels, then a short run under memcheck.
start=$(date +%s)
timeout "${SOAK_TIMEOUT:-60}" python3 scripts/gpu/soak.py --seconds "${SOAK_SECONDS:-30}" --threads 8 > "$D/soak.txt" 2>&1
echo "soak: exit $? in $(( $(date +%s) - start )) s"; tail -14 "$D/soak.txt"
[ "${SOAK_MEMCHECK:-1}" = 1 ] || exit 0
start=$(date +%s)
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout "${SOAK_SAN_TIMEOUT:-45}" "$CS" --tool memcheck --error-exitcode 1 python3 scripts/gpu/soak.py --seconds 10 \
  --threads 2 > "$D/soak_memcheck.txt" 2>&1
echo "soak under memcheck: exit $? in $(( $(date +%s) - start )) s"
grep -E "ERROR SUMMARY|SOAK:|calls" "$D/soak_memcheck.txt" | tail -13
