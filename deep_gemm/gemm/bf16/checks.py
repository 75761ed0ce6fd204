"""One check per BF16 GEMM op and per vendor-BLAS (cuBLASLt-style) GEMM op, shared by the CPU, CUDA and fake kernels.

Each check takes exactly the op's schema arguments, reads metadata only, and raises ``DeepGEMMError`` naming the
argument before anything is written. Layout rules:

* BF16 GEMMs: A and B are BF16, each K-major or MN-major after the layout transpose (DeepGEMM's BF16 kernels take
  any majorness, SM90 included), with TMA-friendly (16-byte) strides and start. No K % 64 requirement: that is a
  tile-size constraint of upstream's kernels, not part of the maths.
* Vendor-BLAS GEMMs: A and B share one dtype of ``CUBLASLT_AB_DTYPES``; each needs a unit stride in one of its two
  dims (BLAS layouts are column- or row-major with a leading dimension), but no 16-byte alignment.
* D (and C when given) are row-major; C has D's shape and dtype and may be D itself.

Data-dependent contracts (expert ids in range, masked_m <= Mmax, grouped_layout equal to ks_cpu) need the data:
``gemm/grouped_checks.py``'s ``check_data_*`` run them in the CPU kernels always and on CUDA in the checked mode
(``deep_gemm.set_checks("data")``).
"""

from __future__ import annotations

import torch

from ...core.errors import (require, require_dim, require_dtype, require_major,
                           require_same_device)
from ..fp8.checks import GemmProblem
from ..grouped_checks import (check_expected_m_for_psum_layout, check_grouped_layout, check_k_grouped_output,
                             check_k_psum_sizes, check_ks_cpu, check_masked_m)
from ...common.operands import (Recipe, check_accumulator, check_alpha, check_compiled_dims, check_out,
                                require_tma_aligned, to_nt)

BF16 = torch.bfloat16
# What the vendor-BLAS GEMM multiplies (one dtype for A and B), always with FP32 compute. float8_e4m3fn values are
# taken raw (no scales), as DeepGEMM's benchmarks time cuBLASLt on FP8 data.
CUBLASLT_AB_DTYPES = (torch.bfloat16, torch.float16, torch.float32, torch.float8_e4m3fn)
CUBLASLT_OUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
# BF16 GEMMs carry no scales; GemmProblem wants a recipe, so record "one scale per element" (unused).
_NO_SCALES = Recipe((1, 1), (1, 1))


def _check_operand(name: str, t: torch.Tensor, ndim: int, dtypes, tma_aligned: bool = True) -> None:
    """Dim count, dtype, a unit stride in one of the last two dims, and (for TMA) 16-byte strides and start.

    Checked on the tensor as the caller passed it: majorness and stride alignment do not change under the layout
    transpose, and the messages then show the caller's own shape and strides."""
    require_dim(name, t, ndim)
    require_dtype(name, t, dtypes)
    require_major(name, t)
    if tma_aligned:
        require_tma_aligned(name, t)


def _nt_sizes(layout: str, a: torch.Tensor, b: torch.Tensor) -> tuple[int, int, int]:
    """(M, K, N) of the NT view of an ``<layout>`` call; K of A and B must agree."""
    a_nt, _, b_nt, _ = to_nt(layout, a, None, b, None)
    m, k = a_nt.size(-2), a_nt.size(-1)
    n, k_b = b_nt.size(-2), b_nt.size(-1)
    a_form = "[K, M]" if layout[0] == "t" else "[M, K]"
    b_form = "[K, N]" if layout[1] == "n" else "[N, K]"
    require(k_b == k, f"b: expected K = {k} (the K of a, given as {a_form}), got K = {k_b} "
                      f"(b given as {b_form}, shape {tuple(b.shape)})")
    return m, k, n


def _check_dense(layout, a, b, d, c, ab_dtypes, out_dtypes, tma_aligned) -> GemmProblem:
    require_same_device(a=a, b=b, d=d, c=c)
    _check_operand("a", a, 2, ab_dtypes, tma_aligned)
    _check_operand("b", b, 2, ab_dtypes, tma_aligned)
    require(b.dtype == a.dtype, f"b: expected the dtype of a ({a.dtype}), got {b.dtype}")
    m, k, n = _nt_sizes(layout, a, b)
    check_out("d", d, (m, n), dtypes=out_dtypes)
    check_accumulator(c, d)
    return GemmProblem(m, n, k, _NO_SCALES)


def make_dense_check(layout: str):
    """Check of ``bf16_gemm_<layout>``: D [M,N] (BF16/FP32) = C + A @ B.T in NT form, BF16 A and B."""

    def check(a, b, d, c, compiled_dims, alpha=None) -> GemmProblem:
        check_compiled_dims(compiled_dims)
        check_alpha(alpha)
        return _check_dense(layout, a, b, d, c, (BF16,), (BF16, torch.float32), tma_aligned=True)

    check.__name__ = f"check_bf16_gemm_{layout}"
    return check


