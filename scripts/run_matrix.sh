#!/usr/bin/env bash
# The support matrix's fast checks on the stacks other than the default one, each in a venv of its own:
#
#   bash scripts/run_matrix.sh                  # torch 2.11.0, 2.12.1 and 2.15.0, each with the Triton it pins
#   bash scripts/run_matrix.sh 2.15.0 2.13.0    # the stacks named by their (exact) torch version
#   bash scripts/run_matrix.sh --setup [STACK ...]   # only build the venvs (a later run reuses them)
#
# Per stack:
#   * setup: scripts/setup_env.sh with TORCH_VERSION=<version> and VENV=$MATRIX_DIR/torch-<version> (default
#     MATRIX_DIR=.matrix): torch from the package index, then the Triton torch pins; an existing venv of that stack
#     is reused. pip runs with PIP_CONSTRAINT=/dev/null: the matrix installs exact versions, which a machine-wide
#     constraints file (pip's `constraint` setting, e.g. a cap on torch) must not veto. MATRIX_DISCARD=1 removes
#     the venv once its checks are done (a CUDA torch from PyPI with its nvidia wheels takes ~5 GB).
#   * the interpreter tests (INTERPRETER_TESTS: Triton kernels run on CPU under TRITON_INTERPRET=1, as the full suite
#     runs them without a GPU, and the tests that compile sm_90a kernels and check what ptxas made of them), every
#     test function with its first MATRIX_SAMPLE parametrisations and its last (default 1; 0: every case): what a
#     new torch or Triton breaks is an API or a compile, which one case of each function meets; the full suite runs
#     every case on the default stack;
#   * an sm_90a compile of every shipped kernel variant (COMPILE_CHECKS: scripts/compile_check*.py, no GPU needed),
#     their pass / fail as on any machine, the SASS dumped only where a variant uses local memory
#     (COMPILE_CHECK_SASS=0).
# The checks run as separate jobs, MATRIX_JOBS at a time (default: the number of CPUs), and the next stack is set up
# while the current one is checked. Logs: $MATRIX_DIR/torch-<version>/*.log. Prints a summary (wall and CPU time per
# stack and per job, failed tests, failed compile checks) and exits non-zero if any stack failed.
set -uo pipefail
cd "$(dirname "$0")/.."
MATRIX_DIR=${MATRIX_DIR:-.matrix}
# (nproc without the OpenMP variables: nproc reports OMP_NUM_THREADS when it is set, and CI sets it to 1)
JOBS=${MATRIX_JOBS:-$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || echo 2)}
# The jobs fill every core between them: one OpenMP / BLAS thread each (spinning worker threads of one job would
# wait on cores the others hold).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} \
  MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}
export PIP_CONSTRAINT=/dev/null

# Interpreter test modules, longest job first (the jobs start in this order, so the short ones pack around it): the
# Mega MoE / mHC / gate layers, then the GEMM families and the rest, then attention and einsum.
INTERPRETER_TESTS=(
  "tests/test_mega_moe_kernels_cpu.py tests/test_mega_moe_bf16_kernels_cpu.py tests/test_mega_moe_fp8_fp4_kernels_cpu.py
   tests/test_mega_moe_ranks_cpu.py tests/test_mega_mhc_kernels_cpu.py tests/test_mega_gate_kernels_cpu.py"
  "tests/test_bf16_gemm_cpu.py tests/test_fp8_gemm_cpu.py tests/test_hyperconnection_cpu.py
   tests/test_layout_cpu.py tests/test_interpreter_bf16.py tests/test_interpreter_masks.py
   tests/test_compat_legacy.py tests/test_launch_fast.py tests/test_launch_plan.py tests/test_layout_host_path_cpu.py
   tests/test_first_import.py tests/test_ws_kernel_compile.py tests/test_sparse_mqa_kernels_cpu.py
   tests/test_mqa_metadata_kernel_cpu.py tests/test_fp4_gemm_kernels_cpu.py"
  "tests/test_attention_cpu.py"
  "tests/test_einsum_cpu.py"
)
# Every kernel the package ships, compiled for sm_90a, longest first.
COMPILE_CHECKS=(
  "scripts/compile_check_einsum.py"
  "scripts/compile_check_indexer.py"
  "scripts/compile_check.py --ws"
  "scripts/compile_check.py --bf16-ws"
  "scripts/compile_check.py --bf16"
  "scripts/compile_check_hc.py"
  "scripts/compile_check.py"
  "scripts/compile_check_fp8.py --psum"
  "scripts/compile_check_legacy.py"
  "scripts/compile_check_mega.py"
  "scripts/compile_check_sparse_mqa.py"
  "scripts/compile_check_fp4.py"
  "scripts/compile_check_mega_mhc.py"
  "scripts/compile_check_mega_gate.py"
)

