# Sourced by the family batch scripts (scripts/gpu/<family>.sh) after they set FAMILY, D (their output folder) and
# PARTS (the steps asked for): DeepGEMM's environment and the comparison tools, and the two helpers every step uses.
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
