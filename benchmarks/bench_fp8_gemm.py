"""FP8 GEMM benchmark on the GPU: every shape of DeepGEMM's H200 tables (benchmarks/shapes.py), deep_gemm against
torch's block-wise scaled_mm (cuBLAS doing the same 1x128 / 128x128 maths) in the same process with the same timer,
and against DeepGEMM's H200 figure.

    python benchmarks/bench_fp8_gemm.py [--out DIR] [--quick] [--tables dense,1d1d,few_tiles,...]

Timer: torch.profiler kernel time (the sum of every kernel the call launches), each call preceded by a 256 MB
buffer fill that flushes the 60 MB L2; median over reps. Every case is checked against the fp32 reference first.
Prints one DeepGEMM-style line per case and geometric means per table; writes JSON and markdown to --out.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import importlib.util
import os
import random
import sys
import time
from functools import partial

import torch

# This repository's package unless another deep_gemm (DeepGEMM, for the same-run yardstick) is first on the path.
if importlib.util.find_spec("deep_gemm") is None:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

import deep_gemm  # noqa: E402
from deep_gemm.testing import calc_diff  # noqa: E402
from deep_gemm.utils import align, per_block_cast_to_fp8, per_token_cast_to_fp8  # noqa: E402
from deep_gemm.utils.math import ceil_div  # noqa: E402

import shapes  # noqa: E402
from harness import KernelTimer  # noqa: E402,F401  (the probes in scripts/ take it from here)

CORRECTNESS_LIMIT = 1e-3  # DeepGEMM's calc_diff bar for FP8 GEMMs


def fp8_operands(m, n, k, per_row_b=False):
    a_bf = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b_bf = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    a = per_token_cast_to_fp8(a_bf, use_ue8m0=False)
    b = per_token_cast_to_fp8(b_bf, use_ue8m0=False) if per_row_b else per_block_cast_to_fp8(b_bf, use_ue8m0=False)
    # DeepGEMM's kernels read A scales MN-major (TMA-aligned); give both libraries that layout.
    sfa = torch.empty(a[1].size(1), align(m, 4), device="cuda").T[:m]
    sfa.copy_(a[1])
    return (a[0], sfa), b


def _dequantize(data, sf, gran):
    """FP32 values of an FP8 operand [MN, K] with FP32 scales of (gran_mn, gran_k) blocks. Plain torch: the bench also
    runs under DeepGEMM, whose package has none of ours (importing it there fails)."""
    mn, k = data.shape
    scales = sf.float().repeat_interleave(gran[0], dim=0)[:mn].repeat_interleave(gran[1], dim=1)[:, :k]
    return data.float() * scales


def reference(a, b, gran_b):
    return _dequantize(a[0], a[1], (1, 128)) @ _dequantize(b[0], b[1], gran_b).T


def torch_blockwise(a, b, m):
    """cuBLAS block-wise FP8 through torch (`torch._scaled_mm` with block-wise scales); None if unavailable."""
    try:
        from torch.nn.functional import ScalingType, scaled_mm
    except ImportError:
        return None
    sfa = a[1].T.contiguous().T  # exactly M-major (torch rejects the TMA-padded row stride)
    sfb = b[1].contiguous()
    out = torch.empty(m, b[0].size(0), device="cuda", dtype=torch.bfloat16)

    def run():
        return scaled_mm(a[0], b[0].t(), sfa, ScalingType.BlockWise1x128, sfb.t(), ScalingType.BlockWise128x128,
                         output_dtype=torch.bfloat16)
    try:
        run()
    except Exception as error:  # noqa: BLE001 - report and carry on without the yardstick
        print(f"  (torch block-wise scaled_mm unavailable: {str(error).splitlines()[0][:100]})")
        return None
    del out
    return run


def geomean(xs):
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def _time_tl_only(timer, op_name, *args, **kwargs):
    """The op's time with the warp-specialised kernel off (the tl.* kernel only), in the same process: its CUDA
    launcher run with ``Fp8Overrides(ws_mode="off")``."""
    from deep_gemm.core.registry import run_launcher
    from deep_gemm.gemm.fp8.plan import Fp8Overrides
    extra = dict(overrides=Fp8Overrides(ws_mode="off"))
    return timer(lambda: run_launcher(op_name, *args, launcher_kwargs=extra, **kwargs))


def bench_dense(timer, results, quick, compare_ws=False):
    print("\n== dense FP8 1D2D, NT, BF16 out ==")
    for (m, n, k), dg_us in shapes.DENSE_1D2D_DG_US.items():
        if quick and m == 128:
            continue
        a, b = fp8_operands(m, n, k)
        d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        deep_gemm.fp8_gemm_nt(a, b, d)
        diff = calc_diff(d, reference(a, b, (128, 128)))
        us = timer(lambda: deep_gemm.fp8_gemm_nt(a, b, d))
        yard = torch_blockwise(a, b, m)
        torch_us = timer(yard) if yard else float("nan")
        ws_us = float("nan")
        if compare_ws and m >= 4096:
            ws_us = _time_tl_only(timer, "fp8_gemm_nt", a[0], a[1], b[0], b[1], d)
        flops = 2 * m * n * k
        nbytes = m * k + n * k + m * n * 2 + (m + n // 128) * ceil_div(k, 128) * 4
        row = dict(table="dense_1d2d", m=m, n=n, k=k, us=us, tflops=flops / us / 1e6, gbps=nbytes / us / 1e3,
                   torch_us=torch_us, vs_torch=torch_us / us, dg_us=dg_us, vs_deepgemm=dg_us / us, diff=diff,
                   tl_only_us=ws_us)
        results.append(row)
        print(f" > M={m:5d} N={n:5d} K={k:5d}: {us:7.1f} us | {row['tflops']:6.0f} TFLOPS | {row['gbps']:5.0f} GB/s"
              f" | vs torch {row['vs_torch']:.2f}x | vs DeepGEMM {row['vs_deepgemm']:.2f}x | diff {diff:.1e}"
              + (f" | tl.* only {ws_us:.1f} us" if ws_us == ws_us else ""))
        assert diff < CORRECTNESS_LIMIT, f"wrong result at {(m, n, k)}: calc_diff {diff}"


def wgrad_call(m, n, k):
    """A 1D1D weight-gradient call (FP32 D accumulated into C = D, DeepGEMM's wgrad form): (operands, D, the
    expected result of one call, the call)."""
    a, b = fp8_operands(m, n, k, per_row_b=True)
    d = torch.randn(m, n, device="cuda", dtype=torch.float32)
    expected = reference(a, b, (1, 128)) + d
    return a, b, d, expected, partial(deep_gemm.fp8_gemm_nt, a, b, d, c=d, recipe=(1, 1, 128))


def bench_1d1d(timer, results, compare_ws=False):
    print("\n== dense FP8 1D1D (weight gradient), FP32 out accumulated into C ==")
    for (m, n, k), dg_tflops in shapes.DENSE_1D1D_DG_TFLOPS.items():
        a, b, d, expected, call = wgrad_call(m, n, k)
        call()
        diff = calc_diff(d, expected)
        us = timer(call)
        tflops = 2 * m * n * k / us / 1e6
        row = dict(table="dense_1d1d", m=m, n=n, k=k, us=us, tflops=tflops, dg_tflops=dg_tflops,
                   vs_deepgemm=tflops / dg_tflops, diff=diff)
        extra = ""
        if compare_ws:
            row["tl_us"] = _time_tl_only(timer, "fp8_gemm_nt", a[0], a[1], b[0], b[1], d, c=d,
                                         recipe=[1, 1, 128])
            extra = f" | tl.* only {row['tl_us']:7.1f} us"
        results.append(row)
        print(f" > M={m:5d} N={n:5d} K={k:5d}: {us:7.1f} us | {tflops:6.0f} TFLOPS | "
              f"vs DeepGEMM {tflops / dg_tflops:.2f}x | diff {diff:.1e}{extra}")
        assert diff < CORRECTNESS_LIMIT


def contiguous_diff(d, a, b, starts, ends):
    """Worst calc_diff over the groups' rows of an M-grouped contiguous output against the dequantised reference."""
    return max(calc_diff(d[s:e], reference((a[0][s:e], a[1][s:e]), (b[0][i], b[1][i]), (128, 128)))
               for i, (s, e) in enumerate(zip(starts, ends)))


