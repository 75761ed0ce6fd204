#!/usr/bin/env bash
# Benchmarks of several families for both packages in one call, each pair back to back (ours, then DeepGEMM in a
# separate process with the same script and arguments, the same timer), paired by benchmarks/compare_providers.py.
# The lean batch for a short device budget; the per-family scripts (scripts/gpu/<family>.sh) run the full steps.
#   PAIRS="bf16 hc" PAIR_LIMIT=40 bash scripts/gpu/bench_pairs.sh      (writes $OUT/bench_pairs/<pair>/)
# Expected wall time: at most 2 x PAIR_LIMIT per pair (each side capped), usually less.
set -uo pipefail
D=$OUT/${BENCH_DIR:-bench_pairs}; mkdir -p "$D"
DGENV="PYTHONPATH=$PWD/.dg/DeepGEMM LD_PRELOAD=/lib/x86_64-linux-gnu/libstdc++.so.6"
LIMIT=${PAIR_LIMIT:-40}
declare -A ARGS=(
  [bf16]="benchmarks/bench_bf16_gemm.py --tables dense,contiguous,masked,k_grouped --ms 1,128,4096 --reps 8"
  [hc]="benchmarks/bench_hc_prenorm.py --tables hc,decode"
  [layout]="benchmarks/bench_hc_prenorm.py --tables layout"
  [indexer]="benchmarks/bench_mqa_logits.py --quick"
  [moe]="benchmarks/bench_fp8_gemm.py --tables moe"
  [einsum]="benchmarks/bench_einsum.py --tables einsum_bh,einsum_bmk,fp8_einsum --reps 8"
  [cublaslt]="benchmarks/bench_einsum.py --tables cublaslt --reps 8"
  [fp8]="benchmarks/bench_fp8_gemm.py --quick --tables dense"
  [host]="benchmarks/host_overhead.py"
)
for pair in ${PAIRS:?name the pairs}; do
  P=$D/$pair; mkdir -p "$P"
  for side in ours dg; do
    start=$(date +%s)
    if [ $side = ours ]; then env PYTHONPATH=$PWD timeout "$LIMIT" python3 ${ARGS[$pair]} --out "$P/$side" > "$P/$side.log" 2>&1
    else env $DGENV timeout "$LIMIT" python3 ${ARGS[$pair]} --out "$P/$side" > "$P/$side.log" 2>&1; fi
    echo "$pair $side: exit $? in $(( $(date +%s) - start )) s" | tee -a "$D/summary.txt"
  done
  for f in "$P"/ours/*.json; do
    [ -f "$P/dg/$(basename "$f")" ] && python3 benchmarks/compare_providers.py "$f" "$P/dg/$(basename "$f")" \
      --out "$P/compare_$(basename "$f" .json).md" > "$P/compare.log" 2>&1
  done
  tail -n 6 "$P/compare.log" 2>/dev/null
done
