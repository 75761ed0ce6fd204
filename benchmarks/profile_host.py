"""Where the host time of one small deep_gemm.fp8_gemm_nt call goes (cProfile over a tight loop, no sync)."""

import cProfile
import os
import pstats
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import deep_gemm  # noqa: E402
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8  # noqa: E402

a = per_token_cast_to_fp8(torch.randn(16, 128, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
b = per_block_cast_to_fp8(torch.randn(128, 128, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
d = torch.empty(16, 128, device="cuda", dtype=torch.bfloat16)
for _ in range(100):
    deep_gemm.fp8_gemm_nt(a, b, d)
torch.cuda.synchronize()
n = 2000
t0 = time.perf_counter()
for _ in range(n):
    deep_gemm.fp8_gemm_nt(a, b, d)
print(f"deep_gemm.fp8_gemm_nt: {(time.perf_counter() - t0) / n * 1e6:.1f} us/call")
torch.cuda.synchronize()
profiler = cProfile.Profile()
profiler.enable()
for _ in range(500):
    deep_gemm.fp8_gemm_nt(a, b, d)
profiler.disable()
pstats.Stats(profiler).sort_stats("tottime").print_stats(18)