def masked_diff(d, a, b, masked):
    """Worst calc_diff over the groups' valid rows of a masked output against the dequantised reference."""
    return max(calc_diff(d[i, :m], reference((a[0][i, :m], a[1][i, :m]), (b[0][i], b[1][i]), (128, 128)))
               for i, m in enumerate(masked) if m)


def contiguous_operands(g, per_group, n, k):
    """DeepGEMM's contiguous benchmark setup: g groups of ~per_group rows (seeded), segments aligned as the kernels
    require; returns (ms, starts, ends, a, b, psum layout)."""
    alignment = deep_gemm.get_mk_alignment_for_contiguous_layout()
    random.seed(0)
    ms = [int(per_group * random.uniform(0.7, 1.3)) for _ in range(g)]
    starts, ends, start = [], [], 0
    for mg in ms:
        starts.append(start)
        ends.append(start + mg)
        start = align(start + mg, alignment)
    a, _ = fp8_operands(start, 128, k)
    b_bf = torch.randn(g, n, k, device="cuda", dtype=torch.bfloat16)
    bq = [per_block_cast_to_fp8(b_bf[i], use_ue8m0=False) for i in range(g)]
    b = (torch.stack([q[0] for q in bq]), torch.stack([q[1] for q in bq]))
    return ms, starts, ends, a, b, torch.tensor(ends, dtype=torch.int32, device="cuda")


