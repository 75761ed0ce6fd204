"""Probe: time deep_gemm.fp8_gemm_nt at the M=4096 dense shapes with the benchmark's timer (best of 2 x 30 reps).

    python benchmarks/probes/time_dense4096.py LABEL [--check]

--check compares each result with the reference first; leave it out for kernels patched to compute garbage
(patch_loads.py). Used by run_bytes_probe.sh."""
import os
import sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
import torch
import bench_fp8_gemm as bench
import deep_gemm

label = sys.argv[1]
timer = bench.KernelTimer(reps=30)
for n, k in [(4096, 7168), (7168, 16384), (24576, 1536), (7168, 2048), (2112, 7168)]:
    m = 4096
    a, b = bench.fp8_operands(m, n, k)
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    if "--check" in sys.argv:  # (patched kernels that compute garbage skip this)
        from deep_gemm.testing import calc_diff
        deep_gemm.fp8_gemm_nt(a, b, d)
        diff = calc_diff(d.float(), bench.reference(a, b, (128, 128)))
        assert diff < 1e-3, (label, m, n, k, diff)
    us = [timer(lambda: deep_gemm.fp8_gemm_nt(a, b, d)) for _ in range(2)]
    print(f"{label:6s} {m}x{n}x{k}: {min(us):8.1f} us  {2*m*n*k/min(us)/1e6:7.0f} TFLOPS", flush=True)
