"""Public HyperConnection API, call-compatible with DeepGEMM's ``tf32_hc_prenorm_gemm``."""

from __future__ import annotations

from typing import Optional

import torch

from ..core.eager import eager_ops

__all__ = ["tf32_hc_prenorm_gemm"]

_ops = eager_ops  # torch.ops.deep_gemm, skipping the dispatcher for plain eager CUDA calls (core/registry.py)


def tf32_hc_prenorm_gemm(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, sqr_sum: torch.Tensor,
                         num_splits: Optional[int] = None) -> None:
    """HyperConnection pre-norm GEMM: ``d = a @ b.T`` and ``sqr_sum = (a * a).sum(-1)`` in one pass over ``a``.

    Parameters
    ----------
    a : Tensor
        ``[M, K]`` BF16, K-major (row stride a multiple of 8 elements). ``M == 0`` is a no-op.
    b : Tensor
        ``[N, K]`` FP32, K-major. ``0 < N <= 128`` and ``N % 8 == 0`` (DeepGEMM's SM90 kernel stops at 32).
    d : Tensor
        FP32, row-major, written in place: ``[M, N]`` without ``num_splits``, else ``[num_splits, M, N]``
        (batch-dense) holding each split's partial product.
    sqr_sum : Tensor
        FP32, contiguous, written in place: ``[M]`` (row sums of ``a**2``), or ``[num_splits, M]`` partial sums.
    num_splits : int, optional
        Split-K factor in ``[1, 2**31 - 1]``. K (a multiple of 64) is cut into ``K / 64`` blocks; split ``s`` takes
        ``floor(nkb / S) + (s < nkb % S)`` consecutive blocks. Splits that own no block (``S > K / 64``) write
        zeros. Reduce with ``d.sum(0)`` and ``sqr_sum.sum(0)``.

    Notes
    -----
    On the GPU the product runs on TF32 tensor cores: B is rounded to TF32 (10 mantissa bits, to nearest even, as
    DeepGEMM's TMA loads and torch's TF32 matmul round it; A, being BF16, is exact) and products are summed in FP32,
    so the result matches ``a.float() @ b.T`` under ``allow_tf32=True`` (calc_diff ~1e-11) and differs from the
    exact product by calc_diff ~2e-8. Small M without ``num_splits`` splits K over more SMs and reduces on the
    device in a fixed order: the same bits every call. The CPU reference computes exactly (FP64 sums rounded once
    to FP32).

    Example
    -------
    >>> a = torch.randn(4096, 7168, dtype=torch.bfloat16, device='cuda')
    >>> b = torch.randn(24, 7168, dtype=torch.float32, device='cuda')
    >>> d = torch.empty(16, 4096, 24, device='cuda'); s = torch.empty(16, 4096, device='cuda')
    >>> deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s, num_splits=16)
    >>> out, sqr = d.sum(0), s.sum(0)
    """
    _ops.tf32_hc_prenorm_gemm.default(a, b, d, sqr_sum, None if num_splits is None else int(num_splits))
