"""Check of ``tf32_hc_prenorm_gemm``, shared by the CPU (reference), CUDA and fake kernels.

Metadata only (dtype, shape, strides, device), so it runs unchanged on fake tensors; everything is validated before
anything is written. The limits on N and K are DeepGEMM's SM90 kernel's, with N widened from 32 to 128 (one BLOCK_N
tile covers all of N; split-K partitions whole 64-wide K blocks).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..core.errors import (fail, require, require_contiguous, require_dim, require_dtype, require_int_range,
                           require_same_device, require_shape)
from ..common.operands import require_tma_aligned
from ..core.runtime import INT32_MAX

# K is cut into blocks of this many columns; num_splits partitions whole blocks (DeepGEMM's SM90 BLOCK_K).
BLOCK_K = 64
# One BLOCK_N tile covers all of N (DeepGEMM's SM90 kernel stops at N = 32; ours takes up to 128).
MAX_N = 128
# N must be a multiple of the WGMMA N granularity the SM90 kernel instantiates.
N_ALIGNMENT = 8


@dataclass(frozen=True)
class HcProblem:
    """Sizes of a checked call; ``num_splits`` is None for the unsplit form (D [M, N], sqr_sum [M])."""

    m: int
    n: int
    k: int
    num_splits: int | None


def _require_k_major(name: str, t: torch.Tensor) -> None:
    if t.numel() > 0 and t.size(-1) > 1 and t.stride(-1) != 1:
        fail(f"{name}: expected a K-major tensor (stride(-1) == 1), got shape {tuple(t.shape)} "
             f"with strides {t.stride()}")


def check_tf32_hc_prenorm_gemm(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, sqr_sum: torch.Tensor,
                               num_splits: int | None) -> HcProblem:
    # First, so an out-of-range count is reported as such rather than as a shape mismatch (and never wraps).
    if num_splits is not None:
        require_int_range("num_splits", num_splits, 1, INT32_MAX)
    require_same_device(a=a, b=b, d=d, sqr_sum=sqr_sum)
    require_dim("a", a, 2)
    require_dim("b", b, 2)
    require_dtype("a", a, (torch.bfloat16,))
    require_dtype("b", b, (torch.float32,))
    require_dtype("d", d, (torch.float32,))
    require_dtype("sqr_sum", sqr_sum, (torch.float32,))
    _require_k_major("a", a)
    _require_k_major("b", b)
    m, k = a.shape
    n, k_b = b.shape
    require(k_b == k, f"b: expected K = {k} (the K of a), got shape {tuple(b.shape)}")
    require(n > 0, f"b: expected N > 0, got shape {tuple(b.shape)}")
    require(n <= MAX_N and n % N_ALIGNMENT == 0,
            f"b: expected N <= {MAX_N} and a multiple of {N_ALIGNMENT} (one tile covers N), got N = {n}")
    require(k > 0 and k % BLOCK_K == 0,
            f"a: expected K > 0 and a multiple of {BLOCK_K} (splits are defined on {BLOCK_K}-wide K blocks), "
            f"got K = {k}")
    require_tma_aligned("a", a)
    require_tma_aligned("b", b)

    if num_splits is None:
        require_shape("d", d, (m, n), "[M, N] without num_splits")
        require_shape("sqr_sum", sqr_sum, (m,), "[M] without num_splits")
    else:
        require_shape("d", d, (num_splits, m, n), "[num_splits, M, N]")
        require_shape("sqr_sum", sqr_sum, (num_splits, m), "[num_splits, M]")
        # The 3-D output is addressed as one batch-dense tensor, like DeepGEMM's 3-D TMA descriptor.
        if d.numel() > 0 and num_splits > 1 and d.stride(0) != m * n:
            fail(f"d: expected batch-dense splits (stride(0) == M * N = {m * n}), got strides {d.stride()}")
    if d.numel() > 0 and d.size(-1) > 1 and d.stride(-1) != 1:
        fail(f"d: expected a row-major output (stride(-1) == 1), got strides {d.stride()}")
    if d.numel() > 0 and m > 1 and d.stride(-2) < n:
        fail(f"d: expected rows that do not overlap (stride(-2) >= N = {n}), got strides {d.stride()}")
    require_tma_aligned("d", d)
    require_contiguous("sqr_sum", sqr_sum)
    return HcProblem(m, n, k, num_splits)
