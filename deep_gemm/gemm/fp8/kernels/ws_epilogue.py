"""The warp-specialised FP8 kernel's epilogue (Gluon): a consumer's 64-row slab stored by TMA or by masked pointer
stores (grouped layouts, optional C), and the split-K reduction of the slabs' FP32 partials.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma

from ...._internals.gluon import smem_reinterpret, thread_barrier, tma_load, tma_store
from ....common.kernels.groupings import DENSE, K_GROUPED, M_IDS, M_PSUM, MASKED  # noqa: F401  (kernel globals)
from .ws_scheduler import WG_ROWS


@gluon.jit
def _tma_store(acc, d_desc, c_smem, row0, off_n):
    """Registers -> swizzled shared memory -> one asynchronous TMA store of the slab (rows past the descriptor's end
    clipped by the hardware). The buffer's previous store must have been read out first."""
    tma.store_wait(pendings=0)
    c_smem.store(acc.to(d_desc.dtype))
    fence_async_shared()
    tma_store(d_desc, [row0, off_n], c_smem)


@gluon.jit
def _epilogue(acc, rows, cols, row_ok, col_ok, group, expert, row_end, layout_ptr, d_ptr, c_ptr, d_desc, c_smem,
              row0, off_n, stride_dg, stride_dm, stride_cm, GROUPING: gl.constexpr, ZERO_GAPS: gl.constexpr,
              HAS_C: gl.constexpr, D_TMA: gl.constexpr, slab_row=0, m_limit=1, c_desc=None, c_bar=None, c_phase=0,
              C_TMA: gl.constexpr = False):
    """Store one 64-row slab: which rows it writes, and which of them hold a product (the rest become zeros).
    Masked layouts (and psum layouts without ZERO_GAPS) skip the TMA store of a slab wholly past the group's valid
    rows (its first row `slab_row` >= `m_limit`).
    C_TMA (with D_TMA): C's slab arrives by TMA in the staging buffer D's store then reuses (barrier `c_bar`, its
    `c_phase`th use): no 64 x BN pointer tensor, which the two-wave consumer has no registers for."""
    row_store = row_ok
    row_valid = row_ok
    if GROUPING == M_IDS:
        ids = gl.load(layout_ptr + rows, mask=row_ok, other=-1)
        row_valid = row_ok & (ids == expert)
    if GROUPING == M_PSUM:
        # (row_ok: rows before the group's end) ZERO_GAPS: the tile's padding rows are stored too, as zeros.
        row_valid = row_ok
        if ZERO_GAPS:
            row_store = rows < row_end
    acc = gl.where(gl.expand_dims(row_valid, 1), acc, 0.0)
    mask = gl.expand_dims(row_store, 1) & gl.expand_dims(col_ok, 0)
    if HAS_C:
        if C_TMA:
            tma.store_wait(pendings=0)  # the staging buffer's previous store has been read out
            mbarrier.expect(c_bar, c_desc.block_type.nbytes)
            tma_load(c_desc, [row0, off_n], c_bar, c_smem)
            mbarrier.wait(c_bar, c_phase)
            c = c_smem.load(acc.type.layout)
        else:
            c = gl.load(c_ptr + gl.expand_dims(rows, 1) * stride_cm + gl.expand_dims(cols, 0), mask=mask, other=0.0)
        acc = acc + c.to(gl.float32)
    if D_TMA:
        # Coalesced, asynchronous store: registers -> swizzled shared memory -> one TMA store of the 64-row slab
        # (rows past M clipped by the hardware). The buffer's previous store must have been read out first.
        # Masked layouts, and psum layouts without ZERO_GAPS, skip a slab that holds no valid row (psum: the
        # whole slab is padding; a slab with some valid rows writes zeros to its padding rows, which are
        # unspecified then).
        if GROUPING == MASKED or (GROUPING == M_PSUM and not ZERO_GAPS):
            if slab_row < m_limit:
                _tma_store(acc, d_desc, c_smem, row0, off_n)
        else:
            _tma_store(acc, d_desc, c_smem, row0, off_n)
    else:
        # (64-bit group offset: a grouped d may hold more than 2^31 elements)
        out_ptrs = (d_ptr + group.to(gl.int64) * stride_dg + gl.expand_dims(rows, 1) * stride_dm
                    + gl.expand_dims(cols, 0))
        gl.store(out_ptrs, acc.to(d_ptr.dtype.element_ty), mask=mask)


@gluon.jit
def _split_k_reduce(acc, ws_ptr, counter_ptr, slot, split, stage_smem, BN: gl.constexpr, SPLIT_K: gl.constexpr):
    """Split-K, one warpgroup's 64 x BN slab: publish this split's FP32 partial, and let the split that arrives last
    at the slab's counter (`slot`) sum all of them. Returns (partial or sum, is_last), in a row-major blocked layout.

    The workspace holds each slab's SPLIT_K partials as contiguous 64 x BN row-major blocks ([slots, SPLIT_K,
    64 * BN]), written and read whole (rows past M and columns past N are the zeros TMA filled in for A and B), so
    every access is a full 16-byte vector of a coalesced row. The partial leaves the wgmma layout through
    `stage_smem` (the warpgroup's epilogue buffer, sized for it: 64 x BN FP32), swizzled in 32-byte chunks so that
    the wgmma layout's 8-row stores and the row reads are both conflict-free. (gl.convert_layout would allocate
    its own 64 KB for the two warpgroups: one stage of the ring at 128 x 128.) Written in the wgmma layout instead
    (8-byte pairs, 8 rows per warp access, masked), the partials would cost more to store and read back than the
    mainloop they split.
    The last split sums the partials in split order, its own from registers, so the result does not depend on which
    split came last, and resets the counter for the next launch. Ordering: every thread's partial store, the
    partition's barrier, one acquire-release atomic at GPU scope; the reads go through L2 (.cg)."""
    BLK: gl.constexpr = gl.BlockedLayout([1, 4], [32 * 4 // BN, BN // 4], [4, 1], [1, 0])
    SWZ: gl.constexpr = gl.SwizzledSharedLayout(8, 1, 4, order=[1, 0])
    SLAB: gl.constexpr = WG_ROWS * BN
    tma.store_wait(pendings=0)  # the buffer's previous TMA store has been read out
    staging = smem_reinterpret(stage_smem, gl.float32, [WG_ROWS, BN], SWZ)
    staging.store(acc)
    thread_barrier()
    part = staging.load(BLK)
    r = gl.arange(0, WG_ROWS, layout=gl.SliceLayout(1, BLK))
    c = gl.arange(0, BN, layout=gl.SliceLayout(0, BLK))
    offs = gl.expand_dims(r, 1) * BN + gl.expand_dims(c, 0)
    slab = ws_ptr + slot * (SPLIT_K * SLAB)
    gl.store(slab + split * SLAB + offs, part)
    thread_barrier()
    arrived = gl.atomic_add(counter_ptr + slot, 1, sem="acq_rel", scope="gpu")
    last = arrived == SPLIT_K - 1
    if last:
        total = gl.zeros([WG_ROWS, BN], gl.float32, layout=BLK)
        for s in range(SPLIT_K):  # not unrolled: one partial in flight
            if s == split:
                total += part
            else:
                total += gl.load(slab + s * SLAB + offs, cache_modifier=".cg")
        part = total
        gl.atomic_xchg(counter_ptr + slot, 0, sem="relaxed", scope="gpu")
    return part, last
