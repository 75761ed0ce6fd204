#!/usr/bin/env bash
# Session 30, paged call (issue 17): PagedConfig.register_page_scales (opt-in, the kernel's REG_SCALES: page scales
# in registers one page ahead, block table two ahead; sm_90a 282 instead of 294 SASS instructions per page but 1
# local load per page under the 128-register cap, research/results/2026-12-cpu-paged-spills-session29.md). Its GPU
# test (bitwise against the shape's default), then the in-process A/B against the default on the 3 row-pair rows
# (bench_mqa_logits.PAGED_QUICK: B=256 L=8192, B=256 L=65536, B=4096 L=8192, next_n=2 H=64). ~120 s.
#   bash research/scripts/s30_paged_regs.sh        (device call; carry [".dg"] only for the DeepGEMM setup line)
set -uo pipefail
# Order: correctness first (it also compiles both configs the A/B launches), then the A/B; nothing else.
source research/scripts/device_call.sh "$0" 150
timeout 60 python3 -m pytest tests/test_attention_triton.py -q -p no:cacheprovider -x \
  -k "gpu_paged_register_page_scales" > $L/pytest_paged_regs.log 2>&1
t "pytest paged regs exit $?: $(tail -n1 $L/pytest_paged_regs.log)"
timeout 75 python3 research/probes/paged_default_ab.py --quick --field register_page_scales > $L/paged_ab.log 2>&1
t "paged A/B exit $?"
grep -E "^BSZ|Error" $L/paged_ab.log >> $L/summary.txt
