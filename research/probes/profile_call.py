"""Which kernels one deep_gemm call launches and what each costs (torch.profiler, after a warm-up): where a call's
time goes when the benchmark's total (all kernels of the call) is more than the GEMM kernel.

    python research/probes/profile_call.py k_grouped_tn     # the benchmark's first K-grouped shape
"""

from __future__ import annotations

import random
import sys

import torch

import deep_gemm
from deep_gemm.utils import align


def k_grouped_tn(g=4, m=4096, n=7168, k_per_group=8192):
    random.seed(0)
    ks = [align(int(k_per_group * random.uniform(0.7, 1.3)), 128) for _ in range(g)]
    sum_k = sum(ks)
    a = (torch.randn(sum_k, m, device="cuda").to(torch.float8_e4m3fn), torch.rand(sum_k // 128, m, device="cuda") + 0.5)
    b = (torch.randn(sum_k, n, device="cuda").to(torch.float8_e4m3fn), torch.rand(sum_k // 128, n, device="cuda") + 0.5)
    d = torch.zeros(g, m, n, device="cuda")
    layout = torch.tensor(ks, dtype=torch.int32, device="cuda")
    return lambda: deep_gemm.k_grouped_fp8_gemm_tn_contiguous(a, b, d, ks, layout, c=d)


def dense_tn(m=4096, n=4096, k=7168):
    """fp8_gemm_tn: A [K, M] and B [K, N], both MN-major (copied to K-major inside the call)."""
    a = (torch.randn(k, m, device="cuda").to(torch.float8_e4m3fn), torch.rand(k // 128, m, device="cuda") + 0.5)
    b = (torch.randn(k, n, device="cuda").to(torch.float8_e4m3fn),
         torch.rand(k // 128, n // 128, device="cuda") + 0.5)
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    return lambda: deep_gemm.fp8_gemm_tn(a, b, d)


def mn_major_copy(rows=7168, cols=34304):
    """The K-major copy of an MN-major FP8 operand: the transpose kernel, then torch's strided copy."""
    from deep_gemm.gemm.fp8_triton import _k_major
    x = torch.randn(cols, rows, device="cuda").to(torch.float8_e4m3fn).t()

    def both():
        _k_major(x)
        x.contiguous()
    return both


CALLS = {"k_grouped_tn": k_grouped_tn, "dense_tn": dense_tn, "mn_major_copy": mn_major_copy}

if __name__ == "__main__":
    name = sys.argv[1] if len(sys.argv) > 1 else "k_grouped_tn"
    call = CALLS[name]()
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            call()
        torch.cuda.synchronize()
    print(f"== {name}: 5 calls")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=70))
