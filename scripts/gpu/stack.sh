#!/usr/bin/env bash
# The package under several Triton releases on one GPU, in one call: the image's Triton and each carried one
# (a release X.Y.Z packed as .triton-X.Y.Z/triton.tar.xz at the repository root; carry those folders and .dg).
#   TRITONS="image 3.8.0" bash scripts/gpu/stack.sh
# Per release: the GPU test files (in parallel, each under GPU_TEST_TIMEOUT) for the releases named in SUITE
# (default: all of TRITONS), then DeepGEMM's own
# tests against the package (DG_SPECS, one process under DG_TIMEOUT, printing DeepGEMM's "> Perf" lines with one
# timer) and the host time per call of a few entry points. Afterwards each release's Perf lines are compared with the image's (time under the image's Triton /
# time under that release: above 1 is faster). Everything lands in $OUT/stack/<release>/ and $OUT/stack.tgz.
set -uo pipefail
REAL_OUT=${OUT:?run on the device machine with OUT set}
W=/tmp/stack_out; rm -rf "$W"; mkdir -p "$W"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
RUNNER=.dg/tools/run_dg_tests.py
COMPARE=.dg/tools/compare_perf_lines.py
DG_SPECS=${DG_SPECS:-"test_fp8_fp4:test_gemm test_bf16:test_gemm test_hyperconnection test_layout"}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$W/gpu.txt" 2>&1
for rel in ${TRITONS:-image}; do
  D=$W/$rel; mkdir -p "$D"
  (
    if [ "$rel" != image ]; then
      site=/tmp/tsite-$rel; mkdir -p "$site" && tar -xJf ".triton-$rel/triton.tar.xz" -C "$site"
      # Triton 3.9 asks for ptxas-blackwell on every target: the carried wheel has none, CUDA 13's ptxas serves.
      export PYTHONPATH=$site:$PYTHONPATH TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas \
             TRITON_PTXAS_BLACKWELL_PATH=/usr/local/cuda/bin/ptxas \
             TRITON_CUOBJDUMP_PATH=/usr/local/cuda/bin/cuobjdump TRITON_NVDISASM_PATH=/usr/local/cuda/bin/nvdisasm
    fi
    export TRITON_CACHE_DIR=/tmp/tcache-$rel
    python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" > "$D/env.txt" 2>&1
    python3 -c "from deep_gemm._internals import triton_launcher as t; a = t.installed_abi(); print('launcher ABI', a and a.name)" >> "$D/env.txt" 2>&1
    cat "$D/env.txt"
    if [[ " ${SUITE-${TRITONS:-image}} " == *" $rel "* ]]; then
      start=$(date +%s)
      OUT=$D GPU_TEST_TIMEOUT=${GPU_TEST_TIMEOUT:-200} bash scripts/gpu/gpu_tests.sh > /dev/null 2>&1
      echo "$rel GPU tests in $(( $(date +%s) - start )) s:"; sort "$D/gpu_tests/summary.txt"
    fi
    start=$(date +%s)
    # shellcheck disable=SC2086
    timeout "${DG_TIMEOUT:-150}" python3 $RUNNER .dg/DeepGEMM/tests $DG_SPECS > "$D/dg_tests.log" 2>&1
    echo "$rel DeepGEMM tests: exit $? in $(( $(date +%s) - start )) s"
    grep -E "### (PASS|FAIL)|IMPORT FAIL" "$D/dg_tests.log" | head -40
    # Host time per call of a few entry points (no sync in the loop), under this release's launcher.
    timeout 60 python3 .dg/tools/host_overhead.py > "$D/host.txt" 2>&1; grep -v "^HOST" "$D/host.txt"
  ) 2>&1 | tee "$D/run.log"
  tar -czf "$REAL_OUT/stack.tgz" -C "$W" .  # what has run so far survives a time limit
done
for rel in ${TRITONS:-image}; do
  [ "$rel" = image ] && continue
  echo "== image Triton time / Triton $rel time, DeepGEMM's rows"
  python3 $COMPARE "$W/$rel/dg_tests.log" "$W/image/dg_tests.log" 2>&1 | tee "$W/ratio-$rel.txt" | tail -25
done
tar -czf "$REAL_OUT/stack.tgz" -C "$W" .
