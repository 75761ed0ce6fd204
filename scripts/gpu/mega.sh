#!/usr/bin/env bash
# The SM90 FP8 Mega MoE on one GPU, in one call: its GPU tests (and the checked mode's), compute-sanitizer over its
# kernels, benchmarks/bench_mega_moe.py (fused vs the unfused pipelines, world size 1), then the soak of every family
# (scripts/gpu/soak.py) and a short soak under memcheck. Writes $OUT/mega/.
#   MEGA_SHAPES=v3,v3-671b MEGA_TOKENS=8,64,256,1024,4096,8192 bash scripts/gpu/mega.sh   (~7 minutes at most)
# Carry .sgl (DeepGEMM's sgl-deep-gemm wheel) to learn whether DeepGEMM's own layer loads on the machine's torch.
set -uo pipefail
D=${OUT:?run on the device machine with OUT set}/mega; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
FAMILY=mega
source scripts/gpu/steps.sh
gpu_info
# Whether DeepGEMM's own build of the layer (the sgl-deep-gemm wheel, carried as .sgl/*.whl) loads on this torch:
# it is built against one torch and CUDA 13, and the fused-vs-DeepGEMM comparison needs it to.
if ls .sgl/*.whl > /dev/null 2>&1; then
  rm -rf /tmp/sglsite && mkdir -p /tmp/sglsite && (cd /tmp/sglsite && python3 -m zipfile -e "$OLDPWD"/.sgl/*.whl .)
  (cd /tmp && PYTHONPATH=/tmp/sglsite timeout 60 python3 -c "import torch, deep_gemm as d; \
print('upstream', d.__file__, 'loads:', hasattr(d, 'fp8_mega_moe'), 'torch', torch.__version__, torch.version.cuda)") \
    > "$D/upstream.txt" 2>&1
  echo "upstream wheel: exit $?"; tail -3 "$D/upstream.txt"
fi
gpu_tests "${MEGA_TEST_TIMEOUT:-150}" tests/test_mega_moe_gpu.py tests/test_checked_mode_gpu.py
gpu_sanitize mega/ "${MEGA_SAN_TIMEOUT:-55}"
gpu_bench "${MEGA_BENCH_TIMEOUT:-110}" 40 python3 benchmarks/bench_mega_moe.py --shapes "${MEGA_SHAPES:-v3,v3-671b}" \
  --tokens "${MEGA_TOKENS:-8,64,256,1024,4096,8192}"
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
