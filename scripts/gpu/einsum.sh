#!/usr/bin/env bash
# einsum / fp8_einsum / cuBLASLt wrappers on the GPU (issue 15, items 3 and 4). Expected wall time: ~4 min warm
# (Triton and DeepGEMM JIT caches carried), ~5 min cold (about 15 Triton configs compile on first use; DeepGEMM
# JIT-compiles its einsum kernels). Each step has its own time limit; a failing step never stops the next.
# EINSUM_PARTS="pytest dgtest bench sweep" picks steps (sweep: every tile config on DeepGEMM's rows, off by default).
# Writes $OUT/einsum/: summary.txt, pytest.log, dg_ours.log / dg_dg.log (DeepGEMM's tests/test_einsum.py and
# test_bf16.py:test_cublaslt_gemm against this package with SHIM=0, and test_einsum.py against DeepGEMM, one
# timer) + dg_compare.txt, bench_{ours,dg}/ + bench_compare.md (DeepGEMM time / ours per row).
set -uo pipefail
D=$OUT/einsum; mkdir -p "$D"
PARTS=${EINSUM_PARTS:-pytest dgtest bench}
DGT=scripts/dg; [ -f "$DGT/run_dg_tests.py" ] || DGT=.dg/tools
DGENV="PYTHONPATH=$PWD/.dg/DeepGEMM LD_PRELOAD=/lib/x86_64-linux-gnu/libstdc++.so.6"
step() {  # step NAME SECONDS CMD...: run under a limit, report the exit status and the time
  local name=$1 limit=$2; shift 2
  local start=$(date +%s)
  timeout "$limit" "$@"
  local rc=$?
  echo "[einsum] $name: exit $rc in $(( $(date +%s) - start )) s$([ $rc = 124 ] && echo ' (TIME LIMIT)')" | tee -a "$D/summary.txt"
}
has() { [[ " $PARTS " == *" $1 "* ]]; }

if has pytest; then
  step pytest 90 env PYTHONPATH=$PWD python3 -m pytest tests/test_einsum_gpu.py tests/test_cublaslt.py -m gpu \
    -q -p no:cacheprovider -rf > "$D/pytest.log" 2>&1
  tail -n 15 "$D/pytest.log"
fi
if has dgtest && [ -d .dg/DeepGEMM ]; then
  FNS="test_einsum:test_bmk_bnk_mn test_einsum:test_bhr_hdr_bhd test_einsum:test_bhd_hdr_bhr test_einsum:test_fp8_bhr_hdr_bhd"
  step dg_tests_ours 60 env SHIM=0 PYTHONPATH=$PWD python3 $DGT/run_dg_tests.py .dg/DeepGEMM/tests $FNS \
    test_bf16:test_cublaslt_gemm > "$D/dg_ours.log" 2>&1
  step dg_tests_dg 60 env $DGENV SHIM=0 python3 $DGT/run_dg_tests.py .dg/DeepGEMM/tests $FNS > "$D/dg_dg.log" 2>&1
  python3 $DGT/compare_perf_lines.py "$D/dg_ours.log" "$D/dg_dg.log" > "$D/dg_compare.txt" 2>&1
  grep -E "^### (PASS|FAIL)" "$D/dg_ours.log" | head -20; grep -iE "GEOMEAN" "$D/dg_compare.txt"
fi
if has bench; then
  step bench_ours 45 env PYTHONPATH=$PWD python3 benchmarks/bench_einsum.py --reps 8 --out "$D/bench_ours" > "$D/bench_ours.log" 2>&1
  [ -d .dg/DeepGEMM ] && step bench_dg 45 env $DGENV python3 benchmarks/bench_einsum.py --reps 8 \
    --tables einsum_bh,einsum_bmk,fp8_einsum --out "$D/bench_dg" > "$D/bench_dg.log" 2>&1
  python3 benchmarks/compare_providers.py "$D/bench_ours/bench_einsum.json" "$D/bench_dg/bench_einsum.json" \
    --out "$D/bench_compare.md" > "$D/bench_compare.log" 2>&1
  cat "$D/bench_compare.log"; grep "cublaslt_gemm_nt" "$D/bench_ours.log"
fi
if has sweep; then
  step sweep 150 env PYTHONPATH=$PWD python3 benchmarks/bench_einsum.py --tables none --sweep --reps 8 \
    --out "$D/sweep" > "$D/sweep.log" 2>&1
  grep "~ sweep" "$D/sweep.log"
fi
cat "$D/summary.txt"
