"""CUDA launchers of ``batched_syrk`` / ``batched_symm``: the vendor BLAS through torch, as DeepGEMM calls cuBLASLt
for them (no Triton kernel: the ops' contract is a plain batched product, which cuBLAS already runs at the
tensor cores' rate).

``d = a @ a^T`` (syrk) and ``d = a @ b`` (symm) with FP32 accumulation, written into ``d`` through torch's ``out=``
forms (``torch.matmul`` hands d and its strides to cuBLAS; a column-major d is written through its transposed
row-major view: ``d^T = a a^T`` for syrk, ``d^T = b^T a^T`` for symm). FP32 operands use full FP32 (torch's default
``allow_tf32 = False`` for matmuls is honoured: the caller's setting decides, as for any torch matmul). No host
sync: capturable in CUDA graphs. Returns ``NotImplemented`` for empty products (the reference writes them).
"""

from __future__ import annotations

import torch


def _row_major(d: torch.Tensor) -> bool:
    return d.stride(-1) == 1 or d.size(-1) == 1


def batched_syrk(a: torch.Tensor, d: torch.Tensor):
    if a.numel() == 0 or d.numel() == 0:
        return NotImplemented
    if _row_major(d):
        torch.matmul(a, a.mT, out=d)
    else:  # column-major d: its transpose is row-major and symmetric products are their own transpose
        torch.matmul(a, a.mT, out=d.mT)
    return None


def batched_symm(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor):
    if a.numel() == 0 or b.numel() == 0 or d.numel() == 0:
        return NotImplemented
    if _row_major(d):
        torch.matmul(a, b, out=d)
    else:
        torch.matmul(b.mT, a.mT, out=d.mT)
    return None
