#!/usr/bin/env bash
# Session 32, device call 4 (issue 18), ~5 min. Call 3: stream-K over the last one and a fraction rounds was 6-7 %
# slower on the 4096- and 7168-row 1D1D problems and level on 2112 rows (SMs reading different K blocks of the same
# panels at once); now only the last, partial round is shared out (at most half a round of tiles; 2112 x 4096 x 7168:
# 8 tiles in 4-block shares, 14-15 pieces each). Predicted: 2112 row ~174 -> ~150-155 us; the other rows unchanged
# (they no longer take stream-K). Also: the GPU tests (call 3's two failures were a plan cached by the row-tail test
# while it had stream-K off), the sanitizer case, DeepGEMM's 1D1D rows (its bench needed deep_gemm.backends: guarded).
set -uo pipefail
source research/scripts/device_call.sh "$0" 420
timeout 150 python3 -m pytest tests/test_fp8_gemm_gpu.py -q -p no:cacheprovider -rf \
  -k "stream_k or last_row_block or 1d1d" > $L/pytest_sk.log 2>&1; rc=$?
t "pytest stream-K exit $rc: $(tail -n1 $L/pytest_sk.log)"; grep -E "^(FAILED|ERROR)" $L/pytest_sk.log | head >> $L/summary.txt
[ $rc -le 1 ] || exit 1
OUT=$L SANITIZE_ONLY="fp8/dense_ws_1d1d_stream_k_c" SANITIZE_TOOLS="memcheck synccheck" \
  SANITIZE_TIMEOUT=60 timeout 100 bash scripts/gpu/sanitize.sh > $L/sanitize.txt 2>&1
t "sanitize exit $?"; grep -iE "error|correct|cases" $L/sanitize.txt | tail -n 6 >> $L/summary.txt
timeout 100 python3 research/probes/ws_stagger_ab.py --rows wgrad --levels nosk --rounds 5 > $L/sk_ab.log 2>&1
t "stream-K A/B exit $?"; grep -vE "Warning|warn_once" $L/sk_ab.log >> $L/summary.txt
timeout 60 env $DGENV python3 benchmarks/bench_fp8_gemm.py --quick --tables 1d1d --out $L/dg_1d1d > $L/dg_1d1d.log 2>&1
t "DeepGEMM 1d1d exit $?"; grep "> M=" $L/dg_1d1d.log >> $L/summary.txt
timeout 60 python3 benchmarks/bench_fp8_gemm.py --quick --tables 1d1d --out $L/ours_1d1d > $L/ours_1d1d.log 2>&1
t "ours 1d1d exit $?"; grep "> M=" $L/ours_1d1d.log >> $L/summary.txt
