# Sourced by the family batch scripts (scripts/gpu/<family>.sh) after they set FAMILY, D (their output folder) and,
# where they pick steps, PARTS: DeepGEMM's environment and the comparison tools, the two helpers every step uses, and
# the record / test / sanitizer / benchmark steps the kernel families' scripts share.
DGT=scripts/dg; [ -f "$DGT/run_dg_tests.py" ] || DGT=.dg/tools
DGENV="PYTHONPATH=$PWD/.dg/DeepGEMM LD_PRELOAD=/lib/x86_64-linux-gnu/libstdc++.so.6"
step() {  # step NAME SECONDS CMD...: run under a limit, report the exit status and the time
  local name=$1 limit=$2; shift 2
  local start=$(date +%s)
  timeout "$limit" "$@"
  local rc=$?
  echo "[$FAMILY] $name: exit $rc in $(( $(date +%s) - start )) s$([ $rc = 124 ] && echo ' (TIME LIMIT)')" | tee -a "$D/summary.txt"
}
has() { [[ " $PARTS " == *" $1 "* ]]; }

gpu_info() {  # the GPU, its driver and clock, and the torch / Triton versions, into $D/gpu.txt
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$D/gpu.txt"
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$D/gpu.txt"
}
gpu_tests() {  # gpu_tests SECONDS FILE...: pytest into $D/tests.log; prints the counts and the failures
  local limit=$1; shift
  step tests "$limit" python3 -m pytest "$@" -q -p no:cacheprovider -rfE --durations=8 > "$D/tests.log" 2>&1
  echo "$(tail -1 "$D/summary.txt"): $(grep -E '[0-9]+ (passed|failed)' "$D/tests.log" | tail -1)"
  grep -E "^(FAILED|ERROR) " "$D/tests.log" | head -20
}
gpu_sanitize() {  # gpu_sanitize CASE_FOLDERS SECONDS_PER_CASE: memcheck and synccheck (scripts/gpu/sanitize.sh)
  local start=$(date +%s)
  OUT=$D SANITIZE_ONLY="$1" SANITIZE_TOOLS="memcheck synccheck" SANITIZE_TIMEOUT=$2 \
    bash scripts/gpu/sanitize.sh 2>&1 | tee "$D/sanitize.txt"
  echo "sanitizer in $(( $(date +%s) - start )) s"
}
gpu_bench() {  # gpu_bench SECONDS LINES CMD...: a benchmark writing under $D, its result lines and errors shown
  local limit=$1 lines=$2; shift 2
  timeout "$limit" "$@" --out "$D" 2>&1 | tee "$D/bench.txt" | grep -E "^ > |Error|error" | head -"$lines"
}
