#!/usr/bin/env bash
# Every GPU-marked test file at once, each in its own pytest process under one time limit: correctness only (no
# timing), so the processes share the GPU and the cold Triton compiles use every CPU core. Writes $OUT/gpu_tests/.
# Expected wall time: ~4-5 minutes cold (compiles), ~2 warm. GPU_TEST_TIMEOUT bounds each file (default 270 s).
# K_<test file name>="expr" passes `-k expr` to that file (e.g. K_test_fp8_gemm_gpu="psum or masked").
set -uo pipefail
D=$OUT/gpu_tests; mkdir -p "$D"
files=${GPU_TEST_FILES:-$(grep -l "mark.gpu" tests/test_*.py)}
for f in $files; do
  name=$(basename "$f" .py)
  kvar=K_$name; kexpr=${!kvar:-}
  ( start=$(date +%s)
    timeout "${GPU_TEST_TIMEOUT:-270}" python3 -m pytest "$f" -q -p no:cacheprovider -rfE --durations=5 ${kexpr:+-k "$kexpr"} \
      > "$D/$name.log" 2>&1
    echo "$name: exit $? in $(( $(date +%s) - start )) s: $(grep -E '[0-9]+ (passed|failed)' "$D/$name.log" | tail -1)" \
      >> "$D/summary.txt" ) &
done
wait
sort "$D/summary.txt"
