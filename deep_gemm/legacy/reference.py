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
    a_rows = a.float()[rows.clamp(min=0)]
    out = torch.einsum("mk,mnk->mn", a_rows, b.float()[experts.clamp(min=0)]) if d.size(0) else a_rows[:, :0]
    d.copy_(torch.where(live[:, None], out, torch.zeros((), device=d.device)))


def k_grouped(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, k_indices: torch.Tensor, k_start: torch.Tensor,
              k_end: torch.Tensor, acc: bool, gather_a: bool) -> None:
    """``d[g] = (d[g] if acc else 0) + sum over k in [k_start[g], k_end[g]) of outer(A'[k], B'[k])`` with A' = a
    [K, M], B' = b [K, N], the fused operand's row k being ``x[k_indices[k]]`` (zero when negative)."""
    for g, (start, end) in enumerate(zip(k_start.tolist(), k_end.tolist())):
        ks = torch.arange(start, max(start, end), device=a.device)
        gathered = k_indices.long()[ks]
        ok = gathered >= 0
        a_rows = a.float()[gathered.clamp(min=0)] * ok[:, None] if gather_a else a.float()[ks]
        b_rows = b.float()[ks] if gather_a else b.float()[gathered.clamp(min=0)] * ok[:, None]
        product = a_rows.T @ b_rows
        d[g].copy_(d[g].float() + product if acc else product)
