# Sourced at the top of a device-call script (research/scripts/s27_call*.sh), from the repository root:
#   source research/scripts/device_call.sh "$0" LIMIT_SECONDS
# First pass: re-runs the calling script under one overall limit (CALL_LIMIT overrides LIMIT_SECONDS), then packs
# $OUT/logs into $OUT/logs.tgz and exits, so the logs come back even when the batch is cut (the device returns few
# files). Second pass (inside the limit): sets the environment, $L (the log folder), t() (a timed line in
# $L/summary.txt), records the GPU's clocks, makes the carried DeepGEMM build importable, and sets $DGENV (the
# variables that run DeepGEMM instead of this package).
if [ -z "${DEVICE_CALL_INNER:-}" ]; then
  DEVICE_CALL_INNER=1 timeout -k 5 "${CALL_LIMIT:-$2}" bash "$1"; echo "batch exit $?"
  tar -czf "$OUT/logs.tgz" -C "$OUT" logs 2>/dev/null && rm -rf "$OUT/logs"; exit 0
fi
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=$PWD/.cache/triton DG_JIT_CACHE_DIR=$PWD/.cache/dg-jit
L=$OUT/logs; mkdir -p "$L"
T0=$(date +%s); t() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a "$L/summary.txt"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > "$L/env.txt"
bash scripts/gpu/setup_deepgemm.sh "$L/dg-build.log" > "$L/dg-setup.log" 2>&1; t "dg setup exit $?"
DGENV="PYTHONPATH=$PWD/.dg/DeepGEMM LD_PRELOAD=/lib/x86_64-linux-gnu/libstdc++.so.6"
