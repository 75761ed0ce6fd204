"""Sanitizer cases of the FP4 GEMM kernel (see README.md in this folder): every grouping of
``gemm/fp4/kernels._fp4_gemm_kernel`` (dense NVFP4, FP8 x FP4 with packed UE8M0 or FP32 scales, K-grouped sizes and
psum with an empty group, M-grouped expert ids and psum, masked) on small odd shapes with partial tiles, opted in
with ``Fp4Overrides(kernels=True)``, each checked against the op's torch reference on the same inputs."""

from __future__ import annotations

import torch

import deep_gemm
from deep_gemm.testing.grouping import contiguous_layout
from deep_gemm.core.registry import run_launcher
from deep_gemm.gemm.fp4.plan import Fp4Overrides
from deep_gemm.gemm.fp4.reference import to_cublaslt_tiled_sf
from deep_gemm.testing import calc_diff
from deep_gemm.utils import per_token_cast_to_fp4, per_token_cast_to_fp8

ops = torch.ops.deep_gemm
# Same inputs on both sides: exact products, FP32 accumulation order (BF16 d: a rare one-ulp flip).
TOLERANCE = 1e-5


def _both(name, kernel_args, reference_args, out_kernel, out_reference, fp4_kwarg="overrides"):
    result = run_launcher(name, *kernel_args, launcher_kwargs={fp4_kwarg: Fp4Overrides(kernels=True)})
    if result is NotImplemented:
        raise AssertionError(f"the launcher of {name} declined")
    getattr(ops, name)(*reference_args)
    torch.cuda.synchronize()
    diff = calc_diff(out_kernel, out_reference)
    if diff > TOLERANCE:
        raise AssertionError(f"{name} differs from the reference: calc_diff {diff:.2e}")


def _pair(d):
    return d, d.clone()


def nvfp4():
    m, n, k = 77, 133, 160
    def operand(rows):
        packed, sf = deep_gemm.per_token_cast_to_nvfp4(torch.randn(rows, k, device="cuda"))
        return packed, to_cublaslt_tiled_sf(sf.to(torch.float8_e4m3fn).view(torch.uint8))
    (a, sfa), (b, sfb) = operand(m), operand(n)
    dk, dr = _pair(torch.randn(m, n, device="cuda"))
    _both("cublaslt_nvfp4_gemm_nt", (a, sfa, b, sfb, dk, dk), (a, sfa, b, sfb, dr, dr), dk, dr)


def _fp8_fp4_dense(packed):
    def case():
        m, n, k = 70, 90, 384
        a = per_token_cast_to_fp8(torch.randn(m, k, device="cuda"), use_ue8m0=packed, gran_k=32,
                                  use_packed_ue8m0=packed)
        b = per_token_cast_to_fp4(torch.randn(n, k, device="cuda"), use_ue8m0=packed, gran_k=32,
                                  use_packed_ue8m0=packed)
        dk, dr = _pair(torch.empty(m, n, dtype=torch.bfloat16, device="cuda"))
        tail = (None, None, [1, 32], [1, 32])
        _both("fp8_fp4_gemm_nt", (a[0], a[1], b[0], b[1], dk, *tail), (a[0], a[1], b[0], b[1], dr, *tail), dk, dr,
              fp4_kwarg="fp4_overrides")
    return case


def _k_grouped(psum):
    def case():
        m, n = 65, 131
        sizes = [96, 0, 160, 32]
        if psum:
            alignment = deep_gemm.get_mk_alignment_for_contiguous_layout()
            layout, end = [], 0
            for size in sizes:
                end = -(-end // alignment) * alignment + size
                layout.append(end)
            sum_k = -(-end // 32) * 32
        else:
            layout, sum_k = sizes, sum(sizes)
        a, sfa = per_token_cast_to_fp4(torch.randn(m, sum_k, device="cuda"), use_ue8m0=True, gran_k=32)
        b, sfb = per_token_cast_to_fp4(torch.randn(n, sum_k, device="cuda"), use_ue8m0=True, gran_k=32)
        grouped = torch.tensor(layout, dtype=torch.int32, device="cuda")
        dk, dr = _pair(torch.empty(len(sizes), m, n, device="cuda"))
        ks = None if psum else sizes
        head = (a, sfa.T.contiguous(), b, sfb.T.contiguous())
        tail = (ks, grouped, None, [1, 1, 32], "mn", psum)
        _both("k_grouped_fp4_gemm_nt_contiguous", (*head, dk, *tail), (*head, dr, *tail), dk, dr)
    return case


def _stacked(x, fp4):
    cast = per_token_cast_to_fp4 if fp4 else per_token_cast_to_fp8
    pairs = [cast(x[g], use_ue8m0=True, gran_k=32, use_packed_ue8m0=True) for g in range(x.size(0))]
    return torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs])


def _m_grouped(psum):
    def case():
        alignment = deep_gemm.get_mk_alignment_for_contiguous_layout()
        counts, n, k = [100, 0, 37], 72, 256
        m, ids, ends = contiguous_layout(counts, alignment)
        layout = torch.tensor(ends, dtype=torch.int32, device="cuda") if psum else ids.cuda()
        a = per_token_cast_to_fp4(torch.randn(m, k, device="cuda"), use_ue8m0=True, gran_k=32, use_packed_ue8m0=True)
        b = _stacked(torch.randn(len(counts), n, k, device="cuda"), True)
        dk, dr = _pair(torch.randn(m, n, device="cuda").bfloat16())
        tail = (layout, None, [1, 32], [1, 32], "", False, psum, True)
        _both("m_grouped_fp8_fp4_gemm_nt_contiguous", (a[0], a[1], b[0], b[1], dk, *tail),
              (a[0], a[1], b[0], b[1], dr, *tail), dk, dr, fp4_kwarg="fp4_overrides")
    return case


def masked():
    g, max_m, n, k = 3, 70, 65, 256
    masked_m = torch.tensor([70, 0, 9], dtype=torch.int32, device="cuda")
    a = _stacked(torch.randn(g, max_m, k, device="cuda"), False)
    b = _stacked(torch.randn(g, n, k, device="cuda"), True)
    dk, dr = _pair(torch.randn(g, max_m, n, device="cuda").bfloat16())
    tail = (masked_m, 32, None, [1, 32], [1, 32], "", False)
    _both("m_grouped_fp8_fp4_gemm_nt_masked", (a[0], a[1], b[0], b[1], dk, *tail),
          (a[0], a[1], b[0], b[1], dr, *tail), dk, dr, fp4_kwarg="fp4_overrides")


CASES = [
    ("nvfp4_c_is_d", nvfp4),
    ("fp8_fp4_dense_ue8m0", _fp8_fp4_dense(True)),
    ("fp8_fp4_dense_fp32_scales_after_dot", _fp8_fp4_dense(False)),
    ("k_grouped_sizes", _k_grouped(False)),
    ("k_grouped_psum", _k_grouped(True)),
    ("m_grouped_ids", _m_grouped(False)),
    ("m_grouped_psum", _m_grouped(True)),
    ("masked", masked),
]
