#!/usr/bin/env bash
# Session 31, device call 6 (research, ~4 min): research/probes/ws_phase_probe.py, when each consumer warpgroup
# finishes its waves (clock after each wave's promotion, summed per warpgroup over each CTA's K blocks), dense
# 128 x 256 rows and DeepGEMM's first psum row, stagger 0 and 1: do the two warpgroups finish together?
set -uo pipefail
source research/scripts/device_call.sh "$0" 210
timeout 190 python3 research/probes/ws_phase_probe.py > $L/phase.log 2>&1; t "phase probe exit $?"
grep -vE "Warning|warn_once" $L/phase.log >> $L/summary.txt
