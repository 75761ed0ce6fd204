#!/usr/bin/env bash
# The support matrix's fast checks on the stacks other than the default one, each in a venv of its own:
#
#   bash scripts/run_matrix.sh                  # torch 2.11.0, 2.12.1 and 2.15.0, each with the Triton it pins
#   bash scripts/run_matrix.sh 2.15.0 2.13.0    # the stacks named by their (exact) torch version
#
# Per stack:
#   1. setup: scripts/setup_env.sh with TORCH_VERSION=<version> and VENV=$MATRIX_DIR/torch-<version> (default
#      MATRIX_DIR=.matrix): torch from the package index, then the Triton torch pins; an existing venv of that stack
#      is reused. pip runs with PIP_CONSTRAINT=/dev/null: the matrix installs exact versions, which a machine-wide
#      constraints file (pip's `constraint` setting, e.g. a cap on torch) must not veto. MATRIX_DISCARD=1 removes
#      the venv once its checks are done (a CUDA torch from PyPI with its nvidia wheels takes ~5 GB).
#   2. the interpreter tests (INTERPRETER_TESTS below: Triton kernels run on CPU under TRITON_INTERPRET=1, as the
#      full suite runs them without a GPU), and, at the same time in a second process,
#   3. an sm_90a compile of every shipped kernel variant (COMPILE_CHECKS below: scripts/compile_check*.py, no GPU).
# Logs go to $MATRIX_DIR/torch-<version>.{setup,tests,compile}.log. Prints a summary (times, failed tests, failed
# compile checks) and exits non-zero if any stack failed.
set -uo pipefail
cd "$(dirname "$0")/.."
MATRIX_DIR=${MATRIX_DIR:-.matrix}
if [ $# -gt 0 ]; then STACKS=("$@"); else STACKS=(2.11.0 2.12.1 2.15.0); fi
export PIP_CONSTRAINT=/dev/null

# The test modules that launch Triton kernels (in the interpreter on CPU), plus the ones that compile sm_90a
# kernels in a subprocess and check what ptxas made of them.
INTERPRETER_TESTS=(
  tests/test_attention_triton.py tests/test_bf16_gemm_triton.py tests/test_einsum_triton.py
  tests/test_fp8_gemm_triton.py tests/test_hyperconnection_triton.py tests/test_layout_triton.py
  tests/test_interpreter_bf16.py tests/test_bf16_masked_ws.py tests/test_fp8_moe_walk.py tests/test_compat_legacy.py
  tests/test_launch_fast.py tests/test_launch_plan.py tests/test_layout_host_path.py tests/test_first_import.py
  tests/test_fp8_ws_barriers.py tests/test_prefill_ws_compile.py tests/test_ws_kernel_compile.py
)
# Every kernel the package ships, compiled for sm_90a (one command per line).
COMPILE_CHECKS=(
  "scripts/compile_check.py"
  "scripts/compile_check.py --ws"
  "scripts/compile_check.py --bf16"
  "scripts/compile_check.py --bf16-ws"
  "scripts/compile_check_einsum.py"
  "scripts/compile_check_hc.py"
  "scripts/compile_check_indexer.py"
  "scripts/compile_check_indexer.py --ws"
  "scripts/compile_check_legacy.py"
  "scripts/compile_check_fp8.py --psum"
)

mkdir -p "$MATRIX_DIR"
now() { date +%s; }

compile_checks() {  # $1: the venv's python. Every check runs; prints one "ok"/"FAIL" line per check.
  local py=$1 check start rc status=0
  for check in "${COMPILE_CHECKS[@]}"; do
    start=$(now)
    # shellcheck disable=SC2086  # the check's arguments
    env -u TRITON_INTERPRET "$py" $check > "$MATRIX_DIR/check.out" 2>&1
    rc=$?
    # --bf16-ws reports a variant that does not compile as FAILED and goes on.
    if [ $rc -eq 0 ] && grep -q " FAILED " "$MATRIX_DIR/check.out"; then rc=1; fi
    cat "$MATRIX_DIR/check.out"
    if [ $rc -eq 0 ]; then
      echo "== ok   $check ($(( $(now) - start )) s)"
    else
      echo "== FAIL $check (exit $rc, $(( $(now) - start )) s)"
      status=1
    fi
  done
  rm -f "$MATRIX_DIR/check.out"
  return $status
}

summary=()
failed=0
total_start=$(now)
for stack in "${STACKS[@]}"; do
  venv="$MATRIX_DIR/torch-$stack"
  log="$MATRIX_DIR/torch-$stack"
  echo "=== stack torch $stack: setting up $venv"
  start=$(now)
  if ! VENV="$venv" TORCH_VERSION="$stack" VENV_SYSTEM=0 bash scripts/setup_env.sh > "$log.setup.log" 2>&1; then
    cat "$log.setup.log"
    summary+=("torch $stack: SETUP FAILED after $(( $(now) - start )) s (see $log.setup.log)")
    failed=1
    continue
  fi
  tail -1 "$log.setup.log"
  setup_s=$(( $(now) - start ))
  versions=$("$venv/bin/python" -c 'import torch, triton, numpy; print(f"torch {torch.__version__}, triton {triton.__version__}, numpy {numpy.__version__}")')

  start=$(now)
  ( compile_checks "$venv/bin/python" > "$log.compile.log" 2>&1 ) &
  compile_pid=$!
  TRITON_INTERPRET=1 "$venv/bin/python" -m pytest "${INTERPRETER_TESTS[@]}" -q -p no:cacheprovider -rfE \
    > "$log.tests.log" 2>&1
  tests_rc=$?
  tests_s=$(( $(now) - start ))
  wait "$compile_pid"
  compile_rc=$?
  checks_s=$(( $(now) - start ))

  tail -1 "$log.tests.log"
  grep "^== " "$log.compile.log"
  result="ok"
  if [ $tests_rc -ne 0 ] || [ $compile_rc -ne 0 ]; then result="FAILED"; failed=1; fi
  summary+=("torch $stack ($versions): $result; setup ${setup_s} s, interpreter tests ${tests_s} s, tests and compile checks ${checks_s} s")
  summary+=("  tests: $(tail -1 "$log.tests.log" | sed 's/^=* *//; s/ *=*$//')")
  while IFS= read -r line; do summary+=("  $line"); done < <(grep -E "^(FAILED|ERROR) " "$log.tests.log")
  while IFS= read -r line; do summary+=("  compile: $line"); done < <(grep "^== FAIL" "$log.compile.log" | sed 's/^== //')
  if [ "${MATRIX_DISCARD:-0}" = 1 ]; then rm -rf "$venv"; fi
done

echo
echo "=== support matrix ($(( $(now) - total_start )) s)"
printf '%s\n' "${summary[@]}"
exit $failed
