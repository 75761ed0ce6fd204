#!/usr/bin/env bash
# MoE FP8 batch, run from the repository root by scripts/gpu/all.sh with OUT set; writes $OUT/moe/.
#   FAMILIES=moe FAMILY_TIMEOUT=600 bash scripts/gpu/all.sh
# Expected wall time, warm caches (.cache carried, DeepGEMM's JIT cache in .cache/dg-jit): ~4-5 min; every step has
# its own limit (worst case ~10 min). The first run after a change to kernels/fp8_gemm_ws.py recompiles every
# warp-specialised variant (Triton's cache is keyed by the source): step 1 compiles the MoE ones in 8 threads, so
# the later steps find them built. A failure never stops the rest. In order:
#   1. the scheduling sweep (benchmarks/sweeps/sweep_moe_schedule.py): DeepGEMM's psum, masked-through-psum and
#      masked rows, each with the shipped plan, the carried tile walk, 16-row rasters and 128 x 192 tiles, and the
#      expert-id layout; correctness checked per variant; one line per variant, a geomean per layout; ~60 kernel
#      builds cold (8 threads), which the next steps reuse (<= 200 s)
#   2. the same-call yardstick: DeepGEMM's own tests/test_fp8_fp4.py MoE functions (contiguous: psum and expert
#      ids; masked: masked and through psum; K-grouped) against ours (SHIM=0) and then against DeepGEMM, one timer
#      (run_dg_tests.py), every MOE_STRIDE-th row (default 2: 8 + 16 + 3 rows), paired by compare_perf_lines.py
#      (DeepGEMM time / ours, > 1: ours faster); each side of each function capped at MOE_DG_LIMIT s (45)
#   3. the GPU tests of the walk (tests/test_fp8_gemm_gpu.py: walk vs scan bit-identical, empty groups; ~18
#      kernel builds cold) (<= 150 s)
# MOE_PARTS=dense (not a default part; e.g. MOE_PARTS="dense" or "sweep dg walk dense"): the dense FP8 levers of
#   the sweep (benchmarks/sweeps/sweep_fp8_configs.py: M=4096 1D2D tiles / ring depth / register budgets, the 1D1D
#   wgrad budgets and its row tail's split-K configs), each variant checked then timed, after DeepGEMM's own
#   bench_fp8_gemm.py --quick --tables dense,1d1d run for the same-run ratio; ~3 min warm, ~6-7 min cold (every
#   forced warp-specialised variant is a build of its own, 8 threads), capped at MOE_DENSE_LIMIT s (420) + 150;
#   MOE_DENSE_ONLY picks its sections (default dense4096,wgrad,wgrad_tail; e.g. wgrad,wgrad_tail first).
# MOE_FULL=1 adds the FP8 grouped GPU tests, the bench_fp8_gemm --tables moe pair and host times per call (~4 min);
# MOE_SANITIZE=1 scripts/gpu/sanitize.sh (~3 min). MOE_DG_FUNCS overrides step 2's functions.
set -uo pipefail
D=${OUT:?set OUT}/moe
mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
DGENV="PYTHONPATH=$PWD/.dg/DeepGEMM LD_PRELOAD=/lib/x86_64-linux-gnu/libstdc++.so.6"
have_dg() { [ -d .dg/DeepGEMM ] && ls .dg/DeepGEMM/deep_gemm/_C*.so > /dev/null 2>&1; }
# MOE_PARTS picks steps 1-3 (default: all three): sweep dg walk; "rerun" (not a default part, ~1-2 min) re-runs the
# GPU tests that the 2026-12-02 changes touch (the masked walk test, psum on the default plan, now with the walk).
PARTS=" ${MOE_PARTS:-sweep dg walk} "
has() { [[ "$PARTS" == *" $1 "* ]]; }
step() { echo "== $1 ($(date +%T))"; }
DGT=scripts/dg; [ -f "$DGT/compare_perf_lines.py" ] || DGT=.dg/tools

