#!/usr/bin/env bash
# FP8 A/B (about 5 min): the FP8 benchmark (--quick tables) and the host cost per call, for the working tree and
# for a baseline tree carried in .ab/base (`git archive <rev> deep_gemm benchmarks | tar -x -C .ab/base`), in one
# device call; host cost for DeepGEMM too when .dg is set up. Writes $OUT/fp8_ab/.
set -uo pipefail
D=$OUT/fp8_ab; mkdir -p "$D"
DGENV="PYTHONPATH=$PWD/.dg/DeepGEMM LD_PRELOAD=/lib/x86_64-linux-gnu/libstdc++.so.6"
timeout 90 env PYTHONPATH=$PWD python3 benchmarks/host_overhead.py --out "$D/host_ours" > "$D/host_ours.log" 2>&1
[ -d .dg/DeepGEMM ] && timeout 150 env $DGENV python3 benchmarks/host_overhead.py --out "$D/host_dg" > "$D/host_dg.log" 2>&1
[ -d .ab/base ] && timeout 90 env PYTHONPATH=$PWD/.ab/base python3 benchmarks/host_overhead.py --out "$D/host_base" > "$D/host_base.log" 2>&1
TABLES=${AB_TABLES:-dense,contiguous,masked,k_grouped}
timeout 150 env PYTHONPATH=$PWD python3 benchmarks/bench_fp8_gemm.py --quick --tables "$TABLES" --out "$D/ours" > "$D/bench_ours.log" 2>&1
[ -d .ab/base ] && (cd .ab/base && timeout 150 env PYTHONPATH=$PWD python3 benchmarks/bench_fp8_gemm.py --quick --tables "$TABLES" --out "$D/base" > "$D/bench_base.log" 2>&1)
tail -n 3 "$D"/*.log
