#!/usr/bin/env bash
# The warp-specialised tf32_hc_prenorm_gemm variant (hyperconnection/kernels_ws.py) on the GPU: its tests, then the
# sweep that times it against the plan (research/sweeps/hc_prenorm_sweep.py --ws). ~4-6 min cold (6 WS and ~4 tl.*
# configs compile; the 120 WS test shapes compile 3 more: BN 8 / 16 / 32). Writes $OUT/hc-ws/.
set -uo pipefail
D=$OUT/hc-ws; mkdir -p "$D"
step() { echo "=== $1: exit $2 ($(( $(date +%s) - T0 )) s)" | tee -a "$D/summary.txt"; }

T0=$(date +%s)
timeout 300 env PYTHONPATH=$PWD python3 -m pytest tests/test_hyperconnection_gpu.py -k test_ws -q -p no:cacheprovider \
  -rf -x > "$D/pytest_ws.log" 2>&1
step "pytest -k test_ws" $?
tail -n 15 "$D/pytest_ws.log"

T0=$(date +%s)
timeout 240 env PYTHONPATH=$PWD python3 research/sweeps/hc_prenorm_sweep.py --ws --out "$D" > "$D/sweep.log" 2>&1
step "WS sweep" $?
grep -E "^best|WRONG|ran: False|FAILED" "$D/sweep.log"
