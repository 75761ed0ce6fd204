"""Warp-specialised TF32 pre-norm GEMM (Gluon, SM90): ``d = a @ tf32(b).T`` and ``sqr_sum = sum(a^2, -1)`` for the
unsplit form (``num_splits=None``), the variant of ``kernels._hc_prenorm_kernel`` for tall A (M = 8192).

Why a second kernel: the op streams A (BF16 [M, K]) from HBM once and does little else, so its speed is the number of
A bytes each SM keeps in flight. The tl.* kernel waits for each K block's wgmma before its next loads are issued
(Triton's pipeliner), runs two programs per SM of at most 100 KB of ring each to hide that, and at M = 8192 needs
two sub-splits and a device reduction to have two programs per SM at all (128 row blocks of 64 for 132 SMs): it
stopped at 3.6-3.7 TB/s. Here one TMA warp keeps the whole ring (up to ~200 KB) full whatever the consumers do,
and the work is cut so that every SM streams the same number of K blocks.

Work: the (row block, K block) pairs in row-block-major order, ``num_mb * nkb`` of them, are cut into ``grid``
contiguous ranges of equal length (+-1), one per persistent CTA (``grid`` <= SMs, a runtime value). A CTA's range
covers pieces of one or more row blocks: a row block wholly inside it is stored directly; a row block shared by
several CTAs (at most the first and the last of a CTA's range) is summed by the last CTA to arrive at its counter,
in CTA order whoever arrives last, so the bits do not depend on timing (see ``_publish_or_reduce``).

Structure of a CTA:
  producer   1 warp: per pair, waits for a free stage, TMA-loads A's [BM, 64] tile (BF16, rows past M zero-filled)
             and B's [BN, 64] tile as two [BN, 32] boxes (FP32; 32 FP32 = 128 B is the widest swizzled box),
             through a descriptor the launcher encodes as TFLOAT32: the TMA unit rounds B to TF32 to nearest (wgmma
             itself would truncate; see kernels.py).
  consumer w (CONSUMERS = 1 or 2 warpgroups, BM = 64 * CONSUMERS; both read the same B tile, so B's L2 traffic
             per byte of A halves at BM = 128): per pair, loads its 64 rows of A from shared memory straight into the
             registers of wgmma's A operand (BF16 -> FP32 is exact; TF32 wgmma may take A from registers), adds
             their squares to an FP32 register tile, runs the block's two K = 32 wgmmas into a fresh accumulator,
             then adds that to the row block's FP32 accumulator (per-block promotion as in kernels.py: wgmma's own
             accumulation over 28672 columns loses low bits) and releases the stage.
             TAIL > 0 (N not a power of two, e.g. 24 = BN 16 + TAIL 8): a second pair of wgmmas on the same A
             registers computes the columns BN..BN+TAIL into an accumulator of their own. wgmma's time grows with
             its N, and at M = 8192 the TF32 MMAs of a 32-wide padded tile are about half of the time budget of
             3.8 TB/s (8192 x 32 x 28672 MACs at 512 per SM-cycle: ~60 us of ~124), so 16 + 8 leaves a quarter
             of it to the memory stream.
Shared memory per stage: BM * 128 B of A + B's box (next_pow2(BN + TAIL) rows of 256 B; rows past N are zero-filled
by TMA, no memory traffic): BM = 128, N = 24: 16 + 8 KB; 8 stages = 192 KB.
Numbers: none yet (written without a GPU, session 26); ``research/sweeps/hc_prenorm_sweep.py --ws`` times it.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma, warpgroup_mma, \
    warpgroup_mma_wait

WG_ROWS = gl.constexpr(64)  # rows per consumer warpgroup (wgmma's M)
BK = gl.constexpr(64)  # K block (DeepGEMM's; the splits of the op are defined on it)
BK_HALF = gl.constexpr(32)  # K columns per B box and per wgmma (32 FP32 = one 128-byte swizzle row)


@gluon.jit
def _range_of(cta, grid, total):
    """[lo, hi) of CTA ``cta``'s pairs: floor(cta * total / grid) .. floor((cta + 1) * total / grid) (int64: the
    product passes 2^31 from M * K / 64 * grid ~ 2^31, e.g. M = 4M rows at K = 7168)."""
    lo = (cta.to(gl.int64) * total // grid).to(gl.int32)
    hi = ((cta.to(gl.int64) + 1) * total // grid).to(gl.int32)
    return lo, hi


@gluon.jit
def _owner(x, grid, total):
    """The CTA whose range holds pair ``x``: the largest c with floor(c * total / grid) <= x."""
    return (((x.to(gl.int64) + 1) * grid - 1) // total).to(gl.int32)


@gluon.jit
def _producer(a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, K,
              BM: gl.constexpr, BN: gl.constexpr, STAGES: gl.constexpr):
    STAGE_BYTES: gl.constexpr = a_desc.block_type.nbytes + 2 * b_desc.block_type.nbytes
    nkb = K // BK
    total = gl.cdiv(M, BM) * nkb
    lo, hi = _range_of(gl.program_id(0), gl.num_programs(0), total)
    it = 0
    for x in range(lo, hi):
        mb = x // nkb
        k = (x - mb * nkb) * BK
        stage = it % STAGES
        # A fresh barrier counts as having completed the phase before phase 0: the first pass is free.
        mbarrier.wait(empty.index(stage), ((it // STAGES) & 1) ^ 1)
        bar = ready.index(stage)
        mbarrier.expect(bar, STAGE_BYTES)  # (TMA counts a box's full bytes, zero-filled rows included)
        tma.async_copy_global_to_shared(a_desc, [mb * BM, k], bar, a_bufs.index(stage))
        tma.async_copy_global_to_shared(b_desc, [0, k], bar, b_bufs.index(2 * stage))
        tma.async_copy_global_to_shared(b_desc, [0, k + BK_HALF], bar, b_bufs.index(2 * stage + 1))
        it += 1


@gluon.jit
def _sum_pieces(ws_ptr, at, first_owner, last_owner, mb, grid, total, nkb, zero,
                TILE: gl.constexpr, CONSUMERS: gl.constexpr, WG: gl.constexpr):
    """Sum of the pieces' partials at offsets ``at`` of their workspace tiles, in CTA order (``zero``: the
    layout)."""
    out = zero
    for owner in range(first_owner, last_owner + 1):
        owner_lo, owner_hi = _range_of(owner, grid, total)
        owner_slot = (owner_lo // nkb != mb).to(gl.int32)  # (0 where the owner's range starts in this row block)
        out += gl.load(ws_ptr + ((owner * 2 + owner_slot) * CONSUMERS + WG) * TILE + at, cache_modifier=".cg")
    return out


@gluon.jit
def _publish_or_reduce(acc, acc_t, sq, ws_ptr, counter_ptr, cta, slot, mb, first_owner, last_owner, grid, total,
                       nkb, TILE: gl.constexpr, BN: gl.constexpr, TAIL: gl.constexpr, CONSUMERS: gl.constexpr,
                       WG: gl.constexpr, MMA: gl.constexpr, MMA_T: gl.constexpr, ROWS: gl.constexpr):
    """A piece of a row block shared by CTAs first_owner..last_owner: write this CTA's FP32 partial (acc, the tail
    columns' acc_t where TAIL > 0, sq) to its workspace slot, and if it is the last piece to arrive at the row
    block's counter, return (the sums of all pieces in CTA order, True) and reset the counter; else (its own
    partial, False).

    Slots: CTA c's first row block is its slot 0, any later (shared) one its slot 1 (a range holds at most two
    shared row blocks: its first and its last), per consumer warpgroup: ws[((c * 2 + slot) * CONSUMERS + WG)], a
    tile of [64, BN] acc, [64, TAIL] acc_t, [64] sq. Ordering as in the split-K reductions of the GEMMs: every
    thread's partial store, the partition's barrier, one acquire-release atomic at GPU scope; the partials are read
    back through L2 (.cg)."""
    r = gl.arange(0, WG_ROWS, layout=ROWS)
    offs = gl.expand_dims(r, 1) * BN + gl.expand_dims(gl.arange(0, BN, layout=gl.SliceLayout(0, MMA)), 0)
    own = ws_ptr + ((cta * 2 + slot) * CONSUMERS + WG) * TILE
    gl.store(own + offs, acc)
    SQ_AT: gl.constexpr = WG_ROWS * (BN + TAIL)
    gl.store(own + SQ_AT + r, sq)
    if TAIL > 0:
        r_t = gl.arange(0, WG_ROWS, layout=gl.SliceLayout(1, MMA_T))
        offs_t = WG_ROWS * BN + gl.expand_dims(r_t, 1) * TAIL + gl.expand_dims(
            gl.arange(0, TAIL, layout=gl.SliceLayout(0, MMA_T)), 0)
        gl.store(own + offs_t, acc_t)
    gl.thread_barrier()
    counter = counter_ptr + mb * CONSUMERS + WG
    arrived = gl.atomic_add(counter, 1, sem="acq_rel", scope="gpu")
    last = arrived == last_owner - first_owner
    if last:
        acc = _sum_pieces(ws_ptr, offs, first_owner, last_owner, mb, grid, total, nkb, gl.zeros_like(acc), TILE,
                          CONSUMERS, WG)
        sq = _sum_pieces(ws_ptr, SQ_AT + r, first_owner, last_owner, mb, grid, total, nkb, gl.zeros_like(sq), TILE,
                         CONSUMERS, WG)
        if TAIL > 0:
            acc_t = _sum_pieces(ws_ptr, offs_t, first_owner, last_owner, mb, grid, total, nkb, gl.zeros_like(acc_t),
                                TILE, CONSUMERS, WG)
        gl.atomic_xchg(counter, 0, sem="relaxed", scope="gpu")
    return acc, acc_t, sq, last


@gluon.jit
def _store(d_ptr, rows, row_ok, col0, N, stride_dm, acc, WIDTH: gl.constexpr, LAYOUT: gl.constexpr):
    cols = col0 + gl.arange(0, WIDTH, layout=gl.SliceLayout(0, LAYOUT))
    rows = gl.convert_layout(rows, gl.SliceLayout(1, LAYOUT))
    row_ok = gl.convert_layout(row_ok, gl.SliceLayout(1, LAYOUT))
    gl.store(d_ptr + gl.expand_dims(rows, 1) * stride_dm + gl.expand_dims(cols, 0), acc,
             mask=gl.expand_dims(row_ok, 1) & gl.expand_dims(cols < N, 0))


@gluon.jit
def _consumer(a_bufs, b_bufs, ready, empty, d_ptr, sq_ptr, ws_ptr, counter_ptr, M, N, K, stride_dm,
              BM: gl.constexpr, BN: gl.constexpr, TAIL: gl.constexpr, STAGES: gl.constexpr,
              CONSUMERS: gl.constexpr, WG: gl.constexpr):
    MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 8])
    # wgmma's A operand in registers, 32-bit elements (k_width 1); the BF16 tile is loaded in the same layout.
    A_REGS: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA, k_width=1)
    ROWS: gl.constexpr = gl.SliceLayout(1, MMA)
    # TAIL > 0: the columns BN..BN+TAIL (N = 24 as 16 + 8: a quarter less MMA work than a 32-wide tile) are a second
    # wgmma on the same A registers, into an accumulator of their own (the same A layout under another parent).
    MMA_T: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                    instr_shape=[16, TAIL if TAIL > 0 else BN, 8])
    A_REGS_T: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA_T, k_width=1)
    TILE: gl.constexpr = WG_ROWS * (BN + TAIL) + WG_ROWS
    A_ROW0: gl.constexpr = WG * WG_ROWS
    nkb = K // BK
    total = gl.cdiv(M, BM) * nkb
    cta = gl.program_id(0)
    grid = gl.num_programs(0)
    lo, hi = _range_of(cta, grid, total)
    mb_first = lo // nkb
    zero = gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA)
    zero_t = gl.zeros([WG_ROWS, TAIL if TAIL > 0 else BN], gl.float32, layout=MMA_T)
    r = gl.arange(0, WG_ROWS, layout=ROWS)
    it = 0
    for mb in range(mb_first, (hi - 1) // nkb + 1):
        kb_lo = gl.maximum(lo, mb * nkb)
        kb_hi = gl.minimum(hi, (mb + 1) * nkb)
        acc = zero
        acc_t = zero_t
        squares = gl.zeros([WG_ROWS, BK_HALF], gl.float32, layout=A_REGS)
        for _ in range(kb_lo, kb_hi):
            stage = it % STAGES
            mbarrier.wait(ready.index(stage), (it // STAGES) & 1)
            a_tile = a_bufs.index(stage).slice(A_ROW0, WG_ROWS, dim=0)
            a0 = a_tile.slice(0, BK_HALF, dim=1).load(A_REGS).to(gl.float32)
            a1 = a_tile.slice(BK_HALF, BK_HALF, dim=1).load(A_REGS).to(gl.float32)
            b0 = b_bufs.index(2 * stage)
            b1 = b_bufs.index(2 * stage + 1)
            if TAIL > 0:
                part = warpgroup_mma(a0, b0.slice(0, BN, dim=0).permute((1, 0)), zero, use_acc=False, is_async=True)
                part = warpgroup_mma(a1, b1.slice(0, BN, dim=0).permute((1, 0)), part, is_async=True)
                a0_t = gl.convert_layout(a0, A_REGS_T)  # (the same registers: a no-op)
                a1_t = gl.convert_layout(a1, A_REGS_T)
                part_t = warpgroup_mma(a0_t, b0.slice(BN, TAIL, dim=0).permute((1, 0)), zero_t, use_acc=False,
                                       is_async=True)
                part_t = warpgroup_mma(a1_t, b1.slice(BN, TAIL, dim=0).permute((1, 0)), part_t, is_async=True)
                squares = gl.fma(a0, a0, squares)  # (the squares while the wgmmas run: they only read a0, a1)
                squares = gl.fma(a1, a1, squares)
                part, part_t, a0, a1, a0_t, a1_t = warpgroup_mma_wait(
                    num_outstanding=0, deps=(part, part_t, a0, a1, a0_t, a1_t))
                acc_t = acc_t + part_t
            else:
                part = warpgroup_mma(a0, b0.permute((1, 0)), zero, use_acc=False, is_async=True)
                part = warpgroup_mma(a1, b1.permute((1, 0)), part, is_async=True)
                squares = gl.fma(a0, a0, squares)
                squares = gl.fma(a1, a1, squares)
                part, a0, a1 = warpgroup_mma_wait(num_outstanding=0, deps=(part, a0, a1))
            mbarrier.arrive(empty.index(stage), count=1)
            acc = acc + part
            it += 1
        sq = gl.convert_layout(gl.sum(squares, axis=1), ROWS)
        rows = mb * BM + A_ROW0 + r
        store = True
        if kb_hi - kb_lo < nkb:  # a piece of a row block other CTAs share
            first_owner = _owner(mb * nkb, grid, total)
            last_owner = _owner((mb + 1) * nkb - 1, grid, total)
            acc, acc_t, sq, store = _publish_or_reduce(
                acc, acc_t, sq, ws_ptr, counter_ptr, cta, (mb != mb_first).to(gl.int32), mb, first_owner,
                last_owner, grid, total, nkb, TILE, BN, TAIL, CONSUMERS, WG, MMA, MMA_T, ROWS)
        if store:
            row_ok = rows < M
            _store(d_ptr, rows, row_ok, 0, N, stride_dm, acc, BN, MMA)
            if TAIL > 0:
                _store(d_ptr, rows, row_ok, BN, N, stride_dm, acc_t, TAIL, MMA_T)
            gl.store(sq_ptr + rows, sq, mask=row_ok)


@gluon.jit(do_not_specialize=["M", "N", "K", "stride_dm"],
           do_not_specialize_on_alignment=["d_ptr", "sq_ptr", "ws_ptr", "counter_ptr"])
def _hc_prenorm_ws_kernel(
        a_desc,  # TMA over A [M, K] BF16, block [BM, 64]
        b_desc,  # TMA over B [N, K] FP32 encoded as TFLOAT32 (rounds on load), block [next_pow2(BN + TAIL), 32]
        d_ptr,  # FP32 [M, N], row stride stride_dm
        sq_ptr,  # FP32 [M]
        ws_ptr,  # FP32 workspace [grid * 2 * CONSUMERS, 64 * (BN + TAIL) + 64] (shared row blocks' partials)
        counter_ptr,  # int32 arrival counters [cdiv(M, BM) * CONSUMERS], zero at rest
        M, N, K, stride_dm,
        BM: gl.constexpr, BN: gl.constexpr, TAIL: gl.constexpr, STAGES: gl.constexpr, CONSUMERS: gl.constexpr,
        CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr):
    gl.static_assert(BM == CONSUMERS * WG_ROWS, "one 64-row slab per consumer warpgroup")
    gl.static_assert(b_desc.block_type.shape[0] >= BN + TAIL, "B's box covers the tile and its tail")
    gl.static_assert(TAIL == 0 or (TAIL >= 8 and TAIL < BN), "a tail of 8+ columns (wgmma's N), narrower than BN")
    gl.static_assert(CONSUMERS == 1 or CONSUMERS == 2, "one or two consumer warpgroups")
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [2 * STAGES] + b_desc.block_type.shape, b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=CONSUMERS)  # one arrival per consumer warpgroup
    fence_async_shared()
    if CONSUMERS == 2:
        gl.warp_specialize([
            (_consumer, (a_bufs, b_bufs, ready, empty, d_ptr, sq_ptr, ws_ptr, counter_ptr, M, N, K, stride_dm,
                         BM, BN, TAIL, STAGES, CONSUMERS, 0)),
            (_consumer, (a_bufs, b_bufs, ready, empty, d_ptr, sq_ptr, ws_ptr, counter_ptr, M, N, K, stride_dm,
                         BM, BN, TAIL, STAGES, CONSUMERS, 1)),
            (_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, K, BM, BN, STAGES)),
        ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])
    else:
        gl.warp_specialize([
            (_consumer, (a_bufs, b_bufs, ready, empty, d_ptr, sq_ptr, ws_ptr, counter_ptr, M, N, K, stride_dm,
                         BM, BN, TAIL, STAGES, CONSUMERS, 0)),
            (_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, K, BM, BN, STAGES)),
        ], [1], [PRODUCER_REGS])