# Rows with under a round of 128-row tiles (the few-tile holes against DeepGEMM, 0.42-0.66x on the H100,
# 2026-12-06): 1D1D with FP32 C at M = 576, and 1D2D 4096 x 512 x 32768. No recorded DeepGEMM figure: pair this
# table with DeepGEMM's run of it (compare_providers.py, or sweeps/sweep_fp8_configs.py --dg-log).
FEW_TILE_ROWS = (((576, 4096, 7168), True), ((4096, 512, 32768), False))


def bench_few_tiles(timer, results):
    for (m, n, k), wgrad in FEW_TILE_ROWS:
        print(f"\n== dense FP8 {'1D1D' if wgrad else '1D2D'} (few tiles)"
              f"{', FP32 out accumulated into C' if wgrad else ', BF16 out'} ==")
        if wgrad:
            a, b, d, expected, call = wgrad_call(m, n, k)
        else:
            a, b = fp8_operands(m, n, k)
            d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            expected = reference(a, b, (128, 128))
            call = partial(deep_gemm.fp8_gemm_nt, a, b, d)
        call()
        diff = calc_diff(d, expected)
        us = timer(call)
        tflops = 2 * m * n * k / us / 1e6
        results.append(dict(table="few_tiles", m=m, n=n, k=k, recipe="1d1d" if wgrad else "1d2d", us=us,
                            tflops=tflops, diff=diff))
        print(f" > M={m:5d} N={n:5d} K={k:5d}: {us:7.1f} us | {tflops:6.0f} TFLOPS | diff {diff:.1e}")
        assert diff < CORRECTNESS_LIMIT, f"wrong result at {(m, n, k)}: calc_diff {diff}"


def bench_contiguous(timer, results):
    print("\n== M-grouped contiguous FP8 (psum layout) ==")
    for (g, per_group, n, k), dg_tflops in shapes.M_GROUPED_CONTIGUOUS_DG_TFLOPS.items():
        ms, starts, ends, a, b, layout = contiguous_operands(g, per_group, n, k)
        m = a[0].size(0)
        d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout, use_psum_layout=True)
        diff = contiguous_diff(d, a, b, starts, ends)
        us = timer(lambda: deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout, use_psum_layout=True))
        tflops = 2 * sum(ms) * n * k / us / 1e6
        row = dict(table="m_grouped_contiguous", groups=g, m=sum(ms), n=n, k=k, us=us, tflops=tflops,
                   dg_tflops=dg_tflops, vs_deepgemm=tflops / dg_tflops, diff=diff)
        results.append(row)
        print(f" > G={g} M={sum(ms):6d} N={n:5d} K={k:5d}: {us:7.1f} us | {tflops:6.0f} TFLOPS | "
              f"vs DeepGEMM {tflops / dg_tflops:.2f}x | diff {diff:.1e}")
        assert diff < CORRECTNESS_LIMIT


