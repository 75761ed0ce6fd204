"""Torch reference of ``tf32_hc_prenorm_gemm`` (the CPU kernel, and the CUDA kernel until a Triton one exists).

Semantics:

* ``num_splits=None``: ``d[m, n] = sum_k a[m, k] * b[n, k]`` and ``sqr_sum[m] = sum_k a[m, k]^2``.
* ``num_splits=S``: K is cut into ``K / 64`` blocks; split ``s`` owns ``floor(nkb / S) + (s < nkb % S)``
  consecutive blocks (``split_k_blocks``) and writes its partial product to ``d[s]`` and its partial sum of squares
  to ``sqr_sum[s]``; the caller reduces both with ``.sum(0)``. Splits owning no block (S > nkb) write zeros.
* ``M == 0``: nothing to do.

Precision: the reference is exact maths rounded once. BF16 x FP32 products are exact in FP64 (8 + 24 significant
bits), so the sums run in FP64 and each output is rounded to FP32 once. It does NOT emulate TF32: DeepGEMM's GPU
kernel (and ours) feeds B through TF32 tensor cores, which rounds B to 10 mantissa bits (relative error ~5e-4 per
product); tests of a GPU kernel compare with ``round_to_tf32(b)`` in place of ``b`` (what the kernel multiplies).
"""

from __future__ import annotations

import torch

from .checks import BLOCK_K


# TF32 keeps 10 of FP32's 23 mantissa bits.
_TF32_DROPPED_BITS = 13


def round_to_tf32(x: torch.Tensor) -> torch.Tensor:
    """FP32 -> TF32 values (as FP32), to nearest, ties to even, Inf and NaN kept: what the Triton kernel (and
    DeepGEMM's TFLOAT32 TMA loads) feed the tensor cores for B. Plain integer maths on the bit pattern."""
    bits = x.contiguous().view(torch.int32).to(torch.int64)
    lowest_kept = (bits >> _TF32_DROPPED_BITS) & 1
    rounded = (bits + (1 << (_TF32_DROPPED_BITS - 1)) - 1 + lowest_kept) >> _TF32_DROPPED_BITS << _TF32_DROPPED_BITS
    finite = (bits & 0x7F800000) != 0x7F800000
    kept = torch.where(finite, rounded, bits)
    # Back to int32 two's complement (the sign bit travels through the int64 maths unchanged).
    kept = torch.where(kept >= 2**31, kept - 2**32, kept)
    return kept.to(torch.int32).view(torch.float32).view(x.shape)


def split_k_blocks(num_k_blocks: int, num_splits: int, split: int) -> tuple[int, int]:
    """[first, last) K block of ``split``: the first ``num_k_blocks % num_splits`` splits take one extra block."""
    base, extra = divmod(num_k_blocks, num_splits)
    first = split * base + min(split, extra)
    return first, first + base + (1 if split < extra else 0)


def _partials(a64: torch.Tensor, b64: torch.Tensor, k_lo: int, k_hi: int) -> tuple[torch.Tensor, torch.Tensor]:
    a_part = a64[:, k_lo:k_hi]
    return a_part @ b64[:, k_lo:k_hi].T, (a_part * a_part).sum(dim=1)


def tf32_hc_prenorm_gemm_reference(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, sqr_sum: torch.Tensor,
                                   num_splits: int | None) -> None:
    m, k = a.shape
    if m == 0:
        return
    a64, b64 = a.double(), b.double()
    if num_splits is None:
        product, squares = _partials(a64, b64, 0, k)
        d.copy_(product)
        sqr_sum.copy_(squares)
        return
    num_k_blocks = k // BLOCK_K
    # With more splits than blocks, splits >= num_k_blocks own nothing; only the others need a matmul.
    num_busy = min(num_splits, num_k_blocks)
    for split in range(num_busy):
        first, last = split_k_blocks(num_k_blocks, num_splits, split)
        product, squares = _partials(a64, b64, first * BLOCK_K, last * BLOCK_K)
        d[split].copy_(product)
        sqr_sum[split].copy_(squares)
    d[num_busy:].zero_()
    sqr_sum[num_busy:].zero_()
