#!/usr/bin/env bash
# One GPU batch for the device machine: set up DeepGEMM side by side, then run each family's batch script
# (scripts/gpu/<family>.sh, each writing under $OUT/<family>/), each under its own time limit, and pack every
# family's folder into one archive in the real $OUT (the device returns at most 8 files).
#   FAMILIES="fp8_ab hc bf16" FAMILY_TIMEOUT=240 bash scripts/gpu/all.sh
# Here, unpack what comes back at the repository root (cache_*.tgz -> .cache/, dg_so.tgz -> DeepGEMM's built module)
# and carry ".dg" and ".cache" next time: the build (~75 s) and cold compiles are skipped.
set -uo pipefail
REAL_OUT=${OUT:?run on the device machine with OUT set}
export OUT=/tmp/gpu_out PYTHONPATH=$PWD PYTHONUNBUFFERED=1
# Compile caches live in the carried, ignored .cache/ so the next call can reuse them (CACHE=1 sends them back).
export TRITON_CACHE_DIR=$PWD/.cache/triton DG_JIT_CACHE_DIR=$PWD/.cache/dg-jit
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/env.txt" 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> "$OUT/env.txt" 2>&1
[ "${DG:-1}" = 1 ] && bash scripts/gpu/setup_deepgemm.sh "$OUT/dg-build.log" 2>&1 | tee -a "$OUT/env.txt"
for fam in ${FAMILIES:?name the families}; do
  start=$(date +%s)
  mkdir -p "$OUT/$fam"
  timeout "${FAMILY_TIMEOUT:-240}" bash "scripts/gpu/$fam.sh" > "$OUT/$fam/run.log" 2>&1
  echo "$fam: exit $? in $(( $(date +%s) - start )) s" | tee -a "$OUT/env.txt"
  # Packed as soon as it ends: a call cut by its time limit still returns every finished family.
  tar -czf "$REAL_OUT/$fam.tgz" -C "$OUT" "$fam"; cp "$OUT/env.txt" "$REAL_OUT/"
done
if [ "${CACHE:-1}" = 1 ]; then  # archives over the device's 16 MiB per file are dropped, not sent
  [ -d .cache/triton ] && tar -czf "$REAL_OUT/cache_triton.tgz" .cache/triton 2>/dev/null
  [ -d .cache/dg-jit ] && tar -czf "$REAL_OUT/cache_dg_jit.tgz" .cache/dg-jit 2>/dev/null
  ls .dg/DeepGEMM/deep_gemm/_C*.so > /dev/null 2>&1 && tar -czf "$REAL_OUT/dg_so.tgz" .dg/DeepGEMM/deep_gemm/_C*.so
  for f in "$REAL_OUT"/cache_*.tgz "$REAL_OUT/dg_so.tgz"; do
    [ -f "$f" ] && du -h "$f" && [ $(stat -c %s "$f") -gt 16000000 ] && echo "dropped $f (over 16 MB)" && rm "$f"
  done
fi
ls -la "$REAL_OUT"
