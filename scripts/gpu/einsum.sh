#!/usr/bin/env bash
# einsum / fp8_einsum / cuBLASLt wrappers on the GPU. Expected wall time: ~4 min warm
# (Triton and DeepGEMM JIT caches carried), at most 9.8 min cold (the step limits add up to 585 s: run with
# FAMILY_TIMEOUT=590; about 45 Triton configs compile on first use, most of them in the sweep, and DeepGEMM
# JIT-compiles its einsum kernels). Each step has its own time limit; a failing step never stops the next.
# EINSUM_PARTS="pytest dgtest bench sweep" picks steps (the default: all four). The sweep times the bmk batch splits
# (BmkPlan: splits x parallel / serial reduction x reduction rows, with the model's prediction beside each) on
# DeepGEMM's bmk rows, then every BF16 bh tile config on b=128 / 4096 rows (the planned one marked "(plan)").
# Writes $OUT/einsum/: summary.txt, pytest.log, dg_ours.log / dg_dg.log (DeepGEMM's tests/test_einsum.py and
# test_bf16.py:test_cublaslt_gemm against this package with SHIM=0, and test_einsum.py against DeepGEMM, one
# timer) + dg_compare.txt, bench_{ours,dg}/ + bench_compare.md (DeepGEMM time / ours per row), sweep.log.
# Note: DeepGEMM's own test times 'bmk,bnk->mn' by the kernel name bmn_bnk_mn_gemm_impl only, so in dg_ours.log it
# leaves out our second launch (bmk_reduce_partials); bench_einsum.py (bench_compare.md) counts every kernel.
set -uo pipefail
D=$OUT/einsum; mkdir -p "$D"
PARTS=${EINSUM_PARTS:-pytest dgtest bench sweep}
FAMILY=einsum
source scripts/gpu/steps.sh

if has pytest; then
  # (test_cublaslt_cpu.py and test_cublaslt_gpu.py: the CPU file's launcher tests run on CUDA tensors here too)
  step pytest 130 env PYTHONPATH=$PWD python3 -m pytest tests/test_einsum_gpu.py tests/test_cublaslt_cpu.py tests/test_cublaslt_gpu.py \
    -q -p no:cacheprovider -rf --durations=5 > "$D/pytest.log" 2>&1
  tail -n 15 "$D/pytest.log"
fi
if has dgtest && [ -d .dg/DeepGEMM ]; then
  FNS="test_einsum:test_bmk_bnk_mn test_einsum:test_bhr_hdr_bhd test_einsum:test_bhd_hdr_bhr test_einsum:test_fp8_bhr_hdr_bhd"
  step dg_tests_ours 75 env SHIM=0 PYTHONPATH=$PWD python3 $DGT/run_dg_tests.py .dg/DeepGEMM/tests $FNS \
    > "$D/dg_ours.log" 2>&1
  # (DeepGEMM JIT-compiles every shape: ~35 s for its bmk rows alone when its cache is cold.)
  step dg_tests_dg 90 env $DGENV SHIM=0 python3 $DGT/run_dg_tests.py .dg/DeepGEMM/tests $FNS > "$D/dg_dg.log" 2>&1
  step dg_cublaslt_ours 30 env SHIM=0 PYTHONPATH=$PWD python3 $DGT/run_dg_tests.py .dg/DeepGEMM/tests \
    test_bf16:test_cublaslt_gemm > "$D/dg_cublaslt_ours.log" 2>&1
  python3 $DGT/compare_perf_lines.py "$D/dg_ours.log" "$D/dg_dg.log" > "$D/dg_compare.txt" 2>&1
  grep -hE "^### (PASS|FAIL)" "$D/dg_ours.log" "$D/dg_cublaslt_ours.log" "$D/dg_dg.log" | head -20
  grep -iE "GEOMEAN" "$D/dg_compare.txt"
fi
if has bench; then
  step bench_ours 40 env PYTHONPATH=$PWD python3 benchmarks/bench_einsum.py --reps 8 --out "$D/bench_ours" > "$D/bench_ours.log" 2>&1
  [ -d .dg/DeepGEMM ] && step bench_dg 40 env $DGENV python3 benchmarks/bench_einsum.py --reps 8 \
    --tables einsum_bh,einsum_bmk,fp8_einsum --out "$D/bench_dg" > "$D/bench_dg.log" 2>&1
  python3 benchmarks/compare_providers.py "$D/bench_ours/bench_einsum.json" "$D/bench_dg/bench_einsum.json" \
    --out "$D/bench_compare.md" > "$D/bench_compare.log" 2>&1
  cat "$D/bench_compare.log"; grep "cublaslt_gemm_nt" "$D/bench_ours.log"
fi
if has sweep; then
  step sweep 180 env PYTHONPATH=$PWD python3 benchmarks/bench_einsum.py --tables none --sweep --reps 8 \
    --out "$D/sweep" > "$D/sweep.log" 2>&1
  grep -E "~ sweep|Error|error" "$D/sweep.log" | cut -c1-160
fi
cat "$D/summary.txt"
