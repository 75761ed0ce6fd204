"""The block-scaled FP8 promotion shared by the tl.* FP8 kernels (the FP8 GEMM and fp8_einsum): every K block's
fresh FP32 dot product is added to the accumulator scaled by A's per-row scales and B's per-row or per-128-block
scale, so FP8 products never accumulate across K blocks in the tensor core's reduced-precision accumulator."""

import triton
import triton.language as tl


@triton.jit
def promote(acc, partial, sfa_rows, sfb_cols, kb, m_ok, n_ok, stride_sfa_k, stride_sfb_k, B_PER_ROW: tl.constexpr):
    """acc + partial * sfa[rows, kb] * sfb[cols or block, kb]: sfa_rows / sfb_cols point at the tile's scale rows
    (B_PER_ROW: one B scale per column; else one per tile, BN dividing 128)."""
    sa = tl.load(sfa_rows + kb * stride_sfa_k, mask=m_ok, other=0.0)
    if B_PER_ROW:
        sb = tl.load(sfb_cols + kb * stride_sfb_k, mask=n_ok, other=0.0)
        acc += partial * sa[:, None] * sb[None, :]
    else:
        sb = tl.load(sfb_cols + kb * stride_sfb_k)
        acc += partial * (sa * sb)[:, None]
    return acc
