"""The FP4 GEMM kernel (``deep_gemm/gemm/fp4``): kernel time (us), TFLOPS and the ratio to torch's BF16 matmul of
the same shape (cuBLAS, the yardstick, timed in the same process), with the kernel's calc_diff against the op's
reference. This package only (DeepGEMM runs these GEMMs on SM100 alone); the kernels are asked for with
``Fp4Overrides(kernels=True)`` while they await their GPU run.

    PYTHONPATH=$PWD python benchmarks/bench_fp4_gemm.py --out $OUT/ours

Tables: ``nvfp4`` (cublaslt_nvfp4_gemm_nt, BF16 d), ``fp8_fp4`` (fp8_fp4_gemm_nt: FP8 A x FP4 B, packed UE8M0 per
32, BF16 d), each at M 1 / 128 / 4096 over DeepSeek V3's (N, K); ``k_grouped`` (k_grouped_fp4_gemm_nt_contiguous,
8 groups, FP32 d).
"""

from __future__ import annotations

import argparse
import os
import random
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))

from harness import KernelTimer, calc_diff, geomean, write_results  # noqa: E402

DENSE_NK = [(2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048)]
DENSE_M = (1, 128, 4096)
K_GROUPED_MN = [(4096, 7168), (7168, 2048)]
K_GROUPED_AVG_K = (1024, 4096)
NUM_GROUPS = 8


def _kernel(name, *args, fp4_kwarg="overrides"):
    from deep_gemm.core.registry import run_launcher
    from deep_gemm.gemm.fp4.plan import Fp4Overrides
    assert run_launcher(name, *args, launcher_kwargs={fp4_kwarg: Fp4Overrides(kernels=True)}) is not NotImplemented


# Largest M * N * K checked against the FP64 reference (larger products cost the reference seconds each).
REFERENCE_MAX_MNK = 2**36


def _row(timer, table, call, reference, out, yardstick, flops, **fields):
    call()
    diff = float("nan")
    if flops // 2 <= REFERENCE_MAX_MNK:
        got = out.clone()
        reference()
        diff = calc_diff(got, out)
    us = timer(call)
    base_us = timer(yardstick)
    row = dict(table=table, **fields, us=us, tflops=flops / us / 1e6, bf16_us=base_us, ratio=base_us / us, diff=diff)
    shape = ", ".join(f"{k}={v}" for k, v in fields.items())
    print(f" > {table} ({shape}): {us:8.1f} us | {row['tflops']:6.1f} TFLOPS | {row['ratio']:.2f}x BF16 cuBLAS | "
          f"diff {diff:.1e}", flush=True)
    return row


def dense_rows(timer, table):
    import deep_gemm
    from deep_gemm.gemm.fp4.reference import to_cublaslt_tiled_sf
    from deep_gemm.utils import per_token_cast_to_fp4, per_token_cast_to_fp8
    ops = torch.ops.deep_gemm
    rows = []
    for n, k in DENSE_NK:
        w = torch.randn(n, k, device="cuda")
        wb = w.bfloat16()
        for m in DENSE_M:
            x = torch.randn(m, k, device="cuda")
            xb = x.bfloat16()
            d = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
            if table == "nvfp4":
                def nv(t):
                    packed, sf = deep_gemm.per_token_cast_to_nvfp4(t)
                    return packed, to_cublaslt_tiled_sf(sf.to(torch.float8_e4m3fn).view(torch.uint8))
                (a, sfa), (b, sfb) = nv(x), nv(w)
                args = (a, sfa, b, sfb, d, None)
                call = (lambda args=args: _kernel("cublaslt_nvfp4_gemm_nt", *args))
                reference = (lambda args=args: ops.cublaslt_nvfp4_gemm_nt(*args))
            else:
                a = per_token_cast_to_fp8(x, use_ue8m0=True, gran_k=32, use_packed_ue8m0=True)
                b = per_token_cast_to_fp4(w, use_ue8m0=True, gran_k=32, use_packed_ue8m0=True)
                args = (a[0], a[1], b[0], b[1], d, None, None, [1, 32], [1, 32])
                call = (lambda args=args: _kernel("fp8_fp4_gemm_nt", *args, fp4_kwarg="fp4_overrides"))
                reference = (lambda args=args: ops.fp8_fp4_gemm_nt(*args))
            rows.append(_row(timer, table, call, reference, d, lambda xb=xb, wb=wb: xb @ wb.T, 2 * m * n * k,
                             m=m, n=n, k=k))
    return rows


def k_grouped_rows(timer):
    from deep_gemm.utils import per_token_cast_to_fp4
    ops = torch.ops.deep_gemm
    rng = random.Random(0)
    rows = []
    for m, n in K_GROUPED_MN:
        for avg_k in K_GROUPED_AVG_K:
            ks = [int(rng.uniform(0.7, 1.3) * avg_k) // 128 * 128 for _ in range(NUM_GROUPS)]
            sum_k = sum(ks)
            x = torch.randn(m, sum_k, device="cuda")
            w = torch.randn(n, sum_k, device="cuda")
            a, sfa = per_token_cast_to_fp4(x, use_ue8m0=True, gran_k=32)
            b, sfb = per_token_cast_to_fp4(w, use_ue8m0=True, gran_k=32)
            layout = torch.tensor(ks, dtype=torch.int32, device="cuda")
            d = torch.empty(NUM_GROUPS, m, n, device="cuda")
            args = (a, sfa.T.contiguous(), b, sfb.T.contiguous(), d, ks, layout, None, [1, 1, 32], "mn", False)
            xb, wb = x.bfloat16(), w.bfloat16()
            yardstick = (lambda xb=xb, wb=wb, ks=ks: [xb[:, s:s + kg] @ wb[:, s:s + kg].T
                                                      for s, kg in zip([sum(ks[:i]) for i in range(len(ks))], ks)])
            rows.append(_row(timer, "k_grouped", lambda args=args: _kernel("k_grouped_fp4_gemm_nt_contiguous", *args),
                             lambda args=args: ops.k_grouped_fp4_gemm_nt_contiguous(*args), d, yardstick,
                             2 * m * n * sum_k, m=m, n=n, groups=NUM_GROUPS, sum_k=sum_k))
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "benchmarks/results"))
    parser.add_argument("--tables", default="nvfp4,fp8_fp4,k_grouped")
    args = parser.parse_args()
    tables = set(args.tables.split(","))
    timer = KernelTimer()
    results = []
    for table in ("nvfp4", "fp8_fp4"):
        if table in tables:
            results += dense_rows(timer, table)
    if "k_grouped" in tables:
        results += k_grouped_rows(timer)
    for table in sorted({r["table"] for r in results}):
        ratios = [r["ratio"] for r in results if r["table"] == table]
        print(f" > {table}: geomean {geomean(ratios):.2f}x BF16 cuBLAS over {len(ratios)} shapes", flush=True)
    write_results(args.out, "bench_fp4_gemm", results)


if __name__ == "__main__":
    main()