def masked_operands(g, expected_m, n, k):
    """DeepGEMM's masked test data: Mmax = 4096 rows per group, ~expected_m of them valid (seeded)."""
    max_m = shapes.MASKED_MAX_M
    random.seed(0)
    masked = [int(expected_m * random.uniform(0.7, 1.3)) for _ in range(g)]
    a_bf = torch.randn(g, max_m, k, device="cuda", dtype=torch.bfloat16)
    aq = [per_token_cast_to_fp8(a_bf[i], use_ue8m0=False) for i in range(g)]
    a = (torch.stack([q[0] for q in aq]), torch.stack([q[1] for q in aq]))
    b_bf = torch.randn(g, n, k, device="cuda", dtype=torch.bfloat16)
    bq = [per_block_cast_to_fp8(b_bf[i], use_ue8m0=False) for i in range(g)]
    b = (torch.stack([q[0] for q in bq]), torch.stack([q[1] for q in bq]))
    return a, b, torch.tensor(masked, dtype=torch.int32, device="cuda"), masked


def bench_masked(timer, results):
    print("\n== M-grouped masked FP8 ==")
    for (g, expected_m, n, k), (dg_us, dg_tflops, dg_gbps) in shapes.MASKED_DG.items():
        a, b, masked_m, masked = masked_operands(g, expected_m, n, k)
        d = torch.empty(g, shapes.MASKED_MAX_M, n, device="cuda", dtype=torch.bfloat16)
        call = lambda: deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, int(expected_m * 1.2))  # noqa: E731
        call()
        diff = masked_diff(d, a, b, masked)
        us = timer(call)
        rows = sum(masked)
        tflops = 2 * rows * n * k / us / 1e6
        gbps = (rows * k + g * n * k + rows * n * 2) / us / 1e3
        row = dict(table="masked", groups=g, expected_m=expected_m, n=n, k=k, us=us, tflops=tflops, gbps=gbps,
                   dg_us=dg_us, vs_deepgemm=dg_us / us, diff=diff)
        results.append(row)
        print(f" > G={g:2d} m={expected_m:4d} N={n:5d} K={k:5d}: {us:7.1f} us | {tflops:6.0f} TFLOPS | {gbps:5.0f} GB/s"
              f" | vs DeepGEMM {dg_us / us:.2f}x | diff {diff:.1e}")
        assert diff < CORRECTNESS_LIMIT


