"""Per-kernel GPU time of ``einsum('bmk,bnk->mn')`` at DeepGEMM's s = 129 / 4096 rows: the batch-split GEMM kernel
and the partial-sum kernel apart (L2 flushed before each call, median of 20), under this package or DeepGEMM.

    PYTHONPATH=$PWD python research/probes/einsum_bmk_breakdown.py
"""
import os
import sys

import torch

sys.path.append(os.path.join(os.path.dirname(__file__), "..", ".."))  # after DeepGEMM when it is first
from benchmarks.harness import kernel_times_by_name, provider  # noqa: E402
from benchmarks.bench_einsum import BMK_SHAPES  # noqa: E402

import deep_gemm  # noqa: E402

torch.manual_seed(0)
for s, m, n, k in BMK_SHAPES:
    a = torch.randn((s, m, k), dtype=torch.bfloat16, device="cuda")
    b = torch.randn((s, n, k), dtype=torch.bfloat16, device="cuda")
    d = torch.zeros((m, n), device="cuda")
    fn = lambda: deep_gemm.einsum("bmk,bnk->mn", a, b, d, c=d)  # noqa: E731
    times = kernel_times_by_name(fn, ["gemm", "reduce"])
    plan = ""
    if provider() == "deep_gemm":
        from deep_gemm.einsum.einsum_triton import bmk_plan
        plan = str(bmk_plan(s, m, n, k))
    print(f"{provider()} s={s:5d} m={m} n={n} k={k}: total {times['total']:6.1f} us | gemm {times['gemm']:6.1f} | "
          f"reduce {times['reduce']:5.1f} | {plan}", flush=True)
