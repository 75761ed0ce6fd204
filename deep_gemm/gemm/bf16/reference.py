"""Torch references of the BF16 GEMM ops and of the vendor-BLAS GEMM ops: upcast to FP32, matmul, cast.

Registered as the CPU kernels and used on CUDA until a Triton kernel covers a case (there ``a.float() @ b.float().T``
is a cuBLAS FP32 GEMM, so the vendor-BLAS ops really run the vendor BLAS).

Semantics (see the public docstrings):
* dense: D = C + A @ B.T with FP32 accumulation; C may be D itself or another tensor; K == 0 gives D = C (or 0).
* M-grouped contiguous / masked: exactly the FP8 family's row semantics, without scales (the row helpers of
  ``fp8_reference`` are reused): expert id -1 rows are written as zeros; psum gap rows are zeroed when
  ensure_zero_padding, else left untouched; masked rows >= masked_m[g] are left untouched.
* K-grouped: D[g] = C[g] + A_g.T @ B_g over each group's K rows; an empty group gives D[g] = C[g] (or 0). With the
  psum layout group g's K rows are [align(end[g-1]), end[g]) (``fp8_reference.k_group_bounds``); rows between a
  group's end and the next aligned start are padding, never read into any group.
No reference reads a device tensor on the host (ks_cpu is already a host list), so the CUDA fallback stays
capturable in CUDA graphs.
"""

from __future__ import annotations

import torch

from ..fp8.reference import (k_group_bounds, m_grouped_rows_matmul, row_groups, write_grouped_rows,
                             write_masked_rows)
from ...common.operands import to_nt, write_output


def _dense_product(layout: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """FP32 A @ B.T of an ``<layout>`` call (FP8 values are taken raw; bf16/fp16/fp32 upcast exactly)."""
    a, _, b, _ = to_nt(layout, a, None, b, None)
    return a.float() @ b.float().T


def make_dense_reference(op_name: str, layout: str):
    """Reference of ``bf16_gemm_<layout>`` (trailing compiled_dims, alpha) and of ``cublaslt_gemm_<layout>`` (no
    hints)."""

    def reference(a, b, d, c, *tail):
        # bf16_gemm_*: tail = (compiled_dims, alpha); cublaslt_gemm_*: empty
        alpha = tail[1] if len(tail) > 1 else None
        write_output(d, _dense_product(layout, a, b), c, alpha)

    reference.__name__ = f"{op_name}_reference"
    return reference


def make_m_grouped_contiguous_reference(layout: str):
    def reference(a, b, d, grouped_layout, compiled_dims, use_psum_layout, ensure_zero_padding,
                  expected_m_for_psum_layout=None):
        if layout == "nn":
            b = b.transpose(-1, -2)
        groups = row_groups(grouped_layout, a.size(0), b.size(0), use_psum_layout)
        out = m_grouped_rows_matmul(a.float(), b.float(), groups)
        write_grouped_rows(d, out, groups, keep_gaps=use_psum_layout and not ensure_zero_padding)

    reference.__name__ = f"m_grouped_bf16_gemm_{layout}_contiguous_reference"
    return reference


def m_grouped_bf16_gemm_nt_masked_reference(a, b, d, masked_m, expected_m, compiled_dims):
    write_masked_rows(d, torch.bmm(a.float(), b.float().transpose(1, 2)), masked_m)


def k_grouped_bf16_gemm_tn_contiguous_reference(a, b, d, ks_cpu, grouped_layout, c, compiled_dims, use_psum_layout):
    if use_psum_layout:  # group bounds from the device ends (no host read): one masked product per group
        starts, ends = k_group_bounds(grouped_layout, True)
        k = torch.arange(a.size(0), device=a.device)[:, None]
        a_values, b_values = a.float(), b.float()
        acc = torch.zeros(d.shape, dtype=torch.float32, device=d.device)
        for g in range(d.size(0)):
            acc[g] = (a_values * ((k >= starts[g]) & (k < ends[g]))).T @ b_values
        write_output(d, acc, c)
        return
    acc = torch.zeros(d.shape, dtype=torch.float32, device=d.device)
    k_start = 0
    for g, k_size in enumerate(int(x) for x in ks_cpu):
        k_end = k_start + k_size
        acc[g] = a[k_start:k_end].float().T @ b[k_start:k_end].float()
        k_start = k_end
    write_output(d, acc, c)
