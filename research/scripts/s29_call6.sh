#!/usr/bin/env bash
# Session 29, device call 6 (the last of the session's device time): the prefill lean interior loop (s29_prefill.sh:
# GPU bit tests, in-process A/B old/new) and the bmk parallel reduction's new kernel (s29_reduce.sh: GPU tests, A/B
# old/new, memcheck), in one machine start.
set -uo pipefail
source research/scripts/device_call.sh "$0" 290
DEVICE_CALL_INNER=1 timeout 140 bash research/scripts/s29_prefill.sh; t "prefill part exit $?"
DEVICE_CALL_INNER=1 timeout 140 bash research/scripts/s29_reduce.sh; t "reduce part exit $?"