def make_cublaslt_check(layout: str):
    """Check of ``cublaslt_gemm_<layout>``: D [M,N] (BF16/FP16/FP32) = C + A @ B.T, A and B of one dtype."""

    def check(a, b, d, c) -> GemmProblem:
        return _check_dense(layout, a, b, d, c, CUBLASLT_AB_DTYPES, CUBLASLT_OUT_DTYPES, tma_aligned=False)

    check.__name__ = f"check_cublaslt_gemm_{layout}"
    return check


def make_m_grouped_contiguous_check(layout: str):
    """Check of ``m_grouped_bf16_gemm_<layout>_contiguous``: A [M,K], B [G,N,K] (nt) or [G,K,N] (nn), D [M,N] BF16."""

    def check(a, b, d, grouped_layout, compiled_dims, use_psum_layout, ensure_zero_padding,
              expected_m_for_psum_layout=None) -> GemmProblem:
        require_same_device(a=a, b=b, d=d, grouped_layout=grouped_layout)
        check_compiled_dims(compiled_dims)
        _check_operand("a", a, 2, (BF16,))
        _check_operand("b", b, 3, (BF16,))
        num_groups = b.size(0)
        require(num_groups > 0, "b: expected at least one group (dim 0 > 0)")
        b_nt = b if layout == "nt" else b.transpose(-1, -2)
        m, k = a.shape
        n, k_b = b_nt.size(1), b_nt.size(2)
        b_form = "[G, N, K]" if layout == "nt" else "[G, K, N]"
        require(k_b == k, f"b: expected K = {k} (the K of a), got K = {k_b} (b given as {b_form}, "
                          f"shape {tuple(b.shape)})")
        check_out("d", d, (m, n), dtypes=(BF16,))
        check_grouped_layout(grouped_layout, num_groups, m, use_psum_layout)
        check_expected_m_for_psum_layout(expected_m_for_psum_layout, use_psum_layout)
        return GemmProblem(m, n, k, _NO_SCALES, num_groups)

    check.__name__ = f"check_m_grouped_bf16_gemm_{layout}_contiguous"
    return check


def check_m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, expected_m, compiled_dims) -> GemmProblem:
    """A [G,Mmax,K], B [G,N,K], D [G,Mmax,N] BF16; masked_m int32 [G]."""
    require_same_device(a=a, b=b, d=d, masked_m=masked_m)
    check_compiled_dims(compiled_dims)
    _check_operand("a", a, 3, (BF16,))
    _check_operand("b", b, 3, (BF16,))
    num_groups, m, k = a.shape
    require(num_groups > 0, "a: expected at least one group (dim 0 > 0)")
    require(tuple(b.shape[::2]) == (num_groups, k),
            f"b: expected shape ({num_groups}, N, {k}) ([G, N, K] with G and K of a), got {tuple(b.shape)}")
    n = b.size(1)
    check_out("d", d, (num_groups, m, n), dtypes=(BF16,))
    check_masked_m(masked_m, num_groups, expected_m)
    return GemmProblem(m, n, k, _NO_SCALES, num_groups)


def check_k_grouped_bf16_gemm_tn_contiguous(a, b, d, ks_cpu, grouped_layout, c, compiled_dims,
                                            use_psum_layout) -> GemmProblem:
    """A [sum K, M], B [sum K, N] BF16 MN-major; D, C FP32 [G, M, N]; grouped_layout int32 [G]."""
    require_same_device(a=a, b=b, d=d, grouped_layout=grouped_layout, c=c)
    check_compiled_dims(compiled_dims)
    if use_psum_layout:  # the groups are the psum ends of grouped_layout; sum_K is the rows of a
        require_dim("d", d, 3)
        _check_operand("a", a, 2, (BF16,))
        num_groups, sum_k, what = d.size(0), a.size(0), "sum_K"
        check_k_psum_sizes(ks_cpu, num_groups, sum_k)
    else:
        ks = check_ks_cpu(ks_cpu)
        num_groups, sum_k, what = len(ks), sum(ks), "sum(ks_cpu)"
    m, n = check_k_grouped_output(d, c, grouped_layout, num_groups)
    for name, data, rows, dim in (("a", a, m, "M"), ("b", b, n, "N")):
        _check_operand(name, data, 2, (BF16,))
        require(tuple(data.shape) == (sum_k, rows),
                f"{name}: expected shape {(sum_k, rows)} ([{what}, {dim}]), got {tuple(data.shape)}")
        require(data.numel() == 0 or data.size(1) <= 1 or data.stride(1) == 1,
                f"{name}: expected an MN-major tensor ({dim} contiguous, stride(1) == 1), got strides {data.stride()}")
    return GemmProblem(m, n, sum_k, _NO_SCALES, num_groups)
