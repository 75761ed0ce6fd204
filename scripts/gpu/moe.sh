#!/usr/bin/env bash
# MoE FP8 batch (issue 18), run from the repository root by scripts/gpu/all.sh (FAMILIES=moe) with OUT set; writes
# $OUT/moe/. Expected wall time with warm caches (.cache carried): ~4 min; cold Triton compiles add ~1 min.
#   1. GPU tests: the FP8 grouped / psum / masked / K-grouped tests and the warp-specialised variants (~60 s)
#   2. the MoE benchmark rows, ours and DeepGEMM in the same call, same timer (benchmarks/bench_fp8_gemm.py
#      --tables moe: psum with and without zero padding, expert ids, masked, masked decode through psum) (~70 s)
#   3. DeepGEMM's tests/test_fp8_fp4.py grouped functions against ours (SHIM=0) and against DeepGEMM (~90 s)
#   4. host time per call, both packages (~25 s)
# Each step has its own timeout; a failure never stops the rest. MOE_SANITIZE=1 also runs scripts/gpu/sanitize.sh
# (~3 min more). MOE_DG_FUNCS overrides the DeepGEMM test functions run in step 3.
set -uo pipefail
D=${OUT:?set OUT}/moe
mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
DGENV="PYTHONPATH=$PWD/.dg/DeepGEMM LD_PRELOAD=/lib/x86_64-linux-gnu/libstdc++.so.6"
have_dg() { [ -d .dg/DeepGEMM ] && ls .dg/DeepGEMM/deep_gemm/_C*.so > /dev/null 2>&1; }
step() { echo "== $1 ($(date +%T))"; }

step "1. GPU tests"
timeout 150 python3 -m pytest tests/test_fp8_gemm_gpu.py -q -p no:cacheprovider \
  -k "psum or m_grouped or masked or k_grouped or backend_is_triton or warp_specialised_variants and 129" \
  > "$D/pytest.log" 2>&1
echo "pytest exit $?: $(tail -n 1 "$D/pytest.log")"
grep -E "^(FAILED|ERROR)" "$D/pytest.log" | head -20

step "2. MoE benchmark rows, ours and DeepGEMM"
timeout 110 python3 benchmarks/bench_fp8_gemm.py --tables moe --out "$D/bench_ours" > "$D/bench_ours.log" 2>&1
echo "ours exit $?"; grep -E "^ > |Error|error" "$D/bench_ours.log" | head -30
if have_dg; then
  timeout 110 env $DGENV python3 benchmarks/bench_fp8_gemm.py --tables moe --out "$D/bench_dg" > "$D/bench_dg.log" 2>&1
  echo "DeepGEMM exit $?"; grep -E "Error|error" "$D/bench_dg.log" | head -5
  python3 benchmarks/compare_providers.py "$D/bench_ours/bench_fp8_moe.json" "$D/bench_dg/bench_fp8_moe.json" \
    --out "$D/bench_compare.md" 2>&1 | tail -n 30
else
  echo "DeepGEMM not built here (.dg/DeepGEMM/deep_gemm/_C*.so missing): no side-by-side"
fi

step "3. DeepGEMM's grouped FP8 tests, ours (SHIM=0) and DeepGEMM"
FUNCS=${MOE_DG_FUNCS:-"test_fp8_fp4:test_m_grouped_gemm_contiguous test_fp8_fp4:test_m_grouped_gemm_masked test_fp8_fp4:test_k_grouped_gemm_contiguous"}
if [ -d .dg/DeepGEMM/tests ]; then
  for f in $FUNCS; do
    name=${f#*:}
    SHIM=0 RUN_REPS=4 timeout 75 python3 .dg/tools/run_dg_tests.py .dg/DeepGEMM/tests "$f" > "$D/dg_tests_ours_$name.log" 2>&1
    echo "ours $name: exit $?; $(grep -cE "PASS" "$D/dg_tests_ours_$name.log") PASS, $(grep -cE "FAIL" "$D/dg_tests_ours_$name.log") FAIL"
    grep -E "FAIL|Error" "$D/dg_tests_ours_$name.log" | head -5
  done
  if have_dg; then
    for f in $FUNCS; do
      name=${f#*:}
      SHIM=0 RUN_REPS=4 timeout 75 env $DGENV python3 .dg/tools/run_dg_tests.py .dg/DeepGEMM/tests "$f" > "$D/dg_tests_dg_$name.log" 2>&1
      echo "DeepGEMM $name: exit $?"
      python3 .dg/tools/compare_perf_lines.py "$D/dg_tests_ours_$name.log" "$D/dg_tests_dg_$name.log" > "$D/dg_compare_$name.txt" 2>&1
      grep GEOMEAN "$D/dg_compare_$name.txt"
    done
  fi
else
  echo "no .dg/DeepGEMM/tests here"
fi

step "4. host time per call"
timeout 60 python3 benchmarks/host_overhead.py --out "$D/host_ours" > "$D/host_ours.log" 2>&1
have_dg && timeout 60 env $DGENV python3 benchmarks/host_overhead.py --out "$D/host_dg" > "$D/host_dg.log" 2>&1
paste <(grep -E "us/call|ERR" "$D/host_ours.log") <(grep -E "us/call|ERR" "$D/host_dg.log" 2>/dev/null | awk '{print "| DeepGEMM", $(NF-1)}')

if [ "${MOE_SANITIZE:-0}" = 1 ]; then
  step "5. compute-sanitizer"
  SANITIZE_ONLY=fp8/ bash scripts/gpu/sanitize.sh
  cp -r "$OUT/sanitize" "$D/" 2>/dev/null
fi
step "done"
