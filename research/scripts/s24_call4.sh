#!/usr/bin/env bash
# Session 24, device call 4 (final): GPU tests and compute-sanitizer of everything changed after call 3 (BF16 and
# einsum plans, the paged default, the host-path branch), DeepGEMM's paged test against ours, then the benchmarks of
# those families against DeepGEMM (indexer and host in this call; BF16 against session 23's DeepGEMM JSON, its JIT
# takes ~200 s; einsum against call 2's DeepGEMM log).
set -uo pipefail
REAL=$OUT; export OUT=/tmp/o; mkdir -p $OUT
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=$PWD/.cache/triton DG_JIT_CACHE_DIR=$PWD/.cache/dg-jit
DGENV="PYTHONPATH=$PWD/.dg/DeepGEMM LD_PRELOAD=/lib/x86_64-linux-gnu/libstdc++.so.6"
T0=$(date +%s); t() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $OUT/summary.txt; }
pack() { tar -czf $REAL/$1.tgz -C /tmp o; }
bash scripts/gpu/setup_deepgemm.sh $OUT/dg-build.log > $OUT/dg-setup.log 2>&1; t "dg setup: $(tail -n1 $OUT/dg-setup.log)"
timeout 230 python3 -m pytest tests/test_bf16_gemm_gpu.py tests/test_einsum_gpu.py -q -p no:cacheprovider -rf \
  > $OUT/pytest_bf16_einsum.log 2>&1 &
P1=$!
(timeout 230 python3 -m pytest tests/test_eager_path_gpu.py tests/test_layout_host_path_gpu.py tests/test_layout_gpu.py \
  tests/test_hyperconnection_gpu.py -q -p no:cacheprovider -rf > $OUT/pytest_host.log 2>&1
 timeout 100 python3 -m pytest tests/test_attention_triton.py -m gpu -k paged -q -p no:cacheprovider -rf \
  > $OUT/pytest_paged.log 2>&1) &
P2=$!
timeout 200 python3 -m pytest tests/test_fp8_gemm_gpu.py -q -p no:cacheprovider -rf \
  -k "masked or psum or graph or thread or stream" > $OUT/pytest_fp8.log 2>&1 &
P3=$!
SANITIZE_ONLY="indexer/paged bf16/ einsum/ layout hc/" SANITIZE_TOOLS="memcheck synccheck" SANITIZE_TIMEOUT=110 \
  OUT=$OUT bash scripts/gpu/sanitize.sh > $OUT/sanitize.log 2>&1
wait $P1; t "pytest bf16+einsum exit $?: $(tail -n1 $OUT/pytest_bf16_einsum.log)"
wait $P2; t "pytest host: $(tail -n1 $OUT/pytest_host.log) | paged: $(tail -n1 $OUT/pytest_paged.log)"
wait $P3; t "pytest fp8 subset exit $?: $(tail -n1 $OUT/pytest_fp8.log)"
t "sanitize: $(grep -E '^(memcheck|synccheck):' $OUT/sanitize.log | tr '\n' ' ')"
timeout 60 env SHIM=0 python3 scripts/dg/run_dg_tests.py .dg/DeepGEMM/tests test_attention:test_paged_mqa_logits \
  > $OUT/dg_paged_ours.log 2>&1; t "DeepGEMM paged test vs ours: exit $? $(grep -E '^### (PASS|FAIL)' $OUT/dg_paged_ours.log | tr '\n' ' ')"
pack correctness
timeout 50 python3 benchmarks/bench_bf16_gemm.py --out $OUT/bf16_ours > $OUT/bf16_ours.log 2>&1; t "bf16 bench $?"
python3 benchmarks/compare_providers.py $OUT/bf16_ours/bench_bf16_gemm.json \
  research/results/2026-12-02-h200-s23-call1/bf16/bench_dg/bench_bf16_gemm.json --out $OUT/bf16_compare.md \
  > $OUT/bf16_compare.txt 2>&1
timeout 40 python3 benchmarks/bench_einsum.py --out $OUT/einsum_ours > $OUT/einsum_ours.log 2>&1; t "einsum ours $?"
timeout 40 python3 benchmarks/bench_mqa_logits.py --quick --out $OUT/mqa_ours > $OUT/mqa_ours.log 2>&1; t "mqa ours $?"
timeout 50 env $DGENV python3 benchmarks/bench_mqa_logits.py --quick --out $OUT/mqa_dg > $OUT/mqa_dg.log 2>&1; t "mqa dg $?"
python3 benchmarks/compare_providers.py $OUT/mqa_ours/bench_mqa_logits.json $OUT/mqa_dg/bench_mqa_logits.json \
  --out $OUT/mqa_compare.md > $OUT/mqa_compare.txt 2>&1
pack bench
timeout 45 python3 benchmarks/host_overhead.py --out $OUT/host_ours > $OUT/host_ours.log 2>&1; t "host ours $?"
timeout 50 env $DGENV python3 benchmarks/host_overhead.py --out $OUT/host_dg > $OUT/host_dg.log 2>&1; t "host dg $?"
pack bench
cat $OUT/summary.txt; tail -n 5 $OUT/bf16_compare.txt; tail -n 4 $OUT/mqa_compare.txt
