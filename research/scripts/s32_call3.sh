#!/usr/bin/env bash
# Session 32, device call 3 (issue 18), ~8 min: FP8 1D1D stream-K (fp8_gemm_ws STREAM_K, default on for dense 1D1D).
# Predicted: the 2112 x 4096 x 7168 weight-gradient row from ~172 us (two rounds plus a row-tail launch) to ~150 us
# (2.06 rounds of work plus the split tiles' workspace round trip), 4096 x 4096 x 7168 and 7168 x 4096 x 16384 ~2-3 %
# faster (3.88 / 6.79 rounds of work instead of 4 / 7).
#   1. GPU tests: stream-K against the reference (C = D, other C, none; odd M, N, K), the row-tail test with
#      stream-K off; compute-sanitizer memcheck + synccheck on the stream-K case;
#   2. A/B in one process: plan (stream-K) against nosk on DeepGEMM's three 1D1D rows, 5 interleaved rounds;
#   3. DeepGEMM and ours through benchmarks/bench_fp8_gemm.py --tables 1d1d, same timer.
set -uo pipefail
source research/scripts/device_call.sh "$0" 560
timeout 200 python3 -m pytest tests/test_fp8_gemm_gpu.py -q -p no:cacheprovider -rf \
  -k "stream_k or last_row_block or 1d1d_accumulate" > $L/pytest_sk.log 2>&1; rc=$?
t "pytest stream-K exit $rc: $(tail -n1 $L/pytest_sk.log)"; grep -E "^(FAILED|ERROR)" $L/pytest_sk.log | head >> $L/summary.txt
[ $rc -le 1 ] || exit 1  # (a hang or a crash: skip the rest)
OUT=$L SANITIZE_ONLY="fp8/dense_ws_1d1d_stream_k_c" SANITIZE_TOOLS="memcheck synccheck" \
  SANITIZE_TIMEOUT=60 timeout 130 bash scripts/gpu/sanitize.sh > $L/sanitize.txt 2>&1
t "sanitize exit $?"; grep -iE "error|correct|cases" $L/sanitize.txt | tail -n 6 >> $L/summary.txt
timeout 120 python3 research/probes/ws_stagger_ab.py --rows wgrad --levels nosk --rounds 5 > $L/sk_ab.log 2>&1
t "stream-K A/B exit $?"; grep -vE "Warning|warn_once" $L/sk_ab.log >> $L/summary.txt
timeout 100 env $DGENV python3 benchmarks/bench_fp8_gemm.py --quick --tables 1d1d --out $L/dg_1d1d > $L/dg_1d1d.log 2>&1
t "DeepGEMM 1d1d exit $?"; grep "> M=" $L/dg_1d1d.log >> $L/summary.txt
timeout 60 python3 benchmarks/bench_fp8_gemm.py --quick --tables 1d1d --out $L/ours_1d1d > $L/ours_1d1d.log 2>&1
t "ours 1d1d exit $?"; grep "> M=" $L/ours_1d1d.log >> $L/summary.txt
