#!/usr/bin/env bash
# Session 27, device call 3: the new defaults of call 2's levers, checked and measured against DeepGEMM.
# Run order: 1, 4, 3, 2, 5 (what a short device call must not lose first).
#   1. compute-sanitizer memcheck + synccheck over the FP8 psum / masked cases (warp-uniform tiles now by default:
#      redux.sync needs every lane of the warp), the HC cases (16-row blocks) and the BF16 grouped cases;
#   2. the BF16 psum A/B (research/probes/bf16_psum_ab.py: the plan's tl.* kernel vs the WS kernel with untouched
#      gaps, with and without warp-uniform marking, vs the expert-id layout);
#   3. DeepGEMM's FP8 MoE tests (contiguous psum + ids, masked + through psum), ours then DeepGEMM, one timer;
#   4. bench_hc_prenorm hc + decode tables, ours (DeepGEMM's side: call 1, same session);
#   5. GPU tests: FP8 MoE walk + grouped FP8, HC, BF16 grouped incl. the untouched-gap WS tests (last: the probes
#      above check their own results).
# Results under $OUT (one logs.tgz).
set -uo pipefail
source research/scripts/device_call.sh "$0" 450  # (the batch under one limit, logs packed)
OUT=$L SANITIZE_TIMEOUT=75 SANITIZE_TOOLS="memcheck synccheck" \
  SANITIZE_ONLY="fp8/m_grouped_psum fp8/masked fp8/m_grouped_nn_psum hc/ bf16/m_grouped bf16/masked" \
  bash scripts/gpu/sanitize.sh > $L/sanitize.txt 2>&1; t "sanitize exit $?"; cat $L/sanitize.txt >> $L/summary.txt
timeout 30 python3 benchmarks/bench_hc_prenorm.py --tables hc,decode --out $L/hc_ours > $L/hc_ours.log 2>&1
t "hc bench ours exit $?"
(OUT=$L MOE_PARTS=dg MOE_STRIDE=2 MOE_DG_LIMIT=40 \
  MOE_DG_FUNCS="test_fp8_fp4:test_m_grouped_gemm_contiguous test_fp8_fp4:test_m_grouped_gemm_masked" \
  bash scripts/gpu/moe.sh > $L/moe.txt 2>&1); t "moe yardstick exit $?"; grep -E "geomean|ratio|exit" $L/moe.txt >> $L/summary.txt
timeout 130 python3 research/probes/bf16_psum_ab.py --reps 10 > $L/bf16_psum_ab.log 2>&1; t "bf16 psum A/B exit $?"
grep -E "geomean|WRONG|DIFF|GAPS|x over" $L/bf16_psum_ab.log | tail -n 12 >> $L/summary.txt
timeout 240 python3 -m pytest -q -p no:cacheprovider -rf tests/test_fp8_moe_walk_gpu.py tests/test_hyperconnection_gpu.py \
  tests/test_fp8_gemm_gpu.py tests/test_bf16_gemm_gpu.py -k "psum or masked or m_grouped or walk or hyper or hc_ or untouched" > $L/pytest.log 2>&1
t "pytest exit $?: $(tail -n1 $L/pytest.log)"; grep -E "^(FAILED|ERROR)" $L/pytest.log | head -20 >> $L/summary.txt