if has sweep; then
step "1. scheduling sweep (ours, same process, same timer)"
timeout 200 python3 benchmarks/sweeps/sweep_moe_schedule.py --out "$D/sweep" > "$D/sweep.log" 2>&1
echo "sweep exit $?"
grep -E "^ (>|!)|best|geomean|^ (psum|masked)|compiled|WRONG|DIFFERENT|Error|VERDICT" "$D/sweep.log" | tail -n 100

fi

if has dg; then
step "2. DeepGEMM's MoE tests, ours (SHIM=0) then DeepGEMM, same timer"
T=test_fp8_fp4
ALL="$T:test_m_grouped_gemm_contiguous $T:test_m_grouped_gemm_masked $T:test_k_grouped_gemm_contiguous"
FUNCS=${MOE_DG_FUNCS:-$ALL}
LIMIT=${MOE_DG_LIMIT:-45}
if [ -d .dg/DeepGEMM/tests ]; then
  for f in $FUNCS; do
    name=${f#*:}
    start=$(date +%s)
    SHIM=0 RUN_REPS=4 ROW_STRIDE=${MOE_STRIDE:-2} timeout "$LIMIT" \
      python3 scripts/gpu/run_dg_rows.py .dg/DeepGEMM/tests "$f" > "$D/dg_tests_ours_$name.log" 2>&1
    echo "ours $name: exit $? in $(( $(date +%s) - start )) s;" \
      "$(grep -c '> Perf' "$D/dg_tests_ours_$name.log") rows"
    grep -E "### (PASS|FAIL)|Error|SHIMMED \[\"" "$D/dg_tests_ours_$name.log" | head -5
    if have_dg; then
      start=$(date +%s)
      SHIM=0 RUN_REPS=4 ROW_STRIDE=${MOE_STRIDE:-2} timeout "$LIMIT" env $DGENV \
        python3 scripts/gpu/run_dg_rows.py .dg/DeepGEMM/tests "$f" > "$D/dg_tests_dg_$name.log" 2>&1
      echo "DeepGEMM $name: exit $? in $(( $(date +%s) - start )) s;" \
        "$(grep -c '> Perf' "$D/dg_tests_dg_$name.log") rows"
      # (a DeepGEMM side that imported this repository's package would make the pairing meaningless)
      grep -h "run_dg_rows: deep_gemm from" "$D/dg_tests_ours_$name.log" "$D/dg_tests_dg_$name.log"
      python3 "$DGT/compare_perf_lines.py" "$D/dg_tests_ours_$name.log" "$D/dg_tests_dg_$name.log" \
        > "$D/dg_compare_$name.txt" 2>&1
      cat "$D/dg_compare_$name.txt"
    fi
  done
  have_dg || echo "DeepGEMM not built here (.dg/DeepGEMM/deep_gemm/_C*.so missing): our side only"
else
  echo "no .dg/DeepGEMM/tests here (carry .dg)"
fi

fi

if has walk; then
step "3. GPU tests of the carried tile walk"
timeout 150 python3 -m pytest tests/test_fp8_gemm_gpu.py -q -p no:cacheprovider > "$D/pytest_walk.log" 2>&1
echo "pytest exit $?: $(tail -n 1 "$D/pytest_walk.log")"
grep -E "^(FAILED|ERROR)" "$D/pytest_walk.log" | head -20

fi

if has rerun; then  # (MOE_PARTS=rerun: not in the default parts)
step "re-run: the fixed masked walk test; psum on the default plan, which now walks (gemm/fp8/plan.py TILE_WALK)"
timeout 150 python3 -m pytest tests/test_fp8_gemm_gpu.py -q -p no:cacheprovider \
  -k "masked_walk_matches_scan or psum_tiles_stay_inside or contiguous_with_empty_groups" > "$D/pytest_rerun.log" 2>&1
echo "pytest exit $?: $(tail -n 1 "$D/pytest_rerun.log")"
grep -E "^(FAILED|ERROR)" "$D/pytest_rerun.log" | head -20

fi

if has dense; then  # (MOE_PARTS=dense: not in the default parts)
step "dense FP8 levers: DeepGEMM's dense rows, then every forced variant of ours, same timer"
if have_dg; then
  start=$(date +%s)
  timeout 150 env $DGENV python3 benchmarks/bench_fp8_gemm.py --quick --tables dense,1d1d --out "$D/dense_dg" \
    > "$D/dense_dg.log" 2>&1
  # (the sweep reads only its ' > M=' rows: a non-zero exit after them, e.g. from the metadata, is harmless)
  echo "DeepGEMM dense bench: exit $? in $(( $(date +%s) - start )) s; $(grep -c '> M=' "$D/dense_dg.log") rows"
else
  echo "DeepGEMM not built here: ratios are to benchmarks/shapes.py's 2026-11-29 DeepGEMM figures"
fi
start=$(date +%s)
# (SIGINT at the limit: the sweep still writes its JSON, its summary and its verdict)
timeout -s INT -k 30 "${MOE_DENSE_LIMIT:-420}" python3 benchmarks/sweeps/sweep_fp8_configs.py --out "$D/dense" \
  --only "${MOE_DENSE_ONLY:-dense4096,wgrad,wgrad_tail}" \
  --dg-log "$D/dense_dg.log" > "$D/dense_sweep.log" 2>&1
echo "dense sweep exit $? in $(( $(date +%s) - start )) s"
grep -E "^ !|^geomean|^best|^built|VERDICT|Error" "$D/dense_sweep.log" | tail -n 80

fi

if [ "${MOE_FULL:-0}" = 1 ]; then
  step "4. FP8 grouped GPU tests"
  timeout 150 python3 -m pytest tests/test_fp8_gemm_gpu.py -q -p no:cacheprovider \
    -k "psum or m_grouped or masked or k_grouped or backend_is_triton" > "$D/pytest.log" 2>&1
  echo "pytest exit $?: $(tail -n 1 "$D/pytest.log")"
  grep -E "^(FAILED|ERROR)" "$D/pytest.log" | head -20
  step "5. MoE benchmark rows, ours and DeepGEMM"
  timeout 120 python3 benchmarks/bench_fp8_gemm.py --tables moe --out "$D/bench_ours" > "$D/bench_ours.log" 2>&1
  echo "ours exit $?"
  if have_dg; then
    timeout 120 env $DGENV python3 benchmarks/bench_fp8_gemm.py --tables moe --out "$D/bench_dg" \
      > "$D/bench_dg.log" 2>&1
    echo "DeepGEMM exit $?"
    python3 benchmarks/compare_providers.py "$D/bench_ours/bench_fp8_moe.json" "$D/bench_dg/bench_fp8_moe.json" \
      --out "$D/bench_compare.md" 2>&1 | tail -n 30
  fi
  step "6. host time per call"
  timeout 60 python3 benchmarks/host_overhead.py --out "$D/host_ours" > "$D/host_ours.log" 2>&1
  have_dg && timeout 60 env $DGENV python3 benchmarks/host_overhead.py --out "$D/host_dg" > "$D/host_dg.log" 2>&1
  paste <(grep -E "us/call|ERR" "$D/host_ours.log") \
    <(grep -E "us/call|ERR" "$D/host_dg.log" 2>/dev/null | awk '{print "| DeepGEMM", $(NF-1)}')
fi

if [ "${MOE_SANITIZE:-0}" = 1 ]; then
  step "compute-sanitizer"
  SANITIZE_ONLY=fp8/ bash scripts/gpu/sanitize.sh
  cp -r "$OUT/sanitize" "$D/" 2>/dev/null
fi
step "done"
