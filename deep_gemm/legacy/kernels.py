"""Triton kernels of ``deep_gemm.legacy`` (BF16 M-grouped and K-grouped GEMMs with optional row gathers).

Plain ``tl.dot`` tiles with masked loads: DeepGEMM keeps these as portable kernels next to its fast ones, and so do
we (the fast M-/K-grouped BF16 GEMMs are the ``m_grouped_bf16_gemm_*`` / ``k_grouped_bf16_gemm_*`` ops). Each
entry point is its own ``@triton.jit`` function with DeepGEMM's kernel name, so profiles (and DeepGEMM's
``tests/test_legacy.py``, which finds kernels by name) see the same names; they share one body.

``DOT_FP32`` widens the BF16 tiles to FP32 before ``tl.dot``: only the CPU interpreter sets it, whose BF16 dot
multiplies raw bits.
"""

import triton
import triton.language as tl


@triton.jit
def _tile_of(pid, num_m, num_n, GROUP_M: tl.constexpr):
    """(row tile, column tile) of program ``pid``: GROUP_M row tiles sweep the columns together, so the B tiles
    they share stay in L2."""
    per_group = GROUP_M * num_n
    first_m = (pid // per_group) * GROUP_M
    group_rows = tl.minimum(num_m - first_m, GROUP_M)
    return first_m + (pid % per_group) % group_rows, (pid % per_group) // group_rows


@triton.jit
def _m_grouped_body(a_ptr, b_ptr, d_ptr, m_indices_ptr, row_indices_ptr, M, N, K,
                    stride_am, stride_bg, stride_bn, stride_bk, stride_dm,
                    GATHER_A: tl.constexpr, DOT_FP32: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m, pid_n = _tile_of(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), 8)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < M
    col_ok = cols < N
    # Expert segments start at multiples of the contiguous-layout alignment and BLOCK_M divides it, so the tile's
    # first row names the tile's expert; padding rows (-1) are written as zeros.
    experts = tl.load(m_indices_ptr + rows, mask=row_ok, other=-1)
    expert = tl.load(m_indices_ptr + pid_m * BLOCK_M)
    live = row_ok & (experts >= 0)
    if GATHER_A:
        src = tl.load(row_indices_ptr + rows, mask=row_ok, other=-1)
        live = live & (src >= 0)
    else:
        src = rows
    src = src.to(tl.int64)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if expert >= 0:
        b_base = b_ptr + expert.to(tl.int64) * stride_bg
        for k0 in range(0, K, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            k_ok = ks < K
            a = tl.load(a_ptr + src[:, None] * stride_am + ks[None, :], mask=live[:, None] & k_ok[None, :],
                        other=0.0)
            b = tl.load(b_base + ks[:, None].to(tl.int64) * stride_bk + cols[None, :].to(tl.int64) * stride_bn,
                        mask=k_ok[:, None] & col_ok[None, :], other=0.0)
            if DOT_FP32:
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b, acc)
    acc = tl.where(live[:, None], acc, 0.0)
    d_ptrs = d_ptr + rows[:, None].to(tl.int64) * stride_dm + cols[None, :]
    tl.store(d_ptrs, acc.to(d_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])


@triton.jit
def m_grouped_bf16_gemm_contiguous_tl_impl(a_ptr, b_ptr, d_ptr, m_indices_ptr, M, N, K,
                                           stride_am, stride_bg, stride_bn, stride_bk, stride_dm,
                                           DOT_FP32: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                           BLOCK_K: tl.constexpr):
    _m_grouped_body(a_ptr, b_ptr, d_ptr, m_indices_ptr, m_indices_ptr, M, N, K,
                    stride_am, stride_bg, stride_bn, stride_bk, stride_dm, False, DOT_FP32, BLOCK_M, BLOCK_N, BLOCK_K)


@triton.jit
def a_fused_m_grouped_bf16_gemm_contiguous_tl_impl(a_ptr, b_ptr, d_ptr, m_indices_ptr, row_indices_ptr, M, N, K,
                                                   stride_am, stride_bg, stride_bn, stride_bk, stride_dm,
                                                   DOT_FP32: tl.constexpr, BLOCK_M: tl.constexpr,
                                                   BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    _m_grouped_body(a_ptr, b_ptr, d_ptr, m_indices_ptr, row_indices_ptr, M, N, K,
                    stride_am, stride_bg, stride_bn, stride_bk, stride_dm, True, DOT_FP32, BLOCK_M, BLOCK_N, BLOCK_K)


@triton.jit
def _k_grouped_body(a_ptr, b_ptr, d_ptr, k_indices_ptr, k_start_ptr, k_end_ptr, M, N, stride_ak, stride_bk,
                    stride_dg, stride_dm, GATHER_A: tl.constexpr, ACC: tl.constexpr, DOT_FP32: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m, pid_n = _tile_of(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), 8)
    group = tl.program_id(1)
    ms = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    ns = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok = ms < M
    n_ok = ns < N
    k_start = tl.load(k_start_ptr + group)
    k_end = tl.load(k_end_ptr + group)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(k_start, k_end, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < k_end  # a group's K need not be a multiple of BLOCK_K
        gathered = tl.load(k_indices_ptr + ks, mask=k_ok, other=-1).to(tl.int64)
        if GATHER_A:
            a_rows, a_ok = gathered, k_ok & (gathered >= 0)
            b_rows, b_ok = ks.to(tl.int64), k_ok
        else:
            a_rows, a_ok = ks.to(tl.int64), k_ok
            b_rows, b_ok = gathered, k_ok & (gathered >= 0)
        # A is [K, M] (MN-major): the tile is loaded transposed, [BLOCK_M, BLOCK_K].
        a = tl.load(a_ptr + a_rows[None, :] * stride_ak + ms[:, None], mask=a_ok[None, :] & m_ok[:, None],
                    other=0.0)
        b = tl.load(b_ptr + b_rows[:, None] * stride_bk + ns[None, :], mask=b_ok[:, None] & n_ok[None, :],
                    other=0.0)
        if DOT_FP32:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc)
    d_ptrs = d_ptr + group.to(tl.int64) * stride_dg + ms[:, None].to(tl.int64) * stride_dm + ns[None, :]
    mask = m_ok[:, None] & n_ok[None, :]
    if ACC:
        acc += tl.load(d_ptrs, mask=mask, other=0.0).to(tl.float32)
    tl.store(d_ptrs, acc.to(d_ptr.dtype.element_ty), mask=mask)


@triton.jit
def a_fused_k_grouped_bf16_gemm_contiguous_tl_impl(a_ptr, b_ptr, d_ptr, k_indices_ptr, k_start_ptr, k_end_ptr, M, N,
                                                   stride_ak, stride_bk, stride_dg, stride_dm, ACC: tl.constexpr,
                                                   DOT_FP32: tl.constexpr, BLOCK_M: tl.constexpr,
                                                   BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    _k_grouped_body(a_ptr, b_ptr, d_ptr, k_indices_ptr, k_start_ptr, k_end_ptr, M, N, stride_ak, stride_bk,
                    stride_dg, stride_dm, True, ACC, DOT_FP32, BLOCK_M, BLOCK_N, BLOCK_K)


@triton.jit
def b_fused_k_grouped_bf16_gemm_contiguous_tl_impl(a_ptr, b_ptr, d_ptr, k_indices_ptr, k_start_ptr, k_end_ptr, M, N,
                                                   stride_ak, stride_bk, stride_dg, stride_dm, ACC: tl.constexpr,
                                                   DOT_FP32: tl.constexpr, BLOCK_M: tl.constexpr,
                                                   BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    _k_grouped_body(a_ptr, b_ptr, d_ptr, k_indices_ptr, k_start_ptr, k_end_ptr, M, N, stride_ak, stride_bk,
                    stride_dg, stride_dm, False, ACC, DOT_FP32, BLOCK_M, BLOCK_N, BLOCK_K)
