"""A/B of the BF16 WS kernel's wave-filling tail tiles (bf16_plan.WS_TAIL_TILES) on the dense M = 4096 rows of
DeepGEMM's test_bf16.py whose N is not a multiple of 128 (2112 and 576, K = 7168), nt and tn, one process, one timer
(benchmarks/harness.KernelTimer: kernels only, L2 flushed). Runs under this package (variants) or under DeepGEMM
(`deep_gemm.bf16_gemm_{nt,tn}` only: its time, the yardstick of the same device call).

Variants (this package; each checked against an FP32 torch reference, calc_diff < 1e-5, and the same bits twice):
  plan       the shipped plan
  t128x64    128 x (128 + 64) forced (4096 x 2112: 352 tiles, 2.67 waves)
  (t256x8    128 x (256 + 8), 4096 x 2112 in 256 tiles / 1.94 waves: measured in session 29 call 2 against a
             branch that allowed it, 183.3 us against 171.6 for t128x64: dropped, see research/results/
             2026-12-03-h200-s29-call2/README.md)
  t128x16    128 x (128 + 16) forced (4096 x 576: 128 tiles, 0.97 waves)

    PYTHONPATH=$PWD python research/probes/bf16_tail_ab.py
    PYTHONPATH=$PWD/.dg/DeepGEMM python research/probes/bf16_tail_ab.py      (DeepGEMM's times)
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks"))
import deep_gemm  # noqa: E402
from harness import KernelTimer, calc_diff, provider  # noqa: E402

ROWS = [(4096, 2112, 7168), (4096, 576, 7168)]


def variants(n):
    from deep_gemm.gemm.bf16_plan import Bf16Config, Bf16Overrides
    out = {"plan": None}
    for name, bn, tail in (("t128x64", 128, 64), ("t128x16", 128, 16)):
        if n % (bn + tail) == 0:
            out[name] = Bf16Overrides(ws=True, config=Bf16Config(128, bn, 64, 5, 4, block_n_tail=tail))
    return out


def main():
    torch.manual_seed(0)
    timer = KernelTimer()
    ours = provider() == "deep_gemm"
    for m, n, k in ROWS:
        a_mk = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b_nk = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        ref = a_mk.float() @ b_nk.float().T
        for layout in ("nt", "tn"):
            # tn: A as [K, M] and B as [K, N], contiguous (as DeepGEMM's test passes them)
            a_arg = a_mk if layout == "nt" else a_mk.T.contiguous()
            b_arg = b_nk if layout == "nt" else b_nk.T.contiguous()
            d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            flops = 2 * m * n * k
            line = f"{m}x{n}x{k} {layout}:"
            if not ours:
                fn = getattr(deep_gemm, f"bf16_gemm_{layout}")
                fn(a_arg, b_arg, d)
                t = timer(lambda: fn(a_arg, b_arg, d))
                print(f"{line} DeepGEMM {t:7.1f} us ({flops / t / 1e6:4.0f} TFLOPS) diff {calc_diff(d, ref):.1e}",
                      flush=True)
                continue
            from deep_gemm._ops.library import run_launcher
            times = {}
            for name, over in variants(n).items():
                kw = {} if over is None else dict(launcher_kwargs=dict(overrides=over))

                def call():
                    return run_launcher(f"bf16_gemm_{layout}", a_arg, b_arg, d, None, "nk", **kw)
                call()
                torch.cuda.synchronize()
                first = d.clone()
                diff = calc_diff(d, ref)
                call()
                torch.cuda.synchronize()
                same = torch.equal(first, d)
                times[name] = timer(call)
                flag = "" if diff < 1e-5 and same else f" WRONG diff={diff:.1e} same={same}"
                line += f" {name} {times[name]:7.1f} us ({flops / times[name] / 1e6:4.0f}){flag}"
            line += " | plan/x: " + " ".join(f"{x} {times['plan'] / t:.3f}" for x, t in times.items() if x != "plan")
            print(line, flush=True)


if __name__ == "__main__":
    main()
