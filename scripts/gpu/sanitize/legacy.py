"""Sanitizer cases of the legacy grouped BF16 GEMMs (`deep_gemm.legacy`, see README.md in this folder): small odd
shapes (partial tiles in N and K, an expert with no rows, -1 padding rows, a K group that is empty), each checked
against the torch definitions in `deep_gemm/legacy/reference.py`."""

from __future__ import annotations

import torch

from deep_gemm import legacy
from deep_gemm.core.config import get_mk_alignment_for_contiguous_layout
from deep_gemm.legacy import reference
from deep_gemm.testing import calc_diff

BF16 = torch.bfloat16


def _expect(got, want, what):
    diff = calc_diff(got, want)
    if not diff < 1e-4:  # BF16 output rounding (the GPU tests' bound)
        raise AssertionError(f"{what}: calc_diff {diff:.3e} >= 1e-4")


def _m_indices(rows_per_expert):
    """Expert id per row, each expert's rows padded with -1 to the contiguous-layout alignment."""
    align = get_mk_alignment_for_contiguous_layout()
    ids = [torch.tensor([g] * r + [-1] * (-r % align), dtype=torch.int32) for g, r in enumerate(rows_per_expert)]
    return torch.cat(ids).cuda()


def _m_grouped(layout, fused):
    def case():
        n, k = 200, 136
        m_indices = _m_indices((5, 0, 130))
        m = m_indices.numel()
        b_nk = torch.randn(3, n, k, dtype=BF16, device="cuda")
        b = b_nk if layout == "nt" else b_nk.mT.contiguous()
        a = torch.randn(m, k, dtype=BF16, device="cuda")
        d = torch.empty(m, n, dtype=BF16, device="cuda")
        if fused:
            rows = torch.randperm(m, device="cuda").int()
            getattr(legacy, f"a_fused_m_grouped_bf16_gemm_{layout}_contiguous_tl")(a, b, d, (m_indices, rows))
            a = a[rows.long()]
        else:
            getattr(legacy, f"m_grouped_bf16_gemm_{layout}_contiguous_tl")(a, b, d, m_indices)
        want = torch.empty_like(d)
        reference.m_grouped(a, b_nk, want, m_indices, None)
        _expect(d, want, f"m_grouped {layout} fused={fused}")
    return case


def _k_grouped(fused):
    def case():
        align = get_mk_alignment_for_contiguous_layout()
        m, n, group_ks = 72, 136, (align, 0, 2 * align)
        k = sum(group_ks)
        ends = torch.tensor(group_ks, dtype=torch.int32).cumsum(0).int()
        k_start, k_end = (ends - torch.tensor(group_ks, dtype=torch.int32)).cuda(), ends.cuda()
        k_indices = torch.randperm(k, device="cuda").int()
        a = torch.randn(k, m, dtype=BF16, device="cuda")
        b = torch.randn(k, n, dtype=BF16, device="cuda")
        d = torch.randn(len(group_ks), m, n, device="cuda")
        want = d.clone()
        getattr(legacy, f"{fused}_fused_k_grouped_bf16_gemm_tn_contiguous_tl")(a, b, d, (k_indices, k_start, k_end),
                                                                                True)
        reference.k_grouped(a, b, want, k_indices, k_start, k_end, True, gather_a=fused == "a")
        _expect(d, want, f"k_grouped {fused}-fused")
    return case


CASES = [
    ("m_grouped_nt", _m_grouped("nt", False)),
    ("m_grouped_nn", _m_grouped("nn", False)),
    ("a_fused_m_grouped_nt", _m_grouped("nt", True)),
    ("a_fused_k_grouped_acc", _k_grouped("a")),
    ("b_fused_k_grouped_acc", _k_grouped("b")),
]
