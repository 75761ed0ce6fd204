"""einsum / fp8_einsum / cublaslt_gemm calls for compute-sanitizer: small odd shapes through every kernel path
(each BF16 expression with its TMA and pointer epilogues, C accumulation, the batch-split reduction of
'bmk,bnk->mn', every FP8 equation including the K-major copies), each checked against a float64 torch reference.
``CASES = [(name, fn), ...]``: fn runs one call and raises on a mismatch (see README.md in this folder)."""

from __future__ import annotations

import torch

from deep_gemm.core.registry import run_launcher
from deep_gemm.einsum import plan as einsum_plan
from deep_gemm.einsum.plan import EinsumOverrides
from deep_gemm.testing import calc_diff

BF16, FP8 = torch.bfloat16, torch.float8_e4m3fn


def _expect(out, ref, what, bound):
    diff = calc_diff(out, ref)
    if not diff < bound:
        raise AssertionError(f"{what}: calc_diff {diff:.3e} >= {bound:.0e}")


def _launch(name, *args, config=None):
    kwargs = dict(launcher_kwargs=dict(overrides=EinsumOverrides(config=config))) if config is not None else {}
    if run_launcher(name, *args, **kwargs) is NotImplemented:
        raise AssertionError(f"{name}: the kernel declined (the case must reach it)")
    torch.cuda.synchronize()


def _bh(expr, b, h, r, d, out=BF16, accumulate=False, pad_out=0, config=None):
    def run():
        x = torch.randn((b, h, r) if expr == "bhr,hdr->bhd" else (b, h, d), device="cuda").to(BF16)
        w = torch.randn((h, d, r + 24), device="cuda").to(BF16)[:, :, :r]
        out_last = d if expr == "bhr,hdr->bhd" else r
        buffer = torch.randn((b, h, out_last + pad_out), device="cuda").to(out)
        z = buffer[:, :, :out_last]
        ref = (z.double() if accumulate else 0) + torch.einsum(expr, x.double(), w.double())
        _launch("einsum", expr, x, w, z, z if accumulate else None, config=config)
        _expect(z, ref, f"einsum {expr}", 1e-5 if out == BF16 else 1e-10)
    return run


def _bmk(s, m, n, k, out=torch.float32, reduce=None):
    """``reduce``: pin the batch split's reduction (einsum/plan.py's BmkPlan) at the planned split; None: the plan."""
    def run():
        a = torch.randn((s, m, k), device="cuda").to(BF16)
        b = torch.randn((s, n, k), device="cuda").to(BF16)
        d = torch.randn((m, n), device="cuda").to(out)
        c = d if out == torch.float32 else None
        ref = (d.double() if c is not None else 0) + torch.einsum("bmk,bnk->mn", a.double(), b.double())
        plan = None
        if reduce is not None:
            auto = einsum_plan.bmk_plan(s, m, n, k)
            plan = einsum_plan.BmkPlan(auto.tile, auto.splits, reduce)
        _launch("einsum", "bmk,bnk->mn", a, b, d, c, config=plan)
        _expect(d, ref, f"einsum bmk,bnk->mn {plan or ''}", 1e-5)
    return run