def k_grouped_operands(g, m, n, k_per_group):
    """The K-grouped table's data (seeded): (ks, a, b, layout): per-group K (~k_per_group, multiples of 128), A and
    B MN-major FP8 with 1D1D scales over the concatenated K, the K sizes on the GPU."""
    random.seed(0)
    ks = [align(int(k_per_group * random.uniform(0.7, 1.3)), 128) for _ in range(g)]
    sum_k = sum(ks)
    a = (torch.randn(sum_k, m, device="cuda").to(torch.float8_e4m3fn),
         torch.rand(sum_k // 128, m, device="cuda") + 0.5)
    b = (torch.randn(sum_k, n, device="cuda").to(torch.float8_e4m3fn),
         torch.rand(sum_k // 128, n, device="cuda") + 0.5)
    return ks, a, b, torch.tensor(ks, dtype=torch.int32, device="cuda")


def k_grouped_reference(a, b, ks, layout, g, m, n):
    """The K-grouped product ([G, M, N] FP32) of k_grouped_operands' data from the dequantised operands: group i takes
    the next ks[i] rows of A [sum K, M] and B [sum K, N] (scales per 128 of them). Plain torch, as ``reference``."""
    expected = torch.zeros(g, m, n, device=a[0].device)
    start = 0
    for i, k in enumerate(ks):
        rows = slice(start, start + k)
        a_i = _dequantize(a[0][rows].T, a[1][start // 128:(start + k) // 128].T, (1, 128))
        b_i = _dequantize(b[0][rows].T, b[1][start // 128:(start + k) // 128].T, (1, 128))
        expected[i] = a_i @ b_i.T
        start += k
    return expected


def bench_k_grouped(timer, results, compare_ws=False):
    print("\n== K-grouped FP8 (weight gradient), FP32 out accumulated into C ==")
    if not hasattr(deep_gemm, "backends") and torch.cuda.get_device_capability()[0] == 9:
        # DeepGEMM's SM90 build has no K-grouped tn kernel (its launch fails); its nt rows are in --tables moe.
        print(" (skipped: DeepGEMM runs k_grouped_fp8_gemm_tn_contiguous on SM100 only; --tables moe times the nt "
              "form both packages run)")
        return
    for g, m, n, k_per_group in shapes.K_GROUPED:
        ks, a, b, layout = k_grouped_operands(g, m, n, k_per_group)
        sum_k = sum(ks)
        d = torch.zeros(g, m, n, device="cuda")
        deep_gemm.k_grouped_fp8_gemm_tn_contiguous(a, b, d, ks, layout, c=d)
        diff = calc_diff(d, k_grouped_reference(a, b, ks, layout, g, m, n))  # (C = D was zero: D is the product)
        us = timer(lambda: deep_gemm.k_grouped_fp8_gemm_tn_contiguous(a, b, d, ks, layout, c=d))
        tflops = 2 * m * n * sum_k / us / 1e6
        row = dict(table="k_grouped_tn", groups=g, m=m, n=n, sum_k=sum_k, us=us, tflops=tflops, diff=diff)
        extra = ""
        if compare_ws:
            row["tl_us"] = _time_tl_only(timer, "k_grouped_fp8_gemm_tn_contiguous", a[0], a[1], b[0], b[1], d,
                                         ks, layout, c=d)
            extra = f" | tl.* only {row['tl_us']:7.1f} us"
        results.append(row)
        print(f" > G={g:2d} M={m} N={n} sumK={sum_k}: {us:7.1f} us | {tflops:6.0f} TFLOPS | diff {diff:.1e}{extra}")
        assert diff < CORRECTNESS_LIMIT


# MoE rows measured side by side with DeepGEMM (the same script under PYTHONPATH=.dg/DeepGEMM; only the API both
# packages share): DeepGEMM's test_fp8_fp4 shapes. Contiguous: (G, rows per group, N, K); masked: (G, expected m
# per group, N, K) with Mmax = MASKED_MAX_M rows per group.
MOE_CONTIGUOUS = [(4, 8192, 6144, 7168), (4, 8192, 7168, 3072), (8, 4096, 4096, 4096), (8, 4096, 4096, 2048)]
MOE_MASKED = [(32, 20, 7168, 3072), (32, 192, 6144, 7168), (6, 1024, 4096, 4096), (6, 20, 6144, 7168)]


def _dequant_rows(data, sf):
    """FP32 values of per-token (1 x 128) scaled rows, plain torch (runs under either package)."""
    return data.float() * sf.repeat_interleave(128, dim=-1)[..., :data.size(-1)]


def _dequant_blocks(data, sf):
    """FP32 values of 128 x 128 block-scaled [N, K] weights."""
    full = sf.repeat_interleave(128, dim=-2).repeat_interleave(128, dim=-1)
    return data.float() * full[:data.size(-2), :data.size(-1)]


def _group_diff(d_rows, a_rows, b):
    return calc_diff(d_rows, _dequant_rows(*a_rows) @ _dequant_blocks(*b).T)


def _moe_contiguous_rows(timer, results, shapes_list):
    alignment = deep_gemm.get_mk_alignment_for_contiguous_layout()
    for g, per_group, n, k in shapes_list:
        random.seed(0)
        ms = [int(per_group * random.uniform(0.7, 1.3)) for _ in range(g)]
        starts, ends, start = [], [], 0
        for mg in ms:
            starts.append(start)
            ends.append(start + mg)
            start = align(start + mg, alignment)
        x = torch.randn(start, k, device="cuda", dtype=torch.bfloat16)
        ids = torch.full((start,), -1, dtype=torch.int32, device="cuda")
        for i, (s, e) in enumerate(zip(starts, ends)):
            x[e:align(e, alignment)] = 0
            ids[s:e] = i
        a = per_token_cast_to_fp8(x, use_ue8m0=False)
        del x
        bq = [per_block_cast_to_fp8(torch.randn(n, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
              for _ in range(g)]
        b = (torch.stack([q[0] for q in bq]), torch.stack([q[1] for q in bq]))
        psum = torch.tensor(ends, dtype=torch.int32, device="cuda")
        d = torch.empty(start, n, device="cuda", dtype=torch.bfloat16)
        forms = {"psum": (psum, dict(use_psum_layout=True, ensure_zero_padding=False)),
                 "psum_zero_padded": (psum, dict(use_psum_layout=True, ensure_zero_padding=True)),
                 "expert_ids": (ids, {})}
        for form, (layout, kwargs) in forms.items():
            call = lambda: deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout, **kwargs)  # noqa: E731
            d.fill_(float("nan"))
            call()
            diff = max(_group_diff(d[s:e], (a[0][s:e], a[1][s:e]), (b[0][i], b[1][i]))
                       for i, (s, e) in enumerate(zip(starts, ends)) if i in (0, g - 1) and e > s)
            us = timer(call)
            tflops = 2 * sum(ms) * n * k / us / 1e6
            results.append(dict(table="moe_contiguous", form=form, groups=g, m=sum(ms), n=n, k=k, us=us,
                                tflops=tflops, diff=diff))
            print(f" > {form:17s} G={g} M={sum(ms):6d} N={n:5d} K={k:5d}: {us:7.1f} us | {tflops:6.0f} TFLOPS | "
                  f"diff {diff:.1e}")
            assert diff < CORRECTNESS_LIMIT


def _moe_masked_rows(timer, results, shapes_list):
    max_m, alignment = shapes.MASKED_MAX_M, deep_gemm.get_mk_alignment_for_contiguous_layout()
    for g, expected_m, n, k in shapes_list:
        random.seed(0)
        masked = [int(expected_m * random.uniform(0.7, 1.3)) for _ in range(g)]
        a = per_token_cast_to_fp8(torch.randn(g * max_m, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
        bq = [per_block_cast_to_fp8(torch.randn(n, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
              for _ in range(g)]
        b = (torch.stack([q[0] for q in bq]), torch.stack([q[1] for q in bq]))
        masked_m = torch.tensor(masked, dtype=torch.int32, device="cuda")
        # The decode form of the psum layout (DeepGEMM's masked test, psum variant): group g's rows packed from
        # align(end[g-1]) in one [G * Mmax, K] A; rows past the last group are never read.
        starts, ends, start = [], [], 0
        for m in masked:
            starts.append(start)
            ends.append(start + m)
            start = align(start + m, alignment)
        psum = torch.tensor(ends, dtype=torch.int32, device="cuda")
        a3 = (a[0].view(g, max_m, k), a[1].view(g, max_m, -1))
        d3 = torch.empty(g, max_m, n, device="cuda", dtype=torch.bfloat16)
        d2 = torch.empty(g * max_m, n, device="cuda", dtype=torch.bfloat16)
        hint = int(expected_m * 1.2)
        forms = {
            "masked": (lambda: deep_gemm.m_grouped_fp8_gemm_nt_masked(a3, b, d3, masked_m, hint),
                       lambda i: (d3[i, :masked[i]], (a3[0][i, :masked[i]], a3[1][i, :masked[i]]))),
            "psum_decode": (lambda: deep_gemm.m_grouped_fp8_gemm_nt_contiguous(
                                a, b, d2, psum, use_psum_layout=True, expected_m_for_psum_layout=hint),
                            lambda i: (d2[starts[i]:ends[i]], (a[0][starts[i]:ends[i]], a[1][starts[i]:ends[i]]))),
        }
        for form, (call, rows_of) in forms.items():
            call()
            diff = 0.0
            for i in (0, g - 1):
                if masked[i]:
                    d_rows, a_rows = rows_of(i)
                    diff = max(diff, _group_diff(d_rows, a_rows, (b[0][i], b[1][i])))
            us = timer(call)
            rows = sum(masked)
            tflops = 2 * rows * n * k / us / 1e6
            gbps = (rows * k + g * n * k + rows * n * 2) / us / 1e3
            results.append(dict(table="moe_masked", form=form, groups=g, expected_m=expected_m, n=n, k=k, us=us,
                                tflops=tflops, gbps=gbps, diff=diff))
            print(f" > {form:11s} G={g:2d} m={expected_m:4d} N={n:5d} K={k:5d}: {us:7.1f} us | {tflops:6.0f} TFLOPS"
                  f" | {gbps:5.0f} GB/s | diff {diff:.1e}")
            assert diff < CORRECTNESS_LIMIT


# K-grouped nt (DeepGEMM's SM90 K-grouped test layout): (G, M, N, K per group).
MOE_K_GROUPED = [(4, 4096, 7168, 8192), (8, 4096, 7168, 4096), (16, 7168, 2048, 2048)]


def _moe_k_grouped_rows(timer, results, shapes_list):
    """K-grouped nt, C = D (FP32): each group's A [M, K_g] and B [N, K_g] K-major blocks one after the other,
    per-channel scales over the concatenated K (MN-major, as DeepGEMM's test passes them). Ours also with the
    group blocks concatenated into one operand per call first (Fp8Overrides.k_grouped_device_descriptors=False;
    the default reads them in place): form "copied"."""
    ours = hasattr(deep_gemm, "backends")
    for g, m, n, k_per_group in shapes_list:
        random.seed(0)
        ks = [align(int(k_per_group * random.uniform(0.7, 1.3)), 128) for _ in range(g)]
        qa = [per_token_cast_to_fp8(torch.randn(m, kg, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
              for kg in ks]
        qb = [per_token_cast_to_fp8(torch.randn(n, kg, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
              for kg in ks]
        a = (torch.cat([q[0].flatten() for q in qa]), torch.cat([q[1] for q in qa], dim=1).T.contiguous().T)
        b = (torch.cat([q[0].flatten() for q in qb]), torch.cat([q[1] for q in qb], dim=1).T.contiguous().T)
        layout = torch.tensor(ks, dtype=torch.int32, device="cuda")
        d = torch.randn(g, m, n, device="cuda")
        c0 = d.clone()
        forms = {"default": lambda: deep_gemm.k_grouped_fp8_gemm_nt_contiguous(a, b, d, ks, layout, c=d)}
        if ours:
            from deep_gemm.core.registry import run_launcher
            from deep_gemm.gemm.fp8.plan import Fp8Overrides
            extra = dict(overrides=Fp8Overrides(k_grouped_device_descriptors=False))
            forms["copied"] = lambda: run_launcher("k_grouped_fp8_gemm_nt_contiguous", a[0], a[1], b[0], b[1], d,
                                                     ks, layout, d, launcher_kwargs=extra)
        for form, call in forms.items():
            d.copy_(c0)
            call()
            diff = max(calc_diff(d[i], c0[i] + _dequant_rows(*qa[i]) @ _dequant_rows(*qb[i]).T) for i in (0, g - 1))
            us = timer(call)
            tflops = 2 * m * n * sum(ks) / us / 1e6
            results.append(dict(table="moe_k_grouped_nt", form=form, groups=g, m=m, n=n, sum_k=sum(ks), us=us,
                                tflops=tflops, diff=diff))
            print(f" > {form:8s} G={g:2d} M={m} N={n} sumK={sum(ks)}: {us:7.1f} us | {tflops:6.0f} TFLOPS | "
                  f"diff {diff:.1e}")
            assert diff < CORRECTNESS_LIMIT


def bench_moe(timer, quick, out_dir):
    """The MoE rows for a side-by-side run (--tables moe): psum (zero-padded or not), expert ids, masked, masked
    decode through the psum layout, K-grouped nt. Writes bench_fp8_moe.json (harness.write_results: provider,
    GPU)."""
    from harness import write_results
    results = []
    print("\n== MoE: M-grouped contiguous FP8 (psum, psum zero-padded, expert ids) ==")
    _moe_contiguous_rows(timer, results, MOE_CONTIGUOUS[:2] if quick else MOE_CONTIGUOUS)
    print("\n== MoE: masked FP8, and masked decode through the psum layout ==")
    _moe_masked_rows(timer, results, MOE_MASKED[:2] if quick else MOE_MASKED)
    print("\n== MoE: K-grouped FP8 nt (weight gradient), FP32 accumulated into C = D ==")
    _moe_k_grouped_rows(timer, results, MOE_K_GROUPED[:1] if quick else MOE_K_GROUPED)
    write_results(out_dir, "bench_fp8_moe", results)
    return results


def host_overhead(results):
    print("\n== host overhead per call (tight loop, no sync, tiny shape) ==")
    a, b = fp8_operands(16, 128, 128)
    d = torch.empty(16, 128, device="cuda", dtype=torch.bfloat16)
    x = torch.zeros(1, device="cuda")
    calls = {
        "deep_gemm.fp8_gemm_nt": lambda: deep_gemm.fp8_gemm_nt(a, b, d),
        "torch.ops.deep_gemm.fp8_gemm_nt": lambda: torch.ops.deep_gemm.fp8_gemm_nt(a[0], a[1], b[0], b[1], d),
        "x.add_(1) (torch floor)": lambda: x.add_(1),
    }
    for name, fn in calls.items():
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        n = 2000
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        us = (time.perf_counter() - t0) / n * 1e6
        torch.cuda.synchronize()
        results.append(dict(table="host_overhead", call=name, us=us))
        print(f" > {name:36s} {us:6.1f} us/call")


def summarize(results):
    lines = ["", "== geometric means =="]
    for table, key in (("dense_1d2d", "vs_deepgemm"), ("dense_1d2d", "vs_torch"), ("dense_1d1d", "vs_deepgemm"),
                       ("m_grouped_contiguous", "vs_deepgemm"), ("masked", "vs_deepgemm")):
        rows = [r for r in results if r["table"] == table and key in r]
        if rows:
            lines.append(f" {table:22s} {key:12s} {geomean([r[key] for r in rows]):.3f}x over {len(rows)} shapes")
    m4096 = [r for r in results if r["table"] == "dense_1d2d" and r["m"] == 4096]
    if m4096:
        lines.append(f" dense M=4096: min {min(r['tflops'] for r in m4096):.0f} TFLOPS, vs torch geomean "
                     f"{geomean([r.get('vs_torch') for r in m4096]):.3f}x")
    print("\n".join(lines))
    return lines


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "benchmarks/results"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--compare-ws", action="store_true",
                        help="also time with the warp-specialised kernel off (tl.* only) at M=4096, for 1D1D and "
                             "K-grouped")
    parser.add_argument("--tables", default="dense,1d1d,contiguous,masked,k_grouped,host")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 references must be fp32
    timer = KernelTimer()
    results = []
    tables = set(args.tables.split(","))
    if "moe" in tables:  # the provider-agnostic MoE rows (this package or DeepGEMM), their own JSON
        bench_moe(timer, args.quick, args.out)
        if tables == {"moe"}:
            return
    if "dense" in tables:
        bench_dense(timer, results, args.quick, args.compare_ws)
    if "1d1d" in tables:
        bench_1d1d(timer, results, args.compare_ws)
    if "few_tiles" in tables:
        bench_few_tiles(timer, results)
    if "contiguous" in tables:
        bench_contiguous(timer, results)
    if "masked" in tables:
        bench_masked(timer, results)
    if "k_grouped" in tables:
        bench_k_grouped(timer, results, args.compare_ws)
    if "host" in tables:
        host_overhead(results)
    summary = summarize(results)
    meta = dict(date=datetime.date.today().isoformat(), gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                triton=__import__("triton").__version__, num_sms=deep_gemm.get_num_sms(),
                # (DeepGEMM's own package, measured through this script, has no backends())
                backends={k: v for k, v in getattr(deep_gemm, "backends", dict)().items() if "fp8" in k})
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "bench_fp8_gemm.json"), "w") as f:
        json.dump(dict(meta=meta, results=results, summary=summary), f, indent=1)
    print(f"\nwrote {os.path.join(args.out, 'bench_fp8_gemm.json')} ({meta['gpu']}, torch {meta['torch']}, "
          f"triton {meta['triton']})")


if __name__ == "__main__":
    main()
