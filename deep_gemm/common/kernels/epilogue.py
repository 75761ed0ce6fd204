"""The tl.* GEMM kernels' tile store (FP8 and BF16): D = C + acc over the tile's stored rows and in-range columns,
by one TMA store of the whole tile or by masked pointer stores (with the skip-head-mid column remap of the FP8
``fp8_gemm_nt_skip_head_mid``)."""

import triton
import triton.language as tl


@triton.jit
def store_tile(acc, d_ptr, d_desc, c_ptr, off_m, off_n, offs_m, offs_n, row_store, n_limit, stride_dm, stride_cm,
               HAS_C: tl.constexpr, D_TMA: tl.constexpr, HEAD_LEFT: tl.constexpr, HEAD_MID: tl.constexpr,
               HEAD_RIGHT: tl.constexpr):
    """d[rows, cols] = (c + acc) for rows where row_store and cols < n_limit; columns remapped for skip-head-mid
    (HEAD_MID > 0).

    D_TMA: one TMA store of the whole tile (rows/columns past the tensor are clipped by the hardware); only used
    when every in-range row is written, i.e. row_store == (row < M)."""
    n_ok = offs_n < n_limit
    mask = row_store[:, None] & n_ok[None, :]
    if HAS_C:
        c = tl.load(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :], mask=mask, other=0.0)
        acc += c.to(tl.float32)
    if D_TMA:
        d_desc.store([off_m, off_n], acc.to(d_desc.dtype))
        return
    if HEAD_MID > 0:
        cols = offs_n + (offs_n + HEAD_RIGHT) // (HEAD_LEFT + HEAD_RIGHT) * HEAD_MID
    else:
        cols = offs_n
    tl.store(d_ptr + offs_m[:, None] * stride_dm + cols[None, :], acc.to(d_ptr.dtype.element_ty), mask=mask)
