#!/usr/bin/env bash
# Host time per call: the eager path of the public functions (the dispatcher bypass) against the
# dispatcher op and against DeepGEMM, one device call. Expected wall time: ~3.5 min warm, ~5.5 min cold (the GPU tests
# compile the HC, FP8 dense/masked and BF16 kernels once). Run as FAMILIES=host (FAMILY_TIMEOUT=360).
#   1. tests/test_eager_path_gpu.py: eager == dispatcher bit for bit, new tensors, CUDA graphs, threads, errors, compile;
#      tests/test_layout_host_path_gpu.py + test_layout_gpu.py: replayed layout launches (views passed as addresses,
#      one-call allocations) and the public layout functions' per-signature as-is decision, bit for bit (~20 s)
#   2. DeepGEMM's test_hyperconnection.py against ours (SHIM=0): its calls now take the eager path
#   3. benchmarks/host_overhead.py for ours (public functions and the same calls through torch.ops), DeepGEMM, and
#      ours with DG_NO_EAGER_PATH=1 (the public functions through the dispatcher: the before numbers)
#   4. benchmarks/host_paths_cpu.py on this host's CPU (GPU stubbed): the Python share per layer at this host's speed
# Writes $OUT/host/. No `set -e`: every step runs and reports.
set -uo pipefail
FAMILY=host; D=$OUT/host; PARTS=${HOST_PARTS:-tests dg host layers}; mkdir -p "$D"
source scripts/gpu/steps.sh

has tests && step "pytest eager path (gpu)" 240 env PYTHONPATH=$PWD python3 -m pytest tests/test_eager_path_gpu.py \
  tests/test_eager_path_cpu.py tests/test_layout_host_path_gpu.py tests/test_layout_gpu.py tests/test_layout_host_path_cpu.py \
  -q -p no:cacheprovider -rf > "$D/pytest_gpu.log" 2>&1
tail -n 15 "$D/pytest_gpu.log"

has dg && step "DeepGEMM test_hyperconnection vs ours (SHIM=0)" 120 env SHIM=0 PYTHONPATH=$PWD python3 \
  "$DGT/run_dg_tests.py" .dg/DeepGEMM/tests test_hyperconnection > "$D/dg_tests_ours.log" 2>&1
grep -E "^### (PASS|FAIL)|RESULTS" "$D/dg_tests_ours.log"

if has host; then
  step "host_overhead ours" 90 env PYTHONPATH=$PWD python3 benchmarks/host_overhead.py --out "$D/host_ours" \
    > "$D/host_ours.log" 2>&1
  [ -d .dg/DeepGEMM ] && step "host_overhead DeepGEMM" 120 env $DGENV python3 benchmarks/host_overhead.py \
    --out "$D/host_dg" > "$D/host_dg.log" 2>&1
  # The public functions as they were (every call through the dispatcher op): the before column, same run.
  step "host_overhead ours, DG_NO_EAGER_PATH=1" 90 env DG_NO_EAGER_PATH=1 PYTHONPATH=$PWD python3 \
    benchmarks/host_overhead.py --out "$D/host_ours_no_eager" > "$D/host_ours_no_eager.log" 2>&1
  echo "--- ours"; grep "us/call" "$D/host_ours.log"
  echo "--- ours, DG_NO_EAGER_PATH=1"; grep "us/call" "$D/host_ours_no_eager.log"
  echo "--- DeepGEMM"; grep "us/call" "$D/host_dg.log" 2>/dev/null
fi

has layers && step "host_paths_cpu (GPU stubbed)" 90 env PYTHONPATH=$PWD CUDA_VISIBLE_DEVICES= python3 \
  benchmarks/host_paths_cpu.py --number 2000 --rounds 10 > "$D/host_paths_cpu.log" 2>&1
cat "$D/host_paths_cpu.log" 2>/dev/null | tail -n 14
