"""What limits the two-wave kernel: time it with parts of its work removed (results are wrong on purpose).

    full        the kernel as shipped
    noload      the producer arrives on `ready` without loading (consumers multiply whatever is in shared memory):
                the consumer-side ceiling, free of L2/TMA bandwidth and latency
    nopromote   wgmmas accumulate in the tensor core (no per-block FFMA promotion): the cost of promotion
    noload+nopromote   the wgmma + barrier skeleton alone

Each variant is compiled from a patched copy of kernels/fp8_gemm_ws.py (research/probes/ws_variants.py).
Prints TFLOPS per (shape, variant): CUDA events around 10 back-to-back calls, median of 15 (warm L2).
"""

import os
import sys

import torch

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, ROOT)
import deep_gemm  # noqa: E402
from deep_gemm.gemm.kernels import fp8_gemm_ws  # noqa: E402
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8  # noqa: E402
from ws_variants import NOLOAD, patched_module, use_kernel  # noqa: E402

ZEROS = "gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA), use_acc=False, is_async=True)"
PATCHES = {
    "noload": [NOLOAD],  # (the 128 x 256 kernel this script times has no narrow wave)
    "nopromote": [  # the 1D2D two-wave mainloop's wgmmas (its A operand is sliced in the call; the 1D1D loop's
        # is not)
        ("WG_ROWS, dim=0), b_tile.slice(0, BN, dim=0).permute((1, 0)),\n                             " + ZEROS,
         "WG_ROWS, dim=0), b_tile.slice(0, BN, dim=0).permute((1, 0)),\n                             acc0, "
         "use_acc=True, is_async=True)"),
        ("WG_ROWS, dim=0), b_tile.slice(BN, BN, dim=0).permute((1, 0)),\n                                 " + ZEROS,
         "WG_ROWS, dim=0), b_tile.slice(BN, BN, dim=0).permute((1, 0)),\n                                 acc1, "
         "use_acc=True, is_async=True)"),
        ("acc0 = acc0 + part * gl.expand_dims(sa0 * sb0, 1)", "acc0 = part"),
        ("acc1 = acc1 + part * gl.expand_dims(sa0 * sb1, 1)", "acc1 = part")],
}


def variant_module(name):
    return patched_module(name.replace("+", "_"), [p for part in name.split("+") for p in PATCHES.get(part, [])])


def tflops(m, n, k, fn, reps=15, back_to_back=10):
    """Median over `reps` of the mean time of `back_to_back` launches between two events: the GPU queue stays ahead
    of the host (one event pair per call would add the ~50 us host path of a call to every kernel)."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(back_to_back):
            fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / back_to_back)
    t = sorted(times)[len(times) // 2] * 1e-3
    return 2 * m * n * k / t / 1e12, t * 1e6


shapes = [tuple(int(x) for x in s.split(",")) for s in (sys.argv[1:] or ["4096,4096,7168", "4096,7168,2048",
                                                                         "4096,7168,16384"])]
original = fp8_gemm_ws._fp8_gemm_ws_kernel
for m, n, k in shapes:
    a = per_token_cast_to_fp8(torch.randn(m, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
    b = per_block_cast_to_fp8(torch.randn(n, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    for name in ["full", "noload", "nopromote", "noload+nopromote"]:
        use_kernel(original if name == "full" else variant_module(name)._fp8_gemm_ws_kernel)
        tf, us = tflops(m, n, k, lambda: deep_gemm.fp8_gemm_nt(a, b, d))
        print(f"{m}x{n}x{k} {name:18s} {us:8.1f} us {tf:7.0f} TFLOPS", flush=True)
use_kernel(original)
