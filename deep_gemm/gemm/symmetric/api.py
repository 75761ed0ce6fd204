"""Public batched SYRK / SYMM, call-compatible with DeepGEMM's cuBLASLt-backed ``batched_syrk`` / ``batched_symm``."""

from __future__ import annotations

import torch

from ...core.eager import eager_ops

__all__ = ["batched_syrk", "batched_symm"]

_ops = eager_ops


def batched_syrk(a: torch.Tensor, d: torch.Tensor) -> None:
    """Symmetric rank-K product per batch: ``d[i] = a[i] @ a[i].T``, FP32 accumulation, the full square written.

    Parameters
    ----------
    a : Tensor
        ``[M, K]`` or ``[B, M, K]``, BF16 or FP32; either major (row- or column-major in its last two dims, a
        padded leading dimension allowed).
    d : Tensor
        ``[M, M]`` or ``[B, M, M]`` of ``a``'s dtype, written in place; either major.

    Example
    -------
    >>> a = torch.randn(8, 1536, 5120, dtype=torch.bfloat16, device='cuda')
    >>> d = torch.empty(8, 1536, 1536, dtype=torch.bfloat16, device='cuda')
    >>> deep_gemm.batched_syrk(a, d)
    """
    _ops.batched_syrk.default(a, d)


def batched_symm(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor) -> None:
    """Symmetric times general per batch: ``d[i] = a[i] @ b[i]`` with ``a[i]`` symmetric ``[M, M]``.

    Parameters
    ----------
    a : Tensor
        ``[M, M]`` or ``[B, M, M]``, BF16 or FP32, symmetric (the product reads the whole matrix; a non-symmetric
        ``a`` gives ``a @ b`` as written).
    b : Tensor
        ``[M, N]`` or ``[B, M, N]`` of ``a``'s dtype.
    d : Tensor
        ``[M, N]`` or ``[B, M, N]`` of ``a``'s dtype, written in place.
    """
    _ops.batched_symm.default(a, b, d)
