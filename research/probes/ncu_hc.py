"""One warm tf32_hc_prenorm_gemm call for Nsight Compute, from whichever deep_gemm is first on PYTHONPATH (ours or
DeepGEMM's build, so both kernels are profiled on the same row; profile the third launch).

    python research/probes/ncu_hc.py [M N K SPLITS]   # default: 8192 24 28672 0 (DeepGEMM's unsplit tall row)
    ncu --clock-control none --launch-skip 2 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section Occupancy --section LaunchStats --section WarpStateStats python research/probes/ncu_hc.py
"""

import sys

import torch

import deep_gemm

m, n, k, splits = (int(x) for x in (sys.argv[1:5] if len(sys.argv) > 4 else (8192, 24, 28672, 0)))
a = torch.randn(m, k, device="cuda").bfloat16()
b = torch.randn(n, k, device="cuda")
lead = (splits,) if splits else ()
d = torch.empty(*lead, m, n, device="cuda")
s = torch.empty(*lead, m, device="cuda")
print(f"deep_gemm from {deep_gemm.__file__}", flush=True)
for _ in range(3):
    deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s, num_splits=splits or None)
torch.cuda.synchronize()
