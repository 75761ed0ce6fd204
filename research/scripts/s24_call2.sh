#!/usr/bin/env bash
# Session 24, device call 2: the HC config sweep (v2: stages/warps/sub-splits/BM=128 on DeepGEMM's rows) and the
# K-grouped pack tile sweep (ours only), then the benchmarks not run after session 23's plan changes: einsum and the
# indexer against DeepGEMM in this call, BF16 ours only (against session 23 call 1's DeepGEMM JSON: its JIT takes
# ~200 s). Everything comes back as tarballs (the device returns at most 8 files).
set -uo pipefail
REAL=$OUT
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=$PWD/.cache/triton DG_JIT_CACHE_DIR=$PWD/.cache/dg-jit
mkdir -p /tmp/sw; T0=$(date +%s)
timeout 240 python3 research/sweeps/hc_prenorm_sweep.py --out /tmp/sw > /tmp/sw/hc_sweep.log 2>&1
echo "hc sweep exit $? at $(( $(date +%s) - T0 )) s" >> /tmp/sw/summary.txt
timeout 90 python3 research/sweeps/layout_k_grouped_sweep.py --out /tmp/sw > /tmp/sw/layout_sweep.log 2>&1
echo "layout sweep exit $? at $(( $(date +%s) - T0 )) s" >> /tmp/sw/summary.txt
tar -czf $REAL/sweeps.tgz -C /tmp sw
CACHE=0 EINSUM_PARTS=bench INDEXER_PARTS=bench BF16_PARTS=bench BF16_DG=0 \
  BF16_DG_JSON=$PWD/research/results/2026-12-02-h200-s23-call1/bf16/bench_dg/bench_bf16_gemm.json \
  FAMILIES="einsum indexer bf16" FAMILY_TIMEOUT=150 bash scripts/gpu/all.sh > /tmp/sw/all.log 2>&1
cat /tmp/sw/summary.txt; grep -E "^best" /tmp/sw/hc_sweep.log; grep launcher /tmp/sw/layout_sweep.log
tar -czf $REAL/sweeps.tgz -C /tmp sw
