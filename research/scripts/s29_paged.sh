#!/usr/bin/env bash
# Session 29, paged call (issue 17): the lean page loop (PagedConfig.lean_page_loop, the new row-pair default: no
# local memory in the page loop under the 128-register cap). Its GPU tests (bitwise against the plain loop, the
# reference), the in-process A/B of lean vs plain on the bench's paged rows, the bench's paged rows for us and for
# DeepGEMM (same-call ratios), and Nsight Compute on the lean and the plain kernel (spill requests, L2 writes).
#   bash research/scripts/s29_paged.sh        (device call, carry [".dg"])
set -uo pipefail
# Order: correctness, then the A/B, the benches, the lean kernel's Nsight look; the plain kernel's comes last (the
# batch limit may cut it). The tests compile every config the later steps launch (lean and plain, clean and raw).
source research/scripts/device_call.sh "$0" 260
timeout 80 python3 -m pytest tests/test_attention_triton.py -q -p no:cacheprovider -x -k "gpu_paged_lean" \
  > $L/pytest_paged.log 2>&1
t "pytest paged exit $?: $(tail -n1 $L/pytest_paged.log)"
timeout 60 python3 research/probes/paged_default_ab.py > $L/paged_ab.log 2>&1; t "paged A/B exit $?"
grep -E "^BSZ|Error" $L/paged_ab.log >> $L/summary.txt
ROWS=3,5,2,4,6,1  # bench_mqa_logits.PAGED: the A/B's rows
timeout 30 python3 benchmarks/bench_mqa_logits.py --tables paged --quick --paged-rows $ROWS --out $L/mqa_ours \
  > $L/mqa_ours.log 2>&1; t "bench paged ours exit $?"
timeout 55 env $DGENV python3 benchmarks/bench_mqa_logits.py --tables paged --quick --paged-rows $ROWS \
  --out $L/mqa_dg > $L/mqa_dg.log 2>&1; t "bench paged dg exit $?"
python3 benchmarks/compare_providers.py $L/mqa_ours/bench_mqa_logits.json $L/mqa_dg/bench_mqa_logits.json \
  --out $L/mqa_compare.md > $L/mqa_compare.txt 2>&1; cat $L/mqa_compare.txt >> $L/summary.txt
NCU="ncu --clock-control none -k regex:paged_mqa_logits --launch-skip 2 --launch-count 1 --section SpeedOfLight \
  --section WarpStateStats --section Occupancy --section MemoryWorkloadAnalysis --section SchedulerStats --section LaunchStats"
timeout 40 $NCU python3 research/probes/ncu_paged.py > $L/ncu_paged_lean.txt 2>&1; t "ncu paged lean exit $?"
grep -E "Duration|DRAM Throughput|L2 Cache Throughput|Registers Per|Local Memory Spilling R|Input Sectors|Achieved Occ" \
  $L/ncu_paged_lean.txt >> $L/summary.txt
timeout 40 $NCU python3 research/probes/ncu_paged.py --plain > $L/ncu_paged_plain.txt 2>&1; t "ncu paged plain exit $?"
grep -E "Duration|DRAM Throughput|L2 Cache Throughput|Registers Per|Local Memory Spilling R|Input Sectors|Achieved Occ" \
  $L/ncu_paged_plain.txt >> $L/summary.txt
