#!/usr/bin/env bash
# What a release needs from one GPU, in one call (~8-9 minutes): on the Triton our users' engines install (carried:
# .triton-<TRITON>/, default 3.8.0, with .dg), every GPU test file and DeepGEMM's own tests against the package
# (scripts/gpu/stack.sh); meanwhile, under the image's Triton, the Mega MoE, FP4, mega_mhc and mega_gate kernels
# under compute-sanitizer (memcheck, synccheck); then the Mega MoE benchmark (fused against the unfused pipelines) on the idle GPU, and
# whether DeepGEMM's own wheel (carried as .sgl/*.whl) loads on the machine's torch. Everything lands in
# $OUT/release.tgz; a summary is printed.
#   TRITON=3.8.0 bash scripts/gpu/release_check.sh      (carry .triton-3.8.0, .dg and .sgl)
set -uo pipefail
REAL_OUT=${OUT:?run on the device machine with OUT set}
W=/tmp/release_out; rm -rf "$W"; mkdir -p "$W/mega"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
start=$(date +%s)
OUT=$W SANITIZE_ONLY=${SANITIZE_ONLY:-"mega/ fp4/ mega_mhc/ mega_gate/"} SANITIZE_TOOLS="memcheck synccheck" SANITIZE_TIMEOUT=${SAN_TIMEOUT:-120} \
  bash scripts/gpu/sanitize.sh > "$W/sanitize.txt" 2>&1 &
san_pid=$!
OUT=$W TRITONS=${TRITON:-3.8.0} GPU_TEST_TIMEOUT=${GPU_TEST_TIMEOUT:-240} DG_TIMEOUT=${DG_TIMEOUT:-100} \
  bash scripts/gpu/stack.sh > "$W/stack.txt" 2>&1
wait "$san_pid"
echo "stack and sanitizer: $(( $(date +%s) - start )) s"
cat "$W/stack.txt"; cat "$W/sanitize.txt"
tar -czf "$REAL_OUT/release.tgz" -C "$W" .
timeout "${BENCH_TIMEOUT:-100}" python3 benchmarks/bench_mega_moe.py --out "$W/mega" --shapes "${MEGA_SHAPES:-v3}" \
  --tokens "${MEGA_TOKENS:-8,64,256,1024,4096}" > "$W/mega/bench.txt" 2>&1
echo "mega bench: exit $?"; grep -E "^ > |Error|error" "$W/mega/bench.txt" | head -30
if ls .sgl/*.whl > /dev/null 2>&1; then
  rm -rf /tmp/sglsite && mkdir -p /tmp/sglsite && (cd /tmp/sglsite && python3 -m zipfile -e "$OLDPWD"/.sgl/*.whl .)
  (cd /tmp && PYTHONPATH=/tmp/sglsite timeout 60 python3 -c "import torch, deep_gemm as d; \
print('upstream', d.__file__, 'has fp8_mega_moe:', hasattr(d, 'fp8_mega_moe'), 'torch', torch.__version__, \
torch.version.cuda)") > "$W/upstream.txt" 2>&1
  echo "DeepGEMM's wheel: exit $?"; tail -3 "$W/upstream.txt"
fi
tar -czf "$REAL_OUT/release.tgz" -C "$W" .
