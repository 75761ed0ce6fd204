"""The warp-specialised kernel as in the working tree against the same kernel at a git revision, in one process
(session 13), on the tables its two-wave tiles run: the M=4096 dense shapes, M-grouped contiguous (psum) and masked
(m >= 128). Each case is checked against the dequantised reference (every group's valid rows) under both kernels,
then both are timed alternately (benchmark timer, L2 flushed, best of 2 x 30 reps each).

    python research/probes/ws_ab.py [REV | FILE]   # the baseline: a git revision (HEAD by default) or a saved kernel file

The baseline is kernels/fp8_gemm_ws.py at REV imported as a sibling module (research/probes/ws_variants.py); the launcher is
the working tree's, so the revisions must share the kernel's signature.
"""

import os
import subprocess
import sys

import torch

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import bench_fp8_gemm as bench  # noqa: E402
import deep_gemm  # noqa: E402
import shapes  # noqa: E402
from deep_gemm.gemm import fp8_triton  # noqa: E402
from deep_gemm.gemm.kernels import fp8_gemm_ws  # noqa: E402
from deep_gemm.gemm.operands import resolve_recipe  # noqa: E402
from deep_gemm.testing import calc_diff  # noqa: E402
from ws_variants import KERNEL, patched_module, use_kernel  # noqa: E402


def cases():
    """(label, call, check) per case: check() returns the calc_diff of the call's last output."""
    for (m, n, k) in shapes.DENSE_1D2D_DG_US:
        if m < 4096:
            continue
        a, b = bench.fp8_operands(m, n, k)
        d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        r = resolve_recipe(None, None, None, b[1])
        ref = bench.reference(a, b, (128, 128))
        yield (f"dense {m}x{n}x{k}", lambda a=a, b=b, d=d, r=r: fp8_triton._launch_dense(a[0], a[1], b[0], b[1], d,
                                                                                          None, r.b[0] == 1),
               lambda d=d, ref=ref: calc_diff(d.float(), ref))
    for (g, per_group, n, k) in shapes.M_GROUPED_CONTIGUOUS_DG_TFLOPS:
        ms, starts, ends, a, b, layout = bench.contiguous_operands(g, per_group, n, k)
        d = torch.empty(a[0].size(0), n, device="cuda", dtype=torch.bfloat16)
        yield (f"contiguous {g}x{sum(ms)}x{n}x{k}",
               lambda a=a, b=b, d=d, layout=layout: deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout,
                                                                                               use_psum_layout=True),
               lambda d=d, a=a, b=b, starts=starts, ends=ends: bench.contiguous_diff(d, a, b, starts, ends))
    for (g, expected_m, n, k) in shapes.MASKED_DG:
        if expected_m < 128:  # (decode rows run the tl.* kernel)
            continue
        a, b, masked_m, masked = bench.masked_operands(g, expected_m, n, k)
        d = torch.empty(g, shapes.MASKED_MAX_M, n, device="cuda", dtype=torch.bfloat16)
        yield (f"masked {g}x{expected_m}x{n}x{k}",
               lambda a=a, b=b, d=d, masked_m=masked_m, e=expected_m: deep_gemm.m_grouped_fp8_gemm_nt_masked(
                   a, b, d, masked_m, int(e * 1.2)),
               lambda d=d, a=a, b=b, masked=masked: bench.masked_diff(d, a, b, masked))


def main():
    rev = sys.argv[1] if len(sys.argv) > 1 else "HEAD"
    if os.path.isfile(rev):  # a saved copy of the kernel file (a machine without the repository's history)
        with open(rev) as f:
            old_src = f.read()
        rev = "base"
    else:
        old_src = subprocess.run(["git", "show", f"{rev}:{KERNEL}"], cwd=ROOT, capture_output=True, text=True,
                                 check=True).stdout
    kernels = {"tree": fp8_gemm_ws._fp8_gemm_ws_kernel,
               rev: patched_module("ab_" + "".join(c if c.isalnum() else "_" for c in rev), [], source=old_src)
               ._fp8_gemm_ws_kernel}
    timer = bench.KernelTimer(reps=30)
    print(f"tree = working tree, {rev} = baseline; us (best of 2), ratio baseline / tree (> 1: the tree is faster)")
    for label, call, check in cases():
        times = {}
        for _ in range(2):
            for name, kernel in kernels.items():
                use_kernel(kernel)
                call()
                diff = check()
                assert diff < bench.CORRECTNESS_LIMIT, (label, name, diff)
                times[name] = min(times.get(name, float("inf")), timer(call))
        print(f"{label:34s} tree {times['tree']:8.1f} us  {rev} {times[rev]:8.1f} us  "
              f"{times[rev] / times['tree']:5.3f}x", flush=True)
    use_kernel(kernels["tree"])


if __name__ == "__main__":
    main()
