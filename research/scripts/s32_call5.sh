#!/usr/bin/env bash
# Session 32, device call 5 (issue 18), ~3 min. Call 4: stream-K over the last partial round only, in 4-block shares
# (14-15 pieces a tile at 2112 x 4096 x 7168), was 5.8 % slower than the row tail (179.0 vs 169.1 us): the last piece's
# sum reads 15 partials of 32 KB per slab. Now shares are at least a quarter tile (fp8_gemm_ws.STREAM_K_SPLIT): 8
# tiles on 32 SMs in 14-block shares, 4 pieces each. Predicted: ~17 us of mainloop plus ~3-5 us of sums for the
# stream-K part, against ~28 us for the row tail: 169 -> ~163 us. Stream-K stays only if it beats the row tail.
set -uo pipefail
source research/scripts/device_call.sh "$0" 300
timeout 150 python3 -m pytest tests/test_fp8_gemm_gpu.py -q -p no:cacheprovider -rf \
  -k "stream_k" > $L/pytest_sk.log 2>&1; rc=$?
t "pytest stream-K exit $rc: $(tail -n1 $L/pytest_sk.log)"; grep -E "^(FAILED|ERROR)" $L/pytest_sk.log | head >> $L/summary.txt
[ $rc -le 1 ] || exit 1
OUT=$L SANITIZE_ONLY="fp8/dense_ws_1d1d_stream_k_c" SANITIZE_TOOLS="memcheck synccheck" \
  SANITIZE_TIMEOUT=60 timeout 100 bash scripts/gpu/sanitize.sh > $L/sanitize.txt 2>&1
t "sanitize exit $?"; grep -iE "error|correct|cases" $L/sanitize.txt | tail -n 6 >> $L/summary.txt
timeout 100 python3 research/probes/ws_stagger_ab.py --rows wgrad --levels nosk --rounds 7 > $L/sk_ab.log 2>&1
t "stream-K A/B exit $?"; grep -vE "Warning|warn_once" $L/sk_ab.log >> $L/summary.txt
timeout 60 env $DGENV python3 benchmarks/bench_fp8_gemm.py --quick --tables 1d1d --out $L/dg_1d1d > $L/dg_1d1d.log 2>&1
t "DeepGEMM 1d1d exit $?"; grep "> M=" $L/dg_1d1d.log >> $L/summary.txt
timeout 60 python3 benchmarks/bench_fp8_gemm.py --quick --tables 1d1d --out $L/ours_1d1d > $L/ours_1d1d.log 2>&1
t "ours 1d1d exit $?"; grep "> M=" $L/ours_1d1d.log >> $L/summary.txt
