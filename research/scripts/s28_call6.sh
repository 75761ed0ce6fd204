#!/usr/bin/env bash
# Session 28, device call 6: compute-sanitizer over the BF16 K-grouped WS cases (call 5's cases asserted the default
# plan, which prices tl.* for such small calls: now forced with Bf16Overrides(ws=True)) and the masked ones again.
set -uo pipefail
source research/scripts/device_call.sh "$0" 200
OUT=$L SANITIZE_TIMEOUT=90 SANITIZE_TOOLS="memcheck synccheck" SANITIZE_ONLY="bf16/masked bf16/k_grouped" \
  bash scripts/gpu/sanitize.sh > $L/sanitize.txt 2>&1; t "sanitize exit $?"; cat $L/sanitize.txt >> $L/summary.txt
