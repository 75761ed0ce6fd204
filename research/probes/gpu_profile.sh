#!/usr/bin/env bash
# Nsight Compute look at the FP8 kernel on a few M=4096 shapes: throughput, stall reasons and the hottest stall
# sites. Each shape is profiled on its third launch (the first two compile and warm). Output: $OUT/ncu-MxNxK.txt.
# Knobs: SHAPES ("M,N,K M,N,K ..."), SECTIONS (extra ncu --section names).
set -o pipefail
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
for shape in ${SHAPES:-4096,4096,7168 4096,7168,2048}; do
  IFS=, read -r m n k <<< "$shape"
  f="$OUT/ncu-${m}x${n}x${k}.txt"
  timeout ${NCU_TIMEOUT:-150} ncu --clock-control none -k regex:fp8_gemm --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section SchedulerStats --section LaunchStats --section SourceCounters ${SECTIONS:-} \
    python3 research/probes/ncu_one.py "$m" "$n" "$k" > "$f" 2>&1
  grep -E "Duration|Throughput|Pipe|Stall|Warp Cycles|Registers|Issued|Eligible|Hit Rate" "$f" | head -40
done
