"""Plain-torch definitions of the legacy grouped GEMMs (FP32 accumulation): what the Triton kernels compute, and
what runs for CPU tensors."""

from __future__ import annotations

import torch


def m_grouped(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, m_indices: torch.Tensor,
              row_indices: torch.Tensor | None) -> None:
    """``d[r] = A[r] @ b[m_indices[r]].T`` with ``b`` [G, N, K] (any strides) and ``A[r] = a[r]``, or
    ``a[row_indices[r]]`` when given; rows whose expert (or source row) is negative are zero."""
    rows = torch.arange(d.size(0), device=d.device) if row_indices is None else row_indices.long()
    experts = m_indices.long()
    live = (experts >= 0) & (rows >= 0)
    out = torch.zeros(d.shape, dtype=torch.float32, device=d.device)
    a32 = a.float()
    for expert in torch.unique(experts[live]).tolist():  # one GEMM per expert (host sync: reference only)
        selected = live & (experts == expert)
        out[selected] = a32[rows[selected]] @ b[expert].float().T
    d.copy_(out)


def k_grouped(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, k_indices: torch.Tensor, k_start: torch.Tensor,
              k_end: torch.Tensor, acc: bool, gather_a: bool) -> None:
    """``d[g] = (d[g] if acc else 0) + sum over k in [k_start[g], k_end[g]) of outer(A'[k], B'[k])`` with A' = a
    [K, M], B' = b [K, N], the fused operand's row k being ``x[k_indices[k]]`` (zero when negative)."""
    a32, b32 = a.float(), b.float()
    for g, (start, end) in enumerate(zip(k_start.tolist(), k_end.tolist())):
        ks = torch.arange(start, max(start, end), device=a.device)
        gathered = k_indices.long()[ks]
        ok = gathered >= 0
        a_rows = a32[gathered.clamp(min=0)] * ok[:, None] if gather_a else a32[ks]
        b_rows = b32[ks] if gather_a else b32[gathered.clamp(min=0)] * ok[:, None]
        product = a_rows.T @ b_rows
        d[g].copy_(d[g].float() + product if acc else product)
