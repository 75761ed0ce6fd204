"""Host time of one small deep_gemm.fp8_gemm_nt call: the benchmark's host table (the public call, the same call
through ``torch.ops.deep_gemm`` and ``x.add_(1)``, the host's floor, in one process), then where the public call's
time goes (cProfile over a tight loop, no sync)."""

import cProfile
import os
import pstats
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import deep_gemm  # noqa: E402
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8  # noqa: E402
from bench_fp8_gemm import host_overhead  # noqa: E402  (this script's folder is on sys.path)

a = per_token_cast_to_fp8(torch.randn(16, 128, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
b = per_block_cast_to_fp8(torch.randn(128, 128, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
d = torch.empty(16, 128, device="cuda", dtype=torch.bfloat16)
for _ in range(100):
    deep_gemm.fp8_gemm_nt(a, b, d)
torch.cuda.synchronize()
host_overhead([])  # the benchmark's own loop, so both print comparable numbers
profiler = cProfile.Profile()
profiler.enable()
for _ in range(500):
    deep_gemm.fp8_gemm_nt(a, b, d)
profiler.disable()
pstats.Stats(profiler).sort_stats("tottime").print_stats(18)
