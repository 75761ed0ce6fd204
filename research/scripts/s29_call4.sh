#!/usr/bin/env bash
# Session 29, device call 4: the two helper calls in one machine start: the one-launch bmk einsum reduction
# (s29_bmk.sh), then the paged lean page loop (s29_paged.sh). Each keeps its own time limits inside.
set -uo pipefail
source research/scripts/device_call.sh "$0" 560
DEVICE_CALL_INNER=1 timeout 200 bash research/scripts/s29_bmk.sh; t "bmk part exit $?"
DEVICE_CALL_INNER=1 timeout 330 bash research/scripts/s29_paged.sh; t "paged part exit $?"
