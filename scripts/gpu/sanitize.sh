#!/usr/bin/env bash
# Every CUDA kernel path on small odd shapes under compute-sanitizer: memcheck and synccheck over all cases
# (scripts/gpu/sanitize/<family>.py, run by scripts/gpu/sanitize_cases.py, one process per tool), racecheck over a
# few (RACECHECK_CASES: it is the slowest tool). Each case checks its result against the reference. Prints one
# summary line per tool: sanitizer errors (or hazards) and cases correct. Full logs under $OUT/sanitize/.
#   bash scripts/gpu/sanitize.sh                       # from the repository root, on the GPU machine
#   SANITIZE_ONLY="fp8/" bash scripts/gpu/sanitize.sh  # a subset (substrings of "family/name")
#   SANITIZE_TOOLS="synccheck memcheck" bash scripts/gpu/sanitize.sh   # some tools, in this order
# Expected wall time, warm Triton cache: ~1 min per tool over the FP8 cases (budget 3 min in all); each tool run
# is capped by SANITIZE_TIMEOUT seconds.
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD PYTORCH_NO_CUDA_MEMORY_CACHING=1 PYTHONUNBUFFERED=1
DIR=${OUT:-/tmp/gpu_out}/sanitize
mkdir -p "$DIR"
PY=${PYTHON:-python3}
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
TIMEOUT=${SANITIZE_TIMEOUT:-120}
ONLY=${SANITIZE_ONLY:-}
# Racecheck: one two-wave and one one-wave (staged scales) warp-specialised case.
RACECHECK_CASES=${RACECHECK_CASES:-"fp8/dense_ws_two_wave_128x256 fp8/dense_ws_one_wave_staged_scales_128x64"}
[ -x "$CS" ] || { echo "sanitize: compute-sanitizer not found"; exit 1; }

run_tool() {  # tool, log name, case filter...
  local tool=$1 name=$2; shift 2
  local only=()
  [ $# -gt 0 ] && only=(--only "$@")
  local start=$(date +%s)
  # (memcheck / synccheck errors fail the run; racecheck's hazards are reported for triage: README.md)
  timeout "$TIMEOUT" "$CS" --tool "$tool" --print-limit 20 \
    $([ "$tool" = racecheck ] && echo --racecheck-report all || echo --error-exitcode 1) \
    "$PY" scripts/gpu/sanitize_cases.py "${only[@]}" > "$DIR/$name.log" 2>&1
  local rc=$?
  local errors
  if [ "$tool" = racecheck ]; then
    errors=$(grep -E "RACECHECK SUMMARY" "$DIR/$name.log" | tail -1 | sed 's/^=* *//')
  else
    errors=$(grep -E "ERROR SUMMARY" "$DIR/$name.log" | tail -1 | sed 's/^=* *//')
  fi
  local cases=$(grep -E "^CASES:" "$DIR/$name.log" | tail -1)
  echo "$name: ${errors:-no sanitizer summary} | ${cases:-no case summary} | exit $rc in $(( $(date +%s) - start )) s"
  # (the script's status: 1 when a tool's run failed, reported anything or left a case incorrect)
  [ "$rc" = 0 ] || STATUS=1
  grep -E "^CASE .*FAIL|^LOAD .*FAIL" "$DIR/$name.log" | head -20 | sed 's/^/  /'
  # The first sanitizer reports, for a quick look (the log has them all).
  grep -E "^========= (Invalid|Barrier|Error|Race|Warning|Program hit)" "$DIR/$name.log" | sort | uniq -c | head -10 \
    | sed 's/^/  /' || true
}
STATUS=0

filter=()
[ -n "$ONLY" ] && filter=($ONLY)
# SANITIZE_TOOLS picks and orders the tools (default: all three).
for tool in ${SANITIZE_TOOLS:-memcheck synccheck racecheck}; do
  if [ "$tool" = racecheck ]; then run_tool racecheck racecheck $RACECHECK_CASES
  else run_tool "$tool" "$tool" "${filter[@]}"; fi
done
exit $STATUS
