#!/bin/bash
# Probe: what of the two-wave kernel's loads costs time? (patched kernels compute garbage; see patch_loads.py)
# Each variant in its own process on one machine, the unpatched kernel first and last. splitB computes the right
# product and is checked.
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw --format=csv
python benchmarks/probes/time_dense4096.py base --check
for v in ${VARIANTS:-noA noB hot halfB splitB}; do
  check=""; [ "$v" = splitB ] && check="--check"
  python benchmarks/probes/patch_loads.py $v && python benchmarks/probes/time_dense4096.py $v $check
  python benchmarks/probes/patch_loads.py restore
done
python benchmarks/probes/time_dense4096.py base2