now() { date +%s; }

if [ "${1:-}" = --job ]; then
  # One check: --job VENV_DIR KIND ARGS... (KIND: tests or compile). Appends "ok|FAIL KIND ARGS | wall cpu" to
  # VENV_DIR.results and writes the check's output to VENV_DIR.logs/<name>.log.
  venv=$2 kind=$3
  shift 3
  what="$kind $*"
  if [ "$kind" = tests ] && [ $# -gt 1 ]; then what="tests $1 and $(( $# - 1 )) more modules"; fi
  name=$(echo "$kind $*" | tr -c 'A-Za-z0-9_.-' '_' | sed 's/_*$//')
  if [ "$kind" = tests ]; then name=$(echo "$kind $1" | tr -c 'A-Za-z0-9_.-' '_' | sed 's/_*$//'); fi
  log="$venv.logs/$name.log"
  times="$venv.logs/$name.time"
  TIMEFORMAT="%R %U %S"
  if [ "$kind" = tests ]; then
    # shellcheck disable=SC2068  # the test modules, one word each
    sample=${MATRIX_SAMPLE:-1}
    [ "$sample" = 0 ] && sample=
    { time TRITON_INTERPRET=1 DG_TEST_SAMPLE=$sample "$venv/bin/python" -m pytest $@ -q -p no:cacheprovider -rfE \
        > "$log" 2>&1 ; \
      echo $? > "$log.rc" ; } 2> "$times"
  else
    # shellcheck disable=SC2068  # the script and its arguments
    # (COMPILE_CHECK_SASS=0: the SASS is dumped only where a variant uses local memory, whose LDL / STL the checks'
    # pass / fail reads; compile_check.sass_counts)
    { time env -u TRITON_INTERPRET COMPILE_CHECK_SASS=0 "$venv/bin/python" $@ > "$log" 2>&1 ; echo $? > "$log.rc" ; } \
      2> "$times"
  fi
  status=ok
  if [ "$(cat "$log.rc")" != 0 ]; then status=FAIL; fi
  # pytest exits 5 when it collects nothing (caught above); a run that passes no test fails too.
  if [ "$kind" = tests ] && ! tail -1 "$log" | grep -Eq "[0-9]+ passed"; then status=FAIL; fi
  # compile_check.py --bf16-ws reports a variant that does not compile as FAILED and goes on.
  if [ "$kind" = compile ] && grep -q " FAILED " "$log"; then status=FAIL; fi
  rm -f "$log.rc"
  awk -v status="$status" -v what="$what" '{printf "%s %s | %.0f s, CPU %.0f s\n", status, what, $1, $2 + $3}' \
    "$times" | tr -s ' ' >> "$venv.results"
  exit 0
fi

SETUP_ONLY=0
if [ "${1:-}" = --setup ]; then SETUP_ONLY=1; shift; fi
if [ $# -gt 0 ]; then STACKS=("$@"); else STACKS=(2.11.0 2.12.1 2.15.0); fi
mkdir -p "$MATRIX_DIR"

setup() {  # $1: stack. Writes $venv.setup.log and $venv.setup (the seconds it took, or "failed").
  local venv="$MATRIX_DIR/torch-$1" start
  start=$(now)
  if VENV="$venv" TORCH_VERSION="$1" VENV_SYSTEM=0 bash scripts/setup_env.sh > "$venv.setup.log" 2>&1; then
    echo $(( $(now) - start )) > "$venv.setup"
  else
    echo failed > "$venv.setup"
  fi
}

if [ "$SETUP_ONLY" = 1 ]; then
  status=0
  for stack in "${STACKS[@]}"; do
    setup "$stack"
    took=$(cat "$MATRIX_DIR/torch-$stack.setup")
    if [ "$took" = failed ]; then
      status=1
      echo "torch $stack: setup failed (see $MATRIX_DIR/torch-$stack.setup.log)"
    else
      echo "torch $stack: set up in $took s"
    fi
  done
  exit $status
fi

summary=()
failed=0
total_start=$(now)
for stack in "${STACKS[@]}"; do rm -f "$MATRIX_DIR/torch-$stack.setup"; done
setup "${STACKS[0]}" &
setup_pid=$!
for i in "${!STACKS[@]}"; do
  stack=${STACKS[$i]}
  venv="$MATRIX_DIR/torch-$stack"
  echo "=== stack torch $stack"
  wait "$setup_pid"
  if [ $(( i + 1 )) -lt ${#STACKS[@]} ]; then  # set the next stack up while this one is checked
    setup "${STACKS[$(( i + 1 ))]}" &
    setup_pid=$!
  fi
  setup_s=$(cat "$venv.setup")
  if [ "$setup_s" = failed ]; then
    grep -v "is ignored: it is neither" "$venv.setup.log"
    summary+=("torch $stack: SETUP FAILED (see $venv.setup.log)")
    failed=1
    continue
  fi
  tail -1 "$venv.setup.log"
  versions=$("$venv/bin/python" -c 'import torch, triton, numpy; print(f"torch {torch.__version__}, triton {triton.__version__}, numpy {numpy.__version__}")')

  rm -rf "$venv.logs" "$venv.results"
  mkdir -p "$venv.logs"
  start=$(now)
  {
    for tests in "${INTERPRETER_TESTS[@]}"; do echo "$venv tests" $tests; done
    for check in "${COMPILE_CHECKS[@]}"; do echo "$venv compile $check"; done
  } | xargs -P "$JOBS" -L 1 bash scripts/run_matrix.sh --job
  checks_s=$(( $(now) - start ))
  cpu_s=$(sed 's/.*CPU \([0-9]*\) s$/\1/' "$venv.results" | awk '{t += $1} END {print t}')
  cat "$venv.results"

  result=ok
  if grep -q "^FAIL" "$venv.results" || [ "$(wc -l < "$venv.results")" -ne $(( ${#INTERPRETER_TESTS[@]} + ${#COMPILE_CHECKS[@]} )) ]; then
    result=FAILED
    failed=1
  fi
  summary+=("torch $stack ($versions): $result; setup ${setup_s} s, checks ${checks_s} s (CPU ${cpu_s} s)")
  # Failed tests, per module: how many, and the first test functions.
  while IFS= read -r line; do summary+=("  $line"); done < <(
    cat "$venv.logs"/tests_*.log | grep -E "^(FAILED|ERROR) " | sed -E 's/^(FAILED|ERROR) ([^ ]*).*/\2/; s/\[.*//' \
      | awk -F'::' '{n[$1]++; if (!seen[$0]++) { k[$1]++; if (k[$1] <= 3) f[$1] = f[$1] " " $2; else more[$1] = " ..." } }
                    END {for (m in n) print m ": " n[m] " failed:" f[m] more[m]}' | sort)
  # Failed compile checks, with the error each stopped at (the root cause of a chained Triton compile error).
  exception='^[A-Za-z_][A-Za-z0-9_.]*(Error|Exception)\b[:(]'
  while IFS= read -r line; do
    check=$(echo "$line" | sed -E 's/^FAIL compile (.*) \| .*/\1/')
    log="$venv.logs/$(echo "compile $check" | tr -c 'A-Za-z0-9_.-' '_' | sed 's/_*$//').log"
    error=$(grep -E "$exception" "$log" | grep -v "^triton.compiler.errors.CompilationError" | head -1)
    [ -n "$error" ] || error=$(grep -E "$exception" "$log" | head -1)
    [ -n "$error" ] || error=$(grep -m1 "^FAIL" "$log")
    variants=$(grep -c " FAILED " "$log")
    if [ "$variants" -gt 0 ]; then error="$variants variants FAILED, the first: $(grep -m1 " FAILED " "$log")"; fi
    summary+=("  compile $check: $(echo "$error" | cut -c1-200)")
  done < <(grep "^FAIL compile" "$venv.results")
  if [ "${MATRIX_DISCARD:-0}" = 1 ]; then rm -rf "$venv"; fi
done
wait

echo
echo "=== support matrix: ${#STACKS[@]} stacks in $(( $(now) - total_start )) s"
printf '%s\n' "${summary[@]}"
exit $failed
