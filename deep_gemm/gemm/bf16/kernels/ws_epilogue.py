"""The warp-specialised BF16 kernel's epilogue (Gluon): one consumer's 64-row slab from registers through its
shared-memory staging buffer to a TMA store (a masked pointer store for the slab that holds a psum group's end).
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma

from ...._internals.gluon import tma_load, tma_store


@gluon.jit
def _store_slab(acc, acc_tail, d_desc, d2_desc, c_desc, c_smem, c2_smem, c_bar, tiles_done, row, off_n,
                BN: gl.constexpr, MMA: gl.constexpr, HAS_C: gl.constexpr, TAIL_N: gl.constexpr):
    """D's 64-row slab at (row, off_n) = acc (+ C's slab, HAS_C) through the staging buffer c_smem by one TMA store
    (and the tail columns', TAIL_N, through c2_smem); returns tiles_done, the C barrier's count of completed loads."""
    tma.store_wait(pendings=0)  # the staging buffers' previous stores have been read out
    if HAS_C:
        mbarrier.expect(c_bar, c_desc.block_type.nbytes)
        tma_load(c_desc, [row, off_n], c_bar, c_smem)
        mbarrier.wait(c_bar, tiles_done & 1)
        acc = acc + c_smem.load(MMA).to(gl.float32)
    tiles_done += 1
    c_smem.store(acc.to(d_desc.dtype))
    if TAIL_N > 0:
        c2_smem.store(acc_tail.to(d2_desc.dtype))
    fence_async_shared()
    tma_store(d_desc, [row, off_n], c_smem)
    if TAIL_N > 0:  # (a tail wholly past N is clipped by TMA: nothing is written)
        tma_store(d2_desc, [row, off_n + BN], c2_smem)
    return tiles_done
