#!/usr/bin/env bash
# Session 29, prefill lean interior loop (PrefillConfig.lean_interior, issue 17): (1) the GPU bit tests of the lever
# (lean against the loop before it, every written bit), then the 20-re-run test at 64K keys under the new default;
# (2) the in-process A/B old / new on the three same-call prefill rows (research/probes/prefill_lean_ab.py; DeepGEMM's
# times from the call-5 table for the ratio).
set -uo pipefail
source research/scripts/device_call.sh "$0" 150
timeout 70 python3 -m pytest tests/test_attention_triton.py -m gpu \
  -k "lean_interior or 64k_context_and_20_bitwise" -q -p no:cacheprovider -rf > $L/pytest_lean.log 2>&1
t "pytest lean exit $?: $(tail -n1 $L/pytest_lean.log)"; grep -E "^(FAILED|ERROR)" $L/pytest_lean.log | head >> $L/summary.txt
timeout 60 python3 research/probes/prefill_lean_ab.py > $L/prefill_lean_ab.log 2>&1
t "prefill lean A/B exit $?"; cat $L/prefill_lean_ab.log >> $L/summary.txt
