"""What deterministic mode (``use_deterministic_algorithms(True)``) costs: kernel time of each family whose plan it
changes, with the flag off and on, in the same process and with the same timer (L2 flushed before every call).

    python benchmarks/bench_deterministic.py [--out DIR]

Rows: FP8 and BF16 dense GEMMs at decode and prefill M (the flag removes split-K), ``einsum('bmk,bnk->mn')`` (one
batch range, 64-row tiles) and ``tf32_hc_prenorm_gemm`` (64-row blocks, one-block sub-splits at every M). A ratio
above 1 is the slow-down the mode costs; prefill rows that never split should sit at 1.
"""

from __future__ import annotations

import argparse

import torch

from bench_fp8_gemm import fp8_operands  # (first: it puts this repository's package on the path where needed)
import deep_gemm
from harness import KernelTimer, write_results


def cases():
    for m, n, k in ((1, 2112, 7168), (64, 7168, 2048), (4096, 7168, 2048)):
        a, b = fp8_operands(m, n, k)
        d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        yield f"fp8_gemm_nt m={m} n={n} k={k}", lambda a=a, b=b, d=d: deep_gemm.fp8_gemm_nt(a, b, d)
    for m, n, k in ((1, 2112, 7168), (64, 576, 7168), (4096, 2112, 7168)):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        yield f"bf16_gemm_nt m={m} n={n} k={k}", lambda a=a, b=b, d=d: deep_gemm.bf16_gemm_nt(a, b, d)
    for s, m, n, k in ((129, 64, 512, 1024), (129, 4096, 512, 1024), (4096, 256, 256, 256)):
        a = torch.randn(s, m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(s, n, k, device="cuda", dtype=torch.bfloat16)
        d = torch.empty(m, n, device="cuda", dtype=torch.float32)
        yield (f"einsum bmk,bnk->mn s={s} m={m} n={n} k={k}",
               lambda a=a, b=b, d=d: deep_gemm.einsum("bmk,bnk->mn", a, b, d))
    for m, k, splits in ((13, 7168, None), (137, 28672, None), (4096, 7168, None), (8192, 7168, None),
                         (137, 7168, 16)):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(24, k, device="cuda")
        lead = () if splits is None else (splits,)
        d = torch.empty(*lead, m, 24, device="cuda")
        sq = torch.empty(*lead, m, device="cuda")
        yield (f"tf32_hc_prenorm_gemm m={m} n=24 k={k} splits={splits}",
               lambda a=a, b=b, d=d, sq=sq, splits=splits: deep_gemm.tf32_hc_prenorm_gemm(a, b, d, sq,
                                                                                             num_splits=splits))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    timer = KernelTimer()
    before = deep_gemm.get_deterministic_algorithms()
    rows = []
    try:
        for name, fn in cases():
            times = {}
            for flag in (False, True):
                deep_gemm.use_deterministic_algorithms(flag)
                times[flag] = timer(fn)
            rows.append(dict(case=name, us=times[False], deterministic_us=times[True],
                             ratio=times[True] / times[False]))
            print(f"{name:60s} {times[False]:9.1f} us  deterministic {times[True]:9.1f} us  "
                  f"x{times[True] / times[False]:.2f}", flush=True)
    finally:
        deep_gemm.use_deterministic_algorithms(before)
    if args.out:
        write_results(args.out, "bench_deterministic", rows)


if __name__ == "__main__":
    main()
