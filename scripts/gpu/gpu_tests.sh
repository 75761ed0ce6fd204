#!/usr/bin/env bash
# Every GPU-marked test file at once, each in its own pytest process under one time limit: correctness only (no
# timing), so the processes share the GPU and the cold Triton compiles use every CPU core. Writes $OUT/gpu_tests/.
# Expected wall time: ~4-5 minutes cold (compiles), ~2 warm. GPU_TEST_TIMEOUT bounds each file (default 270 s).
# K_<test file name>="expr" passes `-k expr` to that file (e.g. K_test_fp8_gemm_gpu="psum or masked").
# GPU_TEST_SHARDS=N splits every file of more than GPU_TEST_SHARD_MIN (100) tests into N processes (round robin
# over its collected tests): a large file's cold compiles then use N cores instead of one.
set -uo pipefail
D=$OUT/gpu_tests; mkdir -p "$D"
files=${GPU_TEST_FILES:-$(grep -l "mark.gpu" tests/test_*.py)}
shards=${GPU_TEST_SHARDS:-1}
run_one() {  # run_one LOG_NAME PYTEST_ARGS...
  local name=$1; shift
  local start=$(date +%s)
  timeout "${GPU_TEST_TIMEOUT:-270}" python3 -m pytest "$@" -q -p no:cacheprovider -rfE --durations=5 \
    > "$D/$name.log" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - start )) s: $(grep -E '[0-9]+ (passed|failed)' "$D/$name.log" | tail -1)" \
    >> "$D/summary.txt"
}
for f in $files; do
  name=$(basename "$f" .py)
  kvar=K_$name; kexpr=${!kvar:-}
  if [ "$shards" -gt 1 ]; then
    python3 -m pytest --collect-only -q -p no:cacheprovider "$f" ${kexpr:+-k "$kexpr"} 2>/dev/null \
      | grep "::" > "$D/$name.ids"
  fi
  if [ "$shards" -gt 1 ] && [ "$(wc -l < "$D/$name.ids")" -gt "${GPU_TEST_SHARD_MIN:-100}" ]; then
    for s in $(seq 0 $(( shards - 1 ))); do
      awk -v n="$shards" -v s="$s" '(NR - 1) % n == s' "$D/$name.ids" > "$D/$name.ids.$s"
      # Node ids are passed one per argument (parametrised ids may hold characters the shell would split on).
      mapfile -t ids < "$D/$name.ids.$s"
      run_one "$name.$s" "${ids[@]}" &
    done
  else
    run_one "$name" "$f" ${kexpr:+-k "$kexpr"} &
  fi
done
wait
sort "$D/summary.txt"
