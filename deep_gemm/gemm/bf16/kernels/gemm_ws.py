"""Warp-specialised BF16 GEMM (Gluon, SM90) for dense, M-grouped contiguous (expert ids, psum) and K-grouped layouts,
chosen per call by bf16_plan (``DG_BF16_WS`` / ``Bf16Overrides(ws=...)`` force it): DeepGEMM's
producer/consumer structure for what the ``tl.*`` kernel (gemm/bf16/kernels/gemm.py) runs with its loads and MMAs in the
same warps.

Structure (one persistent CTA per SM, tiles t = pid, pid + NUM_SMS, ... in grouped order):
  producer   1 warp: for every (tile, K block) waits for a free stage, then TMA-loads the A tile ([BM, BK] K-major
             or [BK, BM] MN-major) and the B tile ([BN, BK] or [BK, BN]) into it (arrival on the stage's `ready`).
  consumer 0, consumer 1
             4 warps each (one warpgroup): the lower and upper 64 rows of the 128 x BN tile. Per K block: wait
             `ready`, issue an asynchronous wgmma into the FP32 accumulator, wait until at most one wgmma is in
             flight (the previous block's), release the previous block's stage. BF16 wgmma accumulates in FP32, so
             the accumulator is never read inside the loop (no promotion: ptxas keeps the wgmmas back to back).
             After the last block, the 64 x BN slab goes registers -> shared memory -> one TMA store, which
             completes while the next tile's K loop runs (the buffer is waited for only at the next epilogue).
             HAS_C (dense): C's slab first arrives by TMA in that staging buffer (each thread reads back exactly
             the elements it then overwrites with D, so no barrier is needed between the two).
MN-major operands are read as they are in memory: the wgmma takes the transposed shared-memory view.
TAIL_N > 0 (dense, no C): a tile is BN + TAIL_N columns wide (128 + 16 = 144 covers N = 576 in 4 tile columns).
Register tensors, shared buffers and TMA blocks must have power-of-two shapes, so the tail has its own B descriptor
and ring (b2_desc: [TAIL_N, BK] per stage, behind the same `ready` barrier), its own wgmma on the same A slice into
a second [64, TAIL_N] accumulator, and its own staging buffer and TMA store (d2_desc: [64, TAIL_N]).
M-grouped tiles (GROUPING M_IDS / M_PSUM, as in gemm/bf16/kernels/gemm.py) lie in one expert's rows: the expert of an
M_IDS tile is the id of its first row (segments start at multiples of the tile height; a tile of padding has id -1),
that of an M_PSUM tile the group whose aligned start..end holds its first row. A tile without an expert loads nothing
and stores zeros; rows of another id (padding) or past the group's end are stored as zeros. M_PSUM with gaps left
untouched (not ZERO_GAPS): a slab wholly inside its group's rows is stored by TMA, the slab holding the group's end
by a masked pointer store of its valid rows (d_ptr), and a slab or tile without valid rows stores nothing.
MASKED (A and D [G, Mmax, *] as [G*Mmax, *] row matrices, the kernel's M = G*Mmax; B [G, N, K] stacked as for
M_IDS): group g's tiles cover its masked_m[g] valid rows (read on the device, clamped to [0, Mmax]) in cdiv(masked_m[g],
BM) row blocks from row g*Mmax; tiles run group after group, their count and each one's (group, row block, column
block) from a prefix sum over the G_PAD-padded masked_m vector (_masked_tile), so the tile loop's bound is a device
value too. Rows >= masked_m[g] are left untouched as psum's gap rows are (UNTOUCHED), and a slab wholly past them
stores nothing; the rows an A box reads past masked_m[g] (the next group's, or zero fill) only reach unstored rows.
UNIFORM (M_PSUM, MASKED): the tile's expert and group end, reductions over the per-group vector, are marked warp-uniform
(uniform.warp_uniform), so the K loops they bound keep ptxas's uniform datapath.
SPLIT_N (MASKED only): a 64 x BN tile (BM = 64) whose N the two consumers split instead of its M: consumer w computes
rows [0, 64) x columns [w * BN/2, (w + 1) * BN/2) from the shared [64, BK] A stage and its half of the [BN, BK] B
stage, and stores its 64 x BN/2 slab through its own staging buffer (D's block [64, BN/2]). Groups of a few hundred
rows then compute fewer empty rows: 192 x U(0.7, 1.3) rows per group leave ~14% of 64-row blocks empty, 25% of 128.
K_GROUPED (A [sum K, M], B [sum K, N], both MN-major; D and C FP32 [G, M, N] as [G*M, N] row matrices): tiles are
(group, pid_m, pid_n), group-major, grouped order within a group; a tile's K blocks are its group's rows
[k_start, k_start + K_g) of A and B (K sizes in layout_ptr, read on the device; BK divides every K_g: the plan), its
k_start and K_g marked warp-uniform with UNIFORM (_k_group). An empty group's tiles run no K block and store C (or
zeros). The plan takes M % 64 == 0 only: a 64-row slab then lies wholly inside its group's rows or wholly past M,
and the latter (the upper slab of the last tile row, M an odd multiple of 64) stores nothing, since its rows of the
[G*M, N] matrix are the next group's.

The tile scheduling is in ws_scheduler.py, the slab stores in ws_epilogue.py; this file holds the producer, the
consumers and the kernel.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)

from ...._internals.gluon import tma_load, tma_store
from ....common.kernels.groupings import DENSE, K_GROUPED, M_IDS, M_PSUM, MASKED  # noqa: F401  (kernel globals)
from .ws_epilogue import _store_slab
from .ws_scheduler import (WG_ROWS, _k_group, _k_sizes, _masked_num_tiles, _masked_tile, _tile_expert,  # noqa: F401
                           _tile_pids)


@gluon.jit
def _producer(a_desc, b_desc, b2_desc, a_bufs, b_bufs, b2_bufs, ready, empty, layout_ptr, M, N, K, NUM_GROUPS,
              B_GROUP_N, B_GROUP_K, NUM_TILES,
              BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr, GROUP_M: gl.constexpr,
              NUM_SMS: gl.constexpr, A_K_MAJOR: gl.constexpr, B_K_MAJOR: gl.constexpr, GROUPING: gl.constexpr,
              G_PAD: gl.constexpr, PSUM_ALIGN: gl.constexpr, TAIL_N: gl.constexpr, UNIFORM: gl.constexpr):
    VEC: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
    # (TMA counts a box's full bytes on the barrier, also where it reads past the matrix and zero-fills)
    STAGE_BYTES: gl.constexpr = (a_desc.block_type.nbytes + b_desc.block_type.nbytes
                                 + (b2_desc.block_type.nbytes if TAIL_N > 0 else 0))
    if GROUPING == MASKED:  # (the launcher's NUM_TILES is unused: only the device knows masked_m)
        NUM_TILES = _masked_num_tiles(layout_ptr, M, N, NUM_GROUPS, BM, BN, G_PAD, VEC, UNIFORM)
    num_m_blocks = gl.cdiv(M, BM)
    num_n_blocks = gl.cdiv(N, BN + TAIL_N)
    num_kb = gl.cdiv(K, BK)
    if GROUPING == K_GROUPED:  # (the K sizes, loaded once: every tile reduces them to its group's K range)
        g_idx, ks = _k_sizes(layout_ptr, NUM_GROUPS, G_PAD, VEC)
    it = 0
    for tile in range(gl.program_id(0), NUM_TILES, NUM_SMS):
        group, pid_m, pid_n = _tile_pids(tile, num_m_blocks, num_n_blocks, GROUP_M, GROUPING)
        off_m = pid_m * BM
        expert, row_end = _tile_expert(layout_ptr, off_m, NUM_GROUPS, GROUPING, G_PAD, PSUM_ALIGN, VEC, UNIFORM)
        if GROUPING == MASKED:  # (B's expert is the tile's group)
            off_m, pid_n, expert, row_end = _masked_tile(tile, layout_ptr, M, N, NUM_GROUPS, BM, BN, GROUP_M, G_PAD,
                                                         VEC, UNIFORM)
        b_row = gl.maximum(expert, 0) * B_GROUP_N + pid_n * (BN + TAIL_N)
        b_k = gl.maximum(expert, 0) * B_GROUP_K
        tile_kb = gl.where(expert >= 0, num_kb, 0)
        if GROUPING == K_GROUPED:  # A and B both step through the group's K rows
            b_k, tile_kb = _k_group(ks, g_idx, group, BK, UNIFORM)
        for kb in range(tile_kb):
            stage = it % STAGES
            # A fresh barrier counts as having completed the phase before phase 0: the first pass is free.
            mbarrier.wait(empty.index(stage), ((it // STAGES) & 1) ^ 1)
            bar = ready.index(stage)
            mbarrier.expect(bar, STAGE_BYTES)
            if A_K_MAJOR:
                tma_load(a_desc, [off_m, kb * BK], bar, a_bufs.index(stage))
            elif GROUPING == K_GROUPED:
                tma_load(a_desc, [b_k + kb * BK, off_m], bar, a_bufs.index(stage))
            else:
                tma_load(a_desc, [kb * BK, off_m], bar, a_bufs.index(stage))
            if B_K_MAJOR:
                tma_load(b_desc, [b_row, kb * BK], bar, b_bufs.index(stage))
            else:
                tma_load(b_desc, [b_k + kb * BK, b_row], bar, b_bufs.index(stage))
            if TAIL_N > 0:  # (dense: the tail's B rows follow the tile's BN)
                if B_K_MAJOR:
                    tma_load(b2_desc, [b_row + BN, kb * BK], bar, b2_bufs.index(stage))
                else:
                    tma_load(b2_desc, [kb * BK, b_row + BN], bar, b2_bufs.index(stage))
            it += 1


@gluon.jit
def _consumer(a_bufs, b_bufs, b2_bufs, ready, empty, d_desc, d2_desc, c_desc, c_smem, c2_smem, c_bar, layout_ptr,
              d_ptr, stride_dm, M, N, K, NUM_GROUPS, NUM_TILES,
              BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr, GROUP_M: gl.constexpr,
              NUM_SMS: gl.constexpr, A_K_MAJOR: gl.constexpr, B_K_MAJOR: gl.constexpr, GROUPING: gl.constexpr,
              G_PAD: gl.constexpr, PSUM_ALIGN: gl.constexpr, HAS_C: gl.constexpr, TAIL_N: gl.constexpr,
              WG: gl.constexpr, ZERO_GAPS: gl.constexpr, UNIFORM: gl.constexpr, SPLIT_N: gl.constexpr):
    VEC: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    # SPLIT_N: this warpgroup's columns of the tile are [B_COL0, B_COL0 + SLAB_N), of all its rows (A_ROW0 = 0)
    SLAB_N: gl.constexpr = BN // 2 if SPLIT_N else BN
    B_COL0: gl.constexpr = WG * SLAB_N if SPLIT_N else 0
    MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, SLAB_N, 16])
    ROWS: gl.constexpr = gl.SliceLayout(1, MMA)
    COLS: gl.constexpr = gl.SliceLayout(0, MMA)
    # M_PSUM with gaps left untouched, MASKED: only the group's valid rows are stored (TMA for whole slabs).
    UNTOUCHED: gl.constexpr = (GROUPING == M_PSUM and not ZERO_GAPS) or GROUPING == MASKED
    A_ROW0: gl.constexpr = 0 if SPLIT_N else WG * WG_ROWS
    # wgmma groups one K block commits (the main MMA, and the tail's): waiting down to this many leaves only the
    # current block's in flight.
    MMAS_PER_BLOCK: gl.constexpr = 2 if TAIL_N > 0 else 1
    if GROUPING == MASKED:
        NUM_TILES = _masked_num_tiles(layout_ptr, M, N, NUM_GROUPS, BM, BN, G_PAD, VEC, UNIFORM)
    num_m_blocks = gl.cdiv(M, BM)
    num_n_blocks = gl.cdiv(N, BN + TAIL_N)
    num_kb = gl.cdiv(K, BK)
    if GROUPING == K_GROUPED:
        g_idx, ks = _k_sizes(layout_ptr, NUM_GROUPS, G_PAD, VEC)
    it = 0
    tiles_done = 0  # phase of this warpgroup's C barrier
    for tile in range(gl.program_id(0), NUM_TILES, NUM_SMS):
        group, pid_m, pid_n = _tile_pids(tile, num_m_blocks, num_n_blocks, GROUP_M, GROUPING)
        off_m = pid_m * BM
        off_n = pid_n * (BN + TAIL_N)
        expert, row_end = _tile_expert(layout_ptr, off_m, NUM_GROUPS, GROUPING, G_PAD, PSUM_ALIGN, VEC, UNIFORM)
        if GROUPING == MASKED:
            off_m, pid_n, expert, row_end = _masked_tile(tile, layout_ptr, M, N, NUM_GROUPS, BM, BN, GROUP_M, G_PAD,
                                                         VEC, UNIFORM)
            off_n = pid_n * BN
        tile_kb = gl.where(expert >= 0, num_kb, 0)
        if GROUPING == K_GROUPED:
            _, tile_kb = _k_group(ks, g_idx, group, BK, UNIFORM)
        acc = gl.zeros([WG_ROWS, SLAB_N], gl.float32, layout=MMA)
        if TAIL_N > 0:  # (a constexpr branch: acc_tail exists, and is carried by the K loop, only with a tail)
            MMA_TAIL: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                               instr_shape=[16, TAIL_N, 16])
            acc_tail = gl.zeros([WG_ROWS, TAIL_N], gl.float32, layout=MMA_TAIL)
        for kb in range(tile_kb):
            stage = it % STAGES
            mbarrier.wait(ready.index(stage), (it // STAGES) & 1)
            if SPLIT_N:  # (the whole [64, BK] A stage; this warpgroup's half of B's)
                a = a_bufs.index(stage)
                if B_K_MAJOR:
                    b = b_bufs.index(stage).slice(B_COL0, SLAB_N, dim=0).permute((1, 0))
                else:
                    b = b_bufs.index(stage).slice(B_COL0, SLAB_N, dim=1)
            else:
                if A_K_MAJOR:
                    a = a_bufs.index(stage).slice(A_ROW0, WG_ROWS, dim=0)
                else:
                    a = a_bufs.index(stage).slice(A_ROW0, WG_ROWS, dim=1).permute((1, 0))
                if B_K_MAJOR:
                    b = b_bufs.index(stage).permute((1, 0))
                else:
                    b = b_bufs.index(stage)
            acc = warpgroup_mma(a, b, acc, is_async=True)
            # The previous block's wgmmas have retired: its stage is free.
            if TAIL_N > 0:
                if B_K_MAJOR:
                    b2 = b2_bufs.index(stage).permute((1, 0))
                else:
                    b2 = b2_bufs.index(stage)
                acc_tail = warpgroup_mma(a, b2, acc_tail, is_async=True)
                acc, acc_tail = warpgroup_mma_wait(num_outstanding=MMAS_PER_BLOCK, deps=(acc, acc_tail))
            else:
                acc = warpgroup_mma_wait(num_outstanding=MMAS_PER_BLOCK, deps=(acc,))
            mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=kb > 0)
            it += 1
        if TAIL_N > 0:
            acc, acc_tail = warpgroup_mma_wait(num_outstanding=0, deps=(acc, acc_tail))
        else:
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=tile_kb > 0)
        if UNTOUCHED:
            slab0 = off_m + A_ROW0
            if SPLIT_N:
                off_n = off_n + B_COL0
            if (expert >= 0) & (slab0 + WG_ROWS <= row_end):  # every row of the slab is the group's: one TMA store
                tma.store_wait(pendings=0)
                c_smem.store(acc.to(d_desc.dtype))
                fence_async_shared()
                tma_store(d_desc, [slab0, off_n], c_smem)
            elif (expert >= 0) & (slab0 < row_end):  # the slab holding the group's end: its valid rows only
                rows = slab0 + gl.arange(0, WG_ROWS, layout=ROWS)
                cols = off_n + gl.arange(0, SLAB_N, layout=COLS)
                ptrs = d_ptr + gl.expand_dims(rows.to(gl.int64) * stride_dm, 1) + gl.expand_dims(cols, 0)
                mask = gl.expand_dims((rows < row_end) & (rows < M), 1) & gl.expand_dims(cols < N, 0)
                gl.store(ptrs, acc.to(d_ptr.dtype.element_ty), mask=mask)
        elif GROUPING == K_GROUPED:
            if off_m + A_ROW0 < M:  # (a slab past M: the next group's rows of D)
                tiles_done = _store_slab(acc, acc, d_desc, d_desc, c_desc, c_smem, c_smem, c_bar, tiles_done,
                                         group * M + off_m + A_ROW0, off_n, BN, MMA, HAS_C, 0)
        else:
            if GROUPING != DENSE:  # rows of padding (another id) or past the group's end are stored as zeros
                rows = off_m + A_ROW0 + gl.arange(0, WG_ROWS, layout=ROWS)
                if GROUPING == M_IDS:
                    ids = gl.load(layout_ptr + rows, mask=rows < M, other=-1)
                    valid = (ids == expert) & (expert >= 0)
                else:
                    valid = (rows < row_end) & (expert >= 0)
                acc = gl.where(gl.expand_dims(valid, 1), acc, 0.0)
            if TAIL_N > 0:
                tiles_done = _store_slab(acc, acc_tail, d_desc, d2_desc, c_desc, c_smem, c2_smem, c_bar, tiles_done,
                                         off_m + A_ROW0, off_n, BN, MMA, HAS_C, TAIL_N)
            else:
                tiles_done = _store_slab(acc, acc, d_desc, d2_desc, c_desc, c_smem, c2_smem, c_bar, tiles_done,
                                         off_m + A_ROW0, off_n, BN, MMA, HAS_C, TAIL_N)
    tma.store_wait(pendings=0)


@gluon.jit(do_not_specialize=["stride_dm", "M", "N", "K", "NUM_GROUPS", "B_GROUP_N", "B_GROUP_K", "NUM_TILES"],
           do_not_specialize_on_alignment=["layout_ptr", "d_ptr"])
def _bf16_gemm_ws_kernel(
        a_desc, b_desc,  # BF16 operands as in memory: A [M, K] or [K, M]; B [G*N, K] or [G*K, N] (G = 1: dense);
        # K_GROUPED: A [sum K, M], B [sum K, N]
        b2_desc,  # TAIL_N > 0: B's tail tiles, block [TAIL_N, BK] or [BK, TAIL_N] (else unused)
        d_desc,  # D [M, N] (BF16 or FP32), block [64, BN] (SPLIT_N: [64, BN / 2]; K_GROUPED: FP32 [G*M, N])
        d2_desc,  # TAIL_N > 0: D's tail slabs, block [64, TAIL_N] (else unused)
        c_desc,  # C with D's shape, dtype and block (HAS_C; else unused)
        layout_ptr,  # int32 expert id per row (M_IDS), group ends (M_PSUM), masked_m (MASKED), K sizes (K_GROUPED);
        # DENSE: unused
        d_ptr, stride_dm,  # D's storage and row stride (elements): M_PSUM without ZERO_GAPS, MASKED (else unused)
        M, N, K, NUM_GROUPS, B_GROUP_N, B_GROUP_K,  # B's rows / K rows per expert in its stacked matrix
        # (M: rows of A and D; MASKED: G*Mmax, of their [G*Mmax, *] views)
        NUM_TILES,  # tiles to run, a prefix of the grouped order (all of them, or the whole waves before a split tail;
        # MASKED: unused, counted on the device)
        BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr, GROUP_M: gl.constexpr,
        NUM_SMS: gl.constexpr, A_K_MAJOR: gl.constexpr, B_K_MAJOR: gl.constexpr, GROUPING: gl.constexpr,
        G_PAD: gl.constexpr, PSUM_ALIGN: gl.constexpr, HAS_C: gl.constexpr, TAIL_N: gl.constexpr,
        CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr,
        ZERO_GAPS: gl.constexpr = True,  # M_PSUM: gap rows stored as zeros (else left untouched)
        UNIFORM: gl.constexpr = False,  # M_PSUM / K_GROUPED: the tile's layout values marked warp-uniform
        SPLIT_N: gl.constexpr = False):  # a 64 x BN tile, its column halves one per consumer (MASKED; D block
        # [64, BN / 2])
    gl.static_assert(BM == 2 * WG_ROWS or (SPLIT_N and BM == WG_ROWS),
                     "two consumer warpgroups of 64 rows (SPLIT_N: of 64 rows by BN / 2 columns)")
    gl.static_assert(not SPLIT_N or (GROUPING == MASKED and TAIL_N == 0 and not HAS_C),
                     "split columns: masked, no tail, no C")
    gl.static_assert(GROUPING == DENSE or GROUPING == M_IDS or GROUPING == M_PSUM or GROUPING == MASKED
                     or GROUPING == K_GROUPED, "dense, M-grouped, masked and K-grouped layouts")
    gl.static_assert(not HAS_C or GROUPING == DENSE or GROUPING == K_GROUPED, "C accumulation: dense and K-grouped")
    gl.static_assert(GROUPING != K_GROUPED or (not A_K_MAJOR and not B_K_MAJOR), "K-grouped: MN-major A and B")
    gl.static_assert(TAIL_N == 0 or (GROUPING == DENSE and not HAS_C), "tail columns: dense, no C")
    gl.static_assert(ZERO_GAPS or GROUPING == M_PSUM, "gaps left untouched: the psum layout")
    gl.static_assert(GROUPING != MASKED or A_K_MAJOR, "masked: K-major A (the launcher copies an MN-major one)")
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)
    b2_bufs = b_bufs
    if TAIL_N > 0:
        b2_bufs = gl.allocate_shared_memory(b2_desc.dtype, [STAGES] + b2_desc.block_type.shape, b2_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=2)  # one arrival per consumer warpgroup
    c_bufs = gl.allocate_shared_memory(d_desc.dtype, [2] + d_desc.block_type.shape, d_desc.layout)
    c2_bufs = c_bufs
    if TAIL_N > 0:
        c2_bufs = gl.allocate_shared_memory(d2_desc.dtype, [2, WG_ROWS, TAIL_N], d2_desc.layout)
    c_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(c_bars.index(i), count=1)
    fence_async_shared()
    gl.warp_specialize([
        (_consumer, (a_bufs, b_bufs, b2_bufs, ready, empty, d_desc, d2_desc, c_desc, c_bufs.index(0), c2_bufs.index(0),
                     c_bars.index(0), layout_ptr, d_ptr, stride_dm, M, N, K, NUM_GROUPS, NUM_TILES, BM, BN, BK, STAGES,
                     GROUP_M, NUM_SMS, A_K_MAJOR, B_K_MAJOR, GROUPING, G_PAD, PSUM_ALIGN, HAS_C, TAIL_N, 0, ZERO_GAPS,
                     UNIFORM, SPLIT_N)),
        (_consumer, (a_bufs, b_bufs, b2_bufs, ready, empty, d_desc, d2_desc, c_desc, c_bufs.index(1), c2_bufs.index(1),
                     c_bars.index(1), layout_ptr, d_ptr, stride_dm, M, N, K, NUM_GROUPS, NUM_TILES, BM, BN, BK, STAGES,
                     GROUP_M, NUM_SMS, A_K_MAJOR, B_K_MAJOR, GROUPING, G_PAD, PSUM_ALIGN, HAS_C, TAIL_N, 1, ZERO_GAPS,
                     UNIFORM, SPLIT_N)),
        (_producer, (a_desc, b_desc, b2_desc, a_bufs, b_bufs, b2_bufs, ready, empty, layout_ptr, M, N, K, NUM_GROUPS,
                     B_GROUP_N, B_GROUP_K, NUM_TILES, BM, BN, BK, STAGES, GROUP_M, NUM_SMS, A_K_MAJOR, B_K_MAJOR,
                     GROUPING, G_PAD, PSUM_ALIGN, TAIL_N, UNIFORM)),
    ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])