def _fp8(expr, sizes, recipe, out=BF16, accumulate=False):
    def run():
        sub_a, sub_b = expr.split("->")[0].split(",")
        sub_out = expr.split("->")[1]

        def operand(subs, gran_mn):
            data = torch.randn([sizes[x] for x in subs], device="cuda").to(FP8)
            grans = [recipe[2] if x not in sub_out else (gran_mn if x not in (sub_a if subs == sub_b else sub_b)
                                                         else 1) for x in subs]
            sf = torch.rand([-(-sizes[x] // g) for x, g in zip(subs, grans)], device="cuda") + 0.5
            full = sf.double()
            for dim, g in enumerate(grans):
                full = full.repeat_interleave(g, dim=dim).narrow(dim, 0, sizes[subs[dim]])
            return data, sf, data.double() * full
        a, sfa, a64 = operand(sub_a, recipe[0])
        b, sfb, b64 = operand(sub_b, recipe[1])
        d = torch.randn([sizes[x] for x in sub_out], device="cuda").to(out)
        ref = (d.double() if accumulate else 0) + torch.einsum(expr, a64, b64)
        _launch("fp8_einsum", expr, a, sfa, b, sfb, d, d if accumulate else None, list(recipe))
        # FP32 out: the FP8 products are summed on the tensor cores, which is not IEEE FP32 summation (H200: 7-8e-9).
        _expect(d, ref, f"fp8_einsum {expr}", 1e-5 if out == BF16 else 1e-7)
    return run


def _cublaslt(dtype, out, accumulate):
    def run():
        a = torch.randn((37, 160), device="cuda").to(dtype)
        b = torch.randn((48, 160), device="cuda").to(dtype)
        d = torch.randn((37, 48), device="cuda").to(out)
        ref = (d.double() if accumulate else 0) + a.double() @ b.double().T
        _launch("cublaslt_gemm_nt", a, b, d, d if accumulate else None)
        _expect(d, ref, f"cublaslt_gemm_nt {dtype}->{out}", 1e-5 if out == BF16 else 1e-9)
    return run


CASES = [
    ("bhr_hdr_bhd_tma_store", _bh("bhr,hdr->bhd", 77, 3, 200, 72)),
    ("bhr_hdr_bhd_pointer_store_fp32_acc", _bh("bhr,hdr->bhd", 77, 3, 200, 72, out=torch.float32, accumulate=True,
                                               pad_out=1)),
    ("bhr_hdr_bhd_wide_tiles", _bh("bhr,hdr->bhd", 300, 2, 1032, 264, config=einsum_plan.BH_LARGE)),
    ("bhd_hdr_bhr_n_major_b", _bh("bhd,hdr->bhr", 77, 3, 200, 72)),
    ("bhd_hdr_bhr_small_m_acc", _bh("bhd,hdr->bhr", 5, 3, 136, 40, accumulate=True)),
    ("bmk_bnk_mn_split_fp32_acc", _bmk(67, 72, 200, 208)),
    ("bmk_bnk_mn_bf16", _bmk(9, 130, 24, 64, out=BF16)),
    # The one-launch reduction: ranges wait for each other at their tile's counter (spin loops of acquire loads).
    ("bmk_bnk_mn_grid_reduce_odd_fp32_acc", _bmk(67, 72, 200, 208, reduce="grid")),
    ("bmk_bnk_mn_grid_reduce_odd_bf16", _bmk(37, 130, 24, 136, out=BF16, reduce="grid")),
    ("fp8_bhr_hdr_bhd", _fp8("bhr,hdr->bhd", dict(b=77, h=3, r=208, d=144), (1, 128, 128))),
    ("fp8_bhr_hdr_bhd_per_row_b_fp32_acc", _fp8("bhr,hdr->bhd", dict(b=5, h=2, r=272, d=48), (1, 1, 128),
                                                out=torch.float32, accumulate=True)),
    ("fp8_bhd_hdr_bhr_copied_b", _fp8("bhd,hdr->bhr", dict(b=37, h=3, d=144, r=208), (1, 128, 128))),
    ("fp8_bhd_bhr_hdr_wgrad", _fp8("bhd,bhr->hdr", dict(b=300, h=2, d=48, r=32), (1, 1, 128), out=torch.float32,
                                   accumulate=True)),
    ("fp8_gran_k_32", _fp8("bhr,hdr->bhd", dict(b=6, h=2, r=96, d=32), (1, 128, 32))),
    ("cublaslt_bf16_acc", _cublaslt(BF16, BF16, True)),
    ("cublaslt_bf16_to_fp32_acc", _cublaslt(BF16, torch.float32, True)),
    ("cublaslt_fp8", _cublaslt(FP8, BF16, False)),
]
