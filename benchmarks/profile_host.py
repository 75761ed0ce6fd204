"""Host time of one small deep_gemm.fp8_gemm_nt call (tight loop, no sync), next to the same call through the
dispatcher (``torch.ops.deep_gemm``, what the public function does when the direct route of ``_ops/eager.py`` does
not apply) and to ``x.add_(1)`` (one C++ dispatcher op: the host's floor), all in one process; then where the time
goes (cProfile)."""

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
op = torch.ops.deep_gemm.fp8_gemm_nt.default
x = torch.zeros(16, device="cuda")
calls = {"deep_gemm.fp8_gemm_nt": lambda: deep_gemm.fp8_gemm_nt(a, b, d),
         "torch.ops.deep_gemm.fp8_gemm_nt": lambda: op(a[0], a[1], b[0], b[1], d),
         "x.add_(1)": lambda: x.add_(1)}
n = 2000
best = {}
for _ in range(5):  # interleaved rounds, best of each
    for name, fn in calls.items():
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best[name] = min(best.get(name, 1e9), (time.perf_counter() - t0) / n * 1e6)
        torch.cuda.synchronize()
for name, us in best.items():
    print(f"{name}: {us:.1f} us/call")
profiler = cProfile.Profile()
profiler.enable()
for _ in range(500):
    deep_gemm.fp8_gemm_nt(a, b, d)
profiler.disable()
pstats.Stats(profiler).sort_stats("tottime").print_stats(18)
