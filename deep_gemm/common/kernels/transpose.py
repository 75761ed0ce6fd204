"""MN-major -> K-major copy of FP8 operands (tl.*): out[b, r, c] = x[b, r, c] for an x whose rows are strided and
whose columns are contiguous in memory the other way round (x = y.transpose(-1, -2) with y contiguous).

FP8 wgmma reads K-major shared memory only, so MN-major operands (the nn/tn/tt layouts, K-grouped tn) are copied
first. torch's strided copy reads or writes one side uncoalesced; here each program loads a [BC, BR] tile of y
coalesced along y's rows, transposes it in registers/shared memory, and stores [BR, BC] coalesced along out's rows.
Bytes are moved as uint8 (the copy is bit-exact and needs no FP8 arithmetic).
"""

import triton
import triton.language as tl


@triton.jit
def _transpose_kernel(y_ptr, out_ptr, R, C, stride_yb, stride_yc, stride_ob, stride_or,
                      BR: tl.constexpr, BC: tl.constexpr):
    # y: [B, C, R] with unit stride along R; out: [B, R, C] with unit stride along C.
    pid_r = tl.program_id(0)
    pid_c = tl.program_id(1)
    batch = tl.program_id(2).to(tl.int64)
    rs = pid_r * BR + tl.arange(0, BR)
    cs = pid_c * BC + tl.arange(0, BC)
    src = y_ptr + batch * stride_yb + cs[:, None].to(tl.int64) * stride_yc + rs[None, :]
    tile = tl.load(src, mask=(cs[:, None] < C) & (rs[None, :] < R))
    dst = out_ptr + batch * stride_ob + rs[:, None].to(tl.int64) * stride_or + cs[None, :]
    tl.store(dst, tl.trans(tile), mask=(rs[:, None] < R) & (cs[None, :] < C))
