#!/usr/bin/env bash
# Session 24, device call 3: correctness of everything changed this session (GPU tests + compute-sanitizer on the
# changed kernels, DeepGEMM's HC and layout tests against ours), then the HC/layout and host benchmarks against
# DeepGEMM in the same call, then the candidate sweeps (paged register levers, HC tall rows, BF16 N=576 tiles).
# Every result comes back in one tarball per part (the device returns at most 8 files).
set -uo pipefail
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=$PWD/.cache/triton DG_JIT_CACHE_DIR=$PWD/.cache/dg-jit
DGENV="PYTHONPATH=$PWD/.dg/DeepGEMM LD_PRELOAD=/lib/x86_64-linux-gnu/libstdc++.so.6"
T0=$(date +%s); t() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $OUT/summary.txt; }
pack() { tar -czf $REAL/$1.tgz -C /tmp o; }
bash scripts/gpu/setup_deepgemm.sh $OUT/dg-build.log > $OUT/dg-setup.log 2>&1; t "dg setup: $(tail -n1 $OUT/dg-setup.log)"

# 1. Correctness, tests and sanitizer side by side (neither measures time).
timeout ${TEST_LIMIT:-300} python3 -m pytest tests/test_hyperconnection_gpu.py tests/test_layout_gpu.py \
  tests/test_layout_host_path_gpu.py tests/test_eager_path_gpu.py tests/test_einsum_gpu.py ${EXTRA_TESTS:-} \
  -q -p no:cacheprovider -rf -x > $OUT/pytest_a.log 2>&1 &
P1=$!
(timeout 250 python3 -m pytest tests/test_attention_triton.py -m gpu -k "register_variants or paged" -q \
  -p no:cacheprovider -rf > $OUT/pytest_paged.log 2>&1; echo "exit $?" >> $OUT/pytest_paged.log) &
P2=$!
SANITIZE_ONLY="hc/ layout indexer/paged" SANITIZE_TOOLS="memcheck synccheck" SANITIZE_TIMEOUT=150 OUT=$OUT \
  bash scripts/gpu/sanitize.sh > $OUT/sanitize.log 2>&1
wait $P1; t "pytest a exit $?: $(tail -n1 $OUT/pytest_a.log)"
timeout 120 python3 -m pytest tests/test_bf16_gemm_triton.py -q -p no:cacheprovider -rf -k "tail_columns or forced_tiles" \
  > $OUT/pytest_bf16_tail.log 2>&1; t "pytest bf16 tail exit $?: $(tail -n1 $OUT/pytest_bf16_tail.log)"
wait $P2; t "pytest paged: $(tail -n2 $OUT/pytest_paged.log | tr '\n' ' ')"
t "sanitize: $(grep -E '^(memcheck|synccheck):' $OUT/sanitize.log | tr '\n' ' ')"
timeout 120 env SHIM=0 python3 scripts/dg/run_dg_tests.py .dg/DeepGEMM/tests test_hyperconnection \
  test_layout:test_sf_layout_kernels test_layout:test_k_grouped_sf_layout_kernels > $OUT/dg_tests_ours.log 2>&1
t "DeepGEMM HC+layout tests vs ours: exit $? $(grep -cE '^### PASS' $OUT/dg_tests_ours.log) pass $(grep -cE '^### FAIL' $OUT/dg_tests_ours.log) fail"
pack correctness

# 2. Benchmarks against DeepGEMM, same call.
timeout 90 python3 benchmarks/bench_hc_prenorm.py --out $OUT/hc_ours > $OUT/bench_hc_ours.log 2>&1; t "hc bench ours $?"
timeout 120 env $DGENV python3 benchmarks/bench_hc_prenorm.py --out $OUT/hc_dg > $OUT/bench_hc_dg.log 2>&1; t "hc bench dg $?"
python3 benchmarks/compare_providers.py $OUT/hc_ours/bench_hc_prenorm.json $OUT/hc_dg/bench_hc_prenorm.json \
  --out $OUT/hc_compare.md > $OUT/hc_compare.txt 2>&1
timeout 60 python3 benchmarks/host_overhead.py --out $OUT/host_ours > $OUT/host_ours.log 2>&1; t "host ours $?"
timeout 90 env $DGENV python3 benchmarks/host_overhead.py --out $OUT/host_dg > $OUT/host_dg.log 2>&1; t "host dg $?"
pack bench

# 3. Candidate sweeps (ours only).
timeout 100 python3 benchmarks/bench_mqa_logits.py --tables none --sweep-paged --out $OUT/paged_sweep \
  > $OUT/paged_sweep.log 2>&1; t "paged sweep $?"
timeout 100 python3 research/sweeps/hc_prenorm_sweep.py --tall-only --out $OUT/hc_tall > $OUT/hc_tall.log 2>&1
t "hc tall sweep $?"
timeout 90 python3 benchmarks/bench_einsum.py --tables none --sweep --sweep-parts bmk --out $OUT/einsum_sweep \
  > $OUT/einsum_sweep.log 2>&1; t "einsum bmk sweep $?"
[ -n "${BF16_SWEEP:-}" ] && { timeout 150 bash -c "$BF16_SWEEP" > $OUT/bf16_sweep.log 2>&1; t "bf16 sweep $?"; }
pack sweeps
cat $OUT/summary.txt; tail -n 4 $OUT/hc_compare.txt; grep -E "^best" $OUT/hc_tall.log
