"""Probe: read the cycle counters patch_timeline.py adds to the two-wave kernel, at M=4096 dense shapes.

    python benchmarks/probes/patch_timeline.py on && python benchmarks/probes/timeline_dense4096.py
    python benchmarks/probes/patch_timeline.py restore

Prints, over all CTAs: the share of each consumer warpgroup's K loop spent waiting for a stage's data, cycles per
K block, and the share of the producer's loop spent waiting for a free stage."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
import torch  # noqa: E402

import bench_fp8_gemm as bench  # noqa: E402
import deep_gemm  # noqa: E402
from deep_gemm.gemm import fp8_triton  # noqa: E402

SMS = fp8_triton._num_sms()
timer = bench.KernelTimer(reps=30)
for n, k in [(4096, 7168), (7168, 16384), (24576, 1536), (7168, 2048)]:
    m = 4096
    a, b = bench.fp8_operands(m, n, k)
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    us = timer(lambda: deep_gemm.fp8_gemm_nt(a, b, d))
    bench.KernelTimer(reps=1).flush.zero_()
    deep_gemm.fp8_gemm_nt(a, b, d)
    torch.cuda.synchronize()
    c = d.view(-1).view(torch.int32)[:SMS * 3 * 8].view(SMS, 3, 8).to(torch.int64).cpu()
    ready, loop, kb = c[:, :2, 0].sum().item(), c[:, :2, 3].sum().item(), c[:, :2, 4].sum().item()
    p_wait, p_loop = c[:, 2, 0].sum().item(), c[:, 2, 3].sum().item()
    per_cta_ready = (c[:, :2, 0].sum(1).float() / c[:, :2, 3].sum(1).float())
    print(f"4096x{n}x{k}: {us:7.1f} us (instrumented) | consumers wait for data {ready / loop:5.1%} of their K loops "
          f"(CTAs {per_cta_ready.min():.1%}-{per_cta_ready.max():.1%}), {loop / kb:6.0f} cycles per K block "
          f"({kb // 2} K blocks per warpgroup pair) | producer waits for a free stage {p_wait / p_loop:5.1%} of "
          f"its loop", flush=True)
