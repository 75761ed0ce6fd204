"""Warp-specialised block-scaled FP8 GEMM (Gluon, SM90): DeepGEMM's producer/consumer structure in Triton.

Maths as in gemm/fp8/kernels/gemm.py: every 128-K block is one wgmma chain into a fresh FP32 tile, promoted into the
FP32 accumulator with sfa[row] * sfb (per-row products formed once per block), so FP8 products never accumulate across K
blocks in the tensor core's reduced-precision accumulator.

Structure (one persistent CTA per SM, tiles t = pid, pid + NUM_SMS, ...):
  producer   1 warp, few registers: for every (tile, K block) waits for a free stage, then TMA-loads the A tile
             [BM, 128] and the B tile [TILE_N, 128] into it (arrival on the stage's `ready` barrier).
  consumer 0, consumer 1
             4 warps each (one warpgroup), the lower and upper half of the tile's rows. Per K block: wait `ready`,
             wgmma, promote with the scales, release the stage (`empty`, one arrival per consumer); after the last
             K block, store the tile (BF16/FP32, optional C, row masks for grouped layouts). Two mainloops:
             * two waves (WAVES=2, DeepGEMM's structure): two 64 x BN wgmmas per K block, each waited for and
               promoted before the next; the waves stack along N (a 128 x 2BN tile, WAVE_N) or along M (256 x BN).
               Twice the MMA work per stage byte of a 128 x BN tile: the main mode for large problems.
             * split tile, overlapped (NARROW < BN): a 128 x (BN + NARROW) tile, e.g. 128 x 192, as a BN-wide and
               a NARROW-wide wave. The partials are small enough (64 + 32 registers) for both to stay live, so
               each wave is promoted while the other wave's wgmma runs. Also finer tile widths against wave
               quantisation (N = 2112 = 11 x 192).
             * one wave: one 64 x BN wgmma per K block, each block promoted while the next one's wgmma runs (two
               partials taking turns); for problems too small to fill the SMs with big tiles. With SCALES_SMEM the
               producer also stages each block's scales (BM A scales by cp.async, the B scale) in the stage, so
               the consumers read them from shared memory instead of waiting on global loads.
The two consumers never synchronise with each other, so one promotes while the other's wgmma runs. The register
budget is split per partition (setmaxnreg).

Groupings mirror gemm/fp8/kernels/gemm.py (DENSE, M_IDS, M_PSUM, MASKED, K_GROUPED); the expert of an M_IDS tile is the
id of its first row (segments start at multiples of the tile height), rows with another id are written as zeros.
M_PSUM and MASKED tiles are enumerated per group on the device (_tile_info: cdiv(rows, BM) row blocks from the
group's first row), so no tile straddles two groups or covers rows of no group, and no host ever reads the layout.
With WALK (Fp8Overrides.tile_walk) each partition finds those tiles as DeepGEMM's scheduler does, carrying the current
group from tile to tile (_walk) instead of scanning every group's rows per tile (_tile_info); the same tiles.
K_GROUPED (weight gradients of grouped experts, 1D1D scales, two-wave tiles only) enumerates every group's output
tiles; a tile's K blocks are its group's columns of the concatenated K (_k_blocks).
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma

from ...._internals.gluon import thread_barrier
from ....common.kernels.groupings import DENSE, K_GROUPED, M_IDS, M_PSUM, MASKED  # noqa: F401  (kernel globals)
from .ws_epilogue import _epilogue, _split_k_reduce, _tma_store
from .ws_mainloop import (PRODUCER_WARPS, _first_block_scales, _mainloop_one_wave, _mainloop_split, _mainloop_two_waves,
                          _mainloop_two_waves_1d1d, _next_first_scales, _producer, _ready_arrivals, _walk_first_scales)
from .ws_scheduler import WG_ROWS, _k_blocks, _num_tiles, _split_tile_cols, _tile_info, _walk, _walk_info, _walk_start


@gluon.jit
def _split_tile(a_bufs, b_bufs, b2_bufs, ready, empty, layout_ptr, sfa_rows, sfb_ptr, d_ptr, c_ptr, d_desc, c_smem,
                d2_desc, c2_smem, rows, row_ok, group, expert, off_m, off_n, row_end, N, num_kb, it, stride_sfa_k,
                stride_sfb_g, stride_sfb_n, stride_sfb_k, stride_dg, stride_dm, stride_cm, A_ROW0: gl.constexpr,
                BN: gl.constexpr, NARROW: gl.constexpr, STAGES: gl.constexpr, GROUPING: gl.constexpr,
                ZERO_GAPS: gl.constexpr, HAS_C: gl.constexpr, D_TMA: gl.constexpr, MMA: gl.constexpr,
                MMA2: gl.constexpr):
    """One warpgroup's 64 rows of a split (BN + NARROW)-wide tile: mainloop, then the two waves' stores (TMA when
    D_TMA, each through its own staging buffer and descriptor, so neither waits for the other's store)."""
    wide_n, narrow_n = _split_tile_cols(off_n, N, BN, NARROW)
    cols = wide_n + gl.arange(0, BN, layout=gl.SliceLayout(0, MMA))
    cols2 = narrow_n + gl.arange(0, NARROW, layout=gl.SliceLayout(0, MMA2))
    rows2 = off_m + A_ROW0 + gl.arange(0, WG_ROWS, layout=gl.SliceLayout(1, MMA2))
    row_ok2 = gl.convert_layout(row_ok, gl.SliceLayout(1, MMA2))
    acc0 = gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA)
    acc1 = gl.zeros([WG_ROWS, NARROW], gl.float32, layout=MMA2)
    if expert >= 0:
        sfb = sfb_ptr + expert * stride_sfb_g
        acc0, acc1, it = _mainloop_split(
            a_bufs, b_bufs, b2_bufs, ready, empty, sfa_rows, sfb + (wide_n // 128) * stride_sfb_n,
            sfb + (narrow_n // 128) * stride_sfb_n, row_ok, wide_n < N, narrow_n < N, num_kb, it, stride_sfa_k,
            stride_sfb_k, A_ROW0, BN, NARROW, STAGES, MMA, MMA2)
    _epilogue(acc0, rows, cols, row_ok, cols < N, group, expert, row_end, layout_ptr, d_ptr, c_ptr, d_desc, c_smem,
              off_m + A_ROW0, wide_n, stride_dg, stride_dm, stride_cm, GROUPING, ZERO_GAPS, HAS_C, D_TMA)
    _epilogue(acc1, rows2, cols2, row_ok2, cols2 < N, group, expert, row_end, layout_ptr, d_ptr, c_ptr, d2_desc,
              c2_smem, off_m + A_ROW0, narrow_n, stride_dg, stride_dm, stride_cm, GROUPING, ZERO_GAPS, HAS_C, D_TMA)


@gluon.jit
def _consumer(a_desc, b_desc, a_bufs, b_bufs, b2_bufs, sfb_bufs, sfa_bufs, sb_bufs, ready, empty, c_bars, layout_ptr,
              sfa_ptr, sfb_ptr, d_ptr, c_ptr, d_desc, c_smem, d2_desc, c2_smem, c_desc,
              M, N, K, NUM_GROUPS, stride_sfa_g, stride_sfa_m, stride_sfa_k, stride_sfb_g, stride_sfb_n,
              stride_sfb_k, stride_dg, stride_dm, stride_cm,
              BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr, GROUP_M: gl.constexpr,
              NUM_SMS: gl.constexpr, GROUPING: gl.constexpr, G_PAD: gl.constexpr, PSUM_ALIGN: gl.constexpr,
              ZERO_GAPS: gl.constexpr, HAS_C: gl.constexpr, D_TMA: gl.constexpr,
              WAVES: gl.constexpr, WAVE_N: gl.constexpr, TILE_N: gl.constexpr, NARROW: gl.constexpr,
              SPLIT: gl.constexpr, SFB_SMEM: gl.constexpr, C_TMA: gl.constexpr, SCALES_SMEM: gl.constexpr,
              SPLIT_K: gl.constexpr, ws_ptr, counter_ptr, WG: gl.constexpr, WALK: gl.constexpr,
              UNIFORM: gl.constexpr, stagger, STAGGER: gl.constexpr):
    VEC: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 32])
    MMA2: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                   instr_shape=[16, NARROW, 32])
    ROWS: gl.constexpr = gl.SliceLayout(1, MMA)
    COLS: gl.constexpr = gl.SliceLayout(0, MMA)
    num_units = _num_tiles(layout_ptr, M, N, NUM_GROUPS, BM, TILE_N, GROUPING, G_PAD, VEC, PSUM_ALIGN,
                           UNIFORM) * SPLIT_K
    # This warpgroup's rows of the tile: the lower or upper half.
    A_ROW0: gl.constexpr = WG * (BM // 2)
    it = 0
    tiles_done = 0  # parity of this warpgroup's C-load barriers (C_TMA: each wave's is used once per tile)
    # Two-wave 1D2D tiles of 2-D layouts load a tile's first-block scales before the previous tile's epilogue
    # (_next_first_scales); the first tile's here.
    # (Masked layouts with the walk (WALK) would find the next tile cheaply, but the prefetched scales live across
    # the epilogue: 24 -> 80 spilled bytes at the budget it builds best with, some inside the K loop, sm_90a.)
    PREFETCH_FIRST: gl.constexpr = WAVES == 2 and not SPLIT and not SFB_SMEM and GROUPING != MASKED
    if WALK:
        w_g, w_first = _walk_start(gl.program_id(0))
    if PREFETCH_FIRST and WALK:
        w_g, w_first, f_sa0, f_sb0, f_x1 = _walk_first_scales(
            sfa_ptr, sfb_ptr, gl.program_id(0), num_units, w_g, w_first, layout_ptr, M, N, NUM_GROUPS, stride_sfa_g,
            stride_sfa_m, stride_sfb_g, stride_sfb_n, BM, BN, TILE_N, GROUP_M, GROUPING, PSUM_ALIGN, A_ROW0, WAVE_N,
            ROWS, UNIFORM)
    elif PREFETCH_FIRST:
        f_sa0, f_sb0, f_x1 = _next_first_scales(sfa_ptr, sfb_ptr, gl.program_id(0), num_units, layout_ptr, M, N,
                                                NUM_GROUPS, stride_sfa_g, stride_sfa_m, stride_sfb_g, stride_sfb_n,
                                                BM, BN, TILE_N, GROUP_M, GROUPING, G_PAD, PSUM_ALIGN, A_ROW0, WAVE_N,
                                                VEC, ROWS, UNIFORM)
    for unit in range(gl.program_id(0), num_units, NUM_SMS):
        tile = unit // SPLIT_K
        split = unit % SPLIT_K
        if WALK:
            w_g, w_first, w_rows, w_start = _walk(tile, w_g, w_first, layout_ptr, M, N, NUM_GROUPS, BM, TILE_N,
                                                  GROUPING, PSUM_ALIGN, UNIFORM)
            group, expert, off_m, off_n, m_limit, row_end = _walk_info(tile, w_g, w_first, w_rows, w_start, M, N, BM,
                                                                       TILE_N, GROUP_M, GROUPING)
        else:
            group, expert, off_m, off_n, m_limit, row_end = _tile_info(
                tile, layout_ptr, M, N, NUM_GROUPS, BM, TILE_N, GROUP_M, GROUPING, G_PAD, PSUM_ALIGN, VEC, UNIFORM)
        kb0, num_kb = _k_blocks(layout_ptr, group, K, NUM_GROUPS, BK, GROUPING, G_PAD, VEC, split, SPLIT_K, UNIFORM)
        rows = off_m + A_ROW0 + gl.arange(0, WG_ROWS, layout=ROWS)
        cols = off_n + gl.arange(0, BN, layout=COLS)
        # Row of this slab in the 2-D view of D the TMA descriptor covers ([G * M, N] for masked and K-grouped
        # layouts).
        d_row0 = off_m + A_ROW0
        if GROUPING == MASKED or GROUPING == K_GROUPED:
            d_row0 = d_row0 + group * M
        row_ok = rows < m_limit
        col_ok = cols < N
        sfa_rows = sfa_ptr + group * stride_sfa_g + rows * stride_sfa_m + kb0 * stride_sfa_k
        # 1D2D: the tile's B scale block (1D1D scales come through shared memory: _mainloop_two_waves_1d1d).
        sfb_cols = sfb_ptr + expert * stride_sfb_g + (off_n // 128) * stride_sfb_n + kb0 * stride_sfb_k
        if SPLIT:
            _split_tile(a_bufs, b_bufs, b2_bufs, ready, empty, layout_ptr, sfa_rows, sfb_ptr, d_ptr, c_ptr, d_desc,
                        c_smem, d2_desc, c2_smem, rows, row_ok, group, expert, off_m, off_n, row_end, N, num_kb, it,
                        stride_sfa_k, stride_sfb_g, stride_sfb_n, stride_sfb_k, stride_dg, stride_dm, stride_cm,
                        A_ROW0, BN, NARROW, STAGES, GROUPING, ZERO_GAPS, HAS_C, D_TMA, MMA, MMA2)
            if expert >= 0:
                it += num_kb
        elif WAVES == 1:
            acc = gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA)
            if expert >= 0:
                acc, it = _mainloop_one_wave(a_bufs, b_bufs, sfa_bufs, sb_bufs, ready, empty, sfa_rows, sfb_cols,
                                             row_ok, num_kb, it, stride_sfa_k, stride_sfb_k, A_ROW0, BN, STAGES, MMA,
                                             SCALES_SMEM)
            if SPLIT_K > 1:  # (dense, no C, D by TMA: rows past M are clipped by the store, nothing to zero)
                acc, last = _split_k_reduce(acc, ws_ptr, counter_ptr, 2 * tile + WG, split, c_smem, BN, SPLIT_K)
                if last:
                    thread_barrier()  # every thread's staging reads done before the buffer takes D's slab
                    _tma_store(acc, d_desc, c_smem.slice(0, WG_ROWS), d_row0, off_n)
            else:
                _epilogue(acc, rows, cols, row_ok, col_ok, group, expert, row_end, layout_ptr, d_ptr, c_ptr, d_desc,
                          c_smem, d_row0, off_n, stride_dg, stride_dm, stride_cm, GROUPING, ZERO_GAPS, HAS_C, D_TMA,
                          off_m + A_ROW0, m_limit)
        else:
            if WAVE_N:  # the second wave is the next BN columns of the same rows
                rows1 = rows
                cols1 = cols + BN
                sfa_rows1 = sfa_rows
                sfb_cols1 = sfb_cols + stride_sfb_n
                wave1_ok = off_n + BN < N
                row1 = d_row0
                off_n1 = off_n + BN
                slab_row1 = off_m + A_ROW0
            else:  # the second wave is the next 64 rows
                rows1 = rows + WG_ROWS
                cols1 = cols
                sfa_rows1 = sfa_rows + WG_ROWS * stride_sfa_m
                sfb_cols1 = sfb_cols
                wave1_ok = off_m + A_ROW0 + WG_ROWS < m_limit
                row1 = d_row0 + WG_ROWS
                off_n1 = off_n
                slab_row1 = off_m + A_ROW0 + WG_ROWS
            row_ok1 = rows1 < m_limit
            col_ok1 = cols1 < N
            acc0 = gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA)
            acc1 = gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA)
            if STAGGER == 3:  # both warpgroups meet here once per tile (barrier 0 counts 2; one phase per tile)
                mbarrier.arrive(stagger.index(0), count=1)
                mbarrier.wait(stagger.index(0), tiles_done & 1)
            if expert >= 0:
                if SFB_SMEM:
                    acc0, acc1, it = _mainloop_two_waves_1d1d(a_bufs, b_bufs, sfb_bufs, ready, empty, sfa_rows, row_ok,
                                                              num_kb, it, stride_sfa_k, A_ROW0, BN, STAGES, MMA,
                                                              stagger, WG, STAGGER)
                else:
                    if not PREFETCH_FIRST:
                        f_sa0, f_sb0, f_x1 = _first_block_scales(sfa_rows, sfa_rows1, sfb_cols, sfb_cols1, row_ok,
                                                                 row_ok1, expert >= 0, wave1_ok, WAVE_N)
                    acc0, acc1, it = _mainloop_two_waves(
                        a_bufs, b_bufs, ready, empty, sfa_rows, sfa_rows1, sfb_cols, sfb_cols1, row_ok, row_ok1,
                        wave1_ok, num_kb, it, stride_sfa_k, stride_sfb_k, f_sa0, f_sb0, f_x1, A_ROW0, BN, STAGES,
                        WAVE_N, MMA, stagger, WG, STAGGER)
            if PREFETCH_FIRST and WALK:  # the walk moves on to the next tile now; the loop's top finds it there
                w_g, w_first, f_sa0, f_sb0, f_x1 = _walk_first_scales(
                    sfa_ptr, sfb_ptr, unit + NUM_SMS, num_units, w_g, w_first, layout_ptr, M, N, NUM_GROUPS,
                    stride_sfa_g, stride_sfa_m, stride_sfb_g, stride_sfb_n, BM, BN, TILE_N, GROUP_M, GROUPING,
                    PSUM_ALIGN, A_ROW0, WAVE_N, ROWS, UNIFORM)
            elif PREFETCH_FIRST:
                f_sa0, f_sb0, f_x1 = _next_first_scales(sfa_ptr, sfb_ptr, unit + NUM_SMS, num_units, layout_ptr, M,
                                                        N, NUM_GROUPS, stride_sfa_g, stride_sfa_m, stride_sfb_g,
                                                        stride_sfb_n, BM, BN, TILE_N, GROUP_M, GROUPING, G_PAD,
                                                        PSUM_ALIGN, A_ROW0, WAVE_N, VEC, ROWS, UNIFORM)
            _epilogue(acc0, rows, cols, row_ok, col_ok, group, expert, row_end, layout_ptr, d_ptr, c_ptr, d_desc,
                      c_smem, d_row0, off_n, stride_dg, stride_dm, stride_cm, GROUPING, ZERO_GAPS, HAS_C, D_TMA,
                      off_m + A_ROW0, m_limit, c_desc, c_bars.index(2 * WG), tiles_done & 1, C_TMA)
            _epilogue(acc1, rows1, cols1, row_ok1, col_ok1, group, expert, row_end, layout_ptr, d_ptr, c_ptr, d_desc,
                      c_smem, row1, off_n1, stride_dg, stride_dm, stride_cm, GROUPING, ZERO_GAPS, HAS_C, D_TMA,
                      slab_row1, m_limit, c_desc, c_bars.index(2 * WG + 1), tiles_done & 1, C_TMA)
        tiles_done += 1
    if D_TMA:
        tma.store_wait(pendings=0)


@gluon.jit(do_not_specialize=["M", "N", "K", "NUM_GROUPS", "stride_sfa_g", "stride_sfa_m", "stride_sfa_k",
                               "stride_sfb_g", "stride_sfb_n", "stride_sfb_k", "stride_dg", "stride_dm", "stride_cm"],
            do_not_specialize_on_alignment=["sfa_ptr", "sfb_ptr", "d_ptr", "c_ptr", "layout_ptr", "counter_ptr"])
def _fp8_gemm_ws_kernel(
        a_desc, b_desc,  # TMA descriptors: A [rows, K] K-major, B [G*N, K] K-major (FP8)
        b2_desc,  # B again, block [NARROW, BK]: the narrow wave of split tiles (unused otherwise)
        sfa_ptr, sfb_ptr, d_ptr, c_ptr,
        d_desc,  # TMA descriptor over D as [rows, N] (masked: [G * Mmax, N]), block [64, BN] (used when D_TMA)
        d2_desc,  # the same, block [64, NARROW]: the narrow wave of split tiles (unused otherwise)
        c_desc,  # TMA descriptor over C with d_desc's shape and block (used when C_TMA)
        layout_ptr,
        ws_ptr,  # split-K: FP32 workspace [2 * tiles, SPLIT_K, 64 * BN] (16-byte aligned: specialised on);
                 # KG_DESC: A's storage (FP8, every group's [M, K_g] block in turn)
        counter_ptr,  # split-K: int32 arrival counters, one per 64-row slab (2 per tile), zero at rest; KG_DESC: B's
        M, N, K, NUM_GROUPS,
        stride_sfa_g, stride_sfa_m, stride_sfa_k, stride_sfb_g, stride_sfb_n, stride_sfb_k,
        stride_dg, stride_dm, stride_cm,
        BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr, GROUP_M: gl.constexpr,
        NUM_SMS: gl.constexpr, GROUPING: gl.constexpr, G_PAD: gl.constexpr, PSUM_ALIGN: gl.constexpr,
        ZERO_GAPS: gl.constexpr, B_PER_ROW: gl.constexpr, HAS_C: gl.constexpr, D_TMA: gl.constexpr,
        WAVES: gl.constexpr, WAVE_N: gl.constexpr, TILE_N: gl.constexpr, NARROW: gl.constexpr, C_TMA: gl.constexpr,
        SCALES_SMEM: gl.constexpr, SPLIT_K: gl.constexpr, CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr,
        KG_DESC: gl.constexpr = False,  # K-grouped: A and B as per-group blocks, descriptors built per tile
        WALK: gl.constexpr = False,  # M_PSUM / MASKED: tiles found by the carried walk (_walk), not the scan
        UNIFORM: gl.constexpr = False,  # M_PSUM / MASKED / K_GROUPED: layout values marked warp-uniform
        STAGGER: gl.constexpr = 0):  # two-wave tiles: warpgroup 1's waves follow warpgroup 0's (_stagger_wait)
    # Tile BM x TILE_N; each consumer warpgroup computes WAVES 64 x BN waves of it, stacked along M or along N.
    # Waves along N: a 128 x (BN + NARROW) tile; NARROW < BN is a split tile (_mainloop_split).
    SPLIT: gl.constexpr = WAVE_N and NARROW < BN
    # Per-column (1D1D) B scales come through shared memory, on 128 x 2BN two-wave tiles only
    # (_mainloop_two_waves_1d1d): the other consumers have no registers to prefetch them.
    SFB_SMEM: gl.constexpr = B_PER_ROW
    if SFB_SMEM:
        gl.static_assert(WAVES == 2 and WAVE_N and not SPLIT, "1D1D runs on 128 x 2BN two-wave tiles")
    if GROUPING == K_GROUPED:
        gl.static_assert(SFB_SMEM and D_TMA, "K-grouped layouts run 1D1D two-wave tiles stored by TMA")
    gl.static_assert(not KG_DESC or (GROUPING == K_GROUPED and SPLIT_K == 1), "per-group descriptors: K-grouped")
    gl.static_assert(not WALK or ((GROUPING == M_PSUM or GROUPING == MASKED) and SPLIT_K == 1),
                     "the carried walk: psum and masked layouts")
    gl.static_assert(not C_TMA or (HAS_C and D_TMA), "C by TMA goes with D by TMA")
    gl.static_assert(not SCALES_SMEM or (WAVES == 1 and not B_PER_ROW), "staged 1D2D scales: one-wave tiles")
    gl.static_assert(SPLIT_K == 1 or (WAVES == 1 and GROUPING == DENSE and not B_PER_ROW and not HAS_C and D_TMA),
                     "split-K: dense 1D2D one-wave tiles without C, D by TMA")
    gl.static_assert(not (SPLIT and GROUPING == MASKED), "split tiles store rows of dense and contiguous layouts")
    if WAVE_N:
        gl.static_assert(WAVES == 2 and BM == 2 * WG_ROWS and TILE_N == BN + NARROW, "128 x (BN + NARROW) tile")
        gl.static_assert(BN == 128, "waves along N take one 128-column B scale block each")
    else:
        gl.static_assert(BM == 2 * WAVES * WG_ROWS and TILE_N == BN, "(128 x WAVES) x BN tile, waves along M")
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BM, BK], a_desc.layout)
    if SPLIT:  # shared-memory shapes are powers of two: the narrow wave's B rows get their own ring
        b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BN, BK], b_desc.layout)
        b2_bufs = gl.allocate_shared_memory(b2_desc.dtype, [STAGES, NARROW, BK], b2_desc.layout)
    else:
        b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES, TILE_N, BK], b_desc.layout)
        b2_bufs = b_bufs
    if SFB_SMEM:
        sfb_bufs = gl.allocate_shared_memory(gl.float32, [STAGES, TILE_N],
                                             gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
    else:
        sfb_bufs = a_bufs
    if SCALES_SMEM:  # per stage: the tile's A scales and (in slot 0 of 32) its B scale
        sfa_bufs = gl.allocate_shared_memory(gl.float32, [STAGES, BM], gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
        sb_bufs = gl.allocate_shared_memory(gl.float32, [STAGES, 32], gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
    else:
        sfa_bufs = a_bufs
        sb_bufs = a_bufs
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=_ready_arrivals(SFB_SMEM or SCALES_SMEM))
        mbarrier.init(empty.index(i), count=2)  # one arrival per consumer warpgroup
    if STAGGER > 0:
        gl.static_assert(WAVES == 2 and not SPLIT, "staggered warpgroups: two-wave tiles")
        stagger = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(STAGES):
            # levels 1, 2: warpgroup 0's wave 0 of the block in stage i; level 3: both warpgroups (barrier 0)
            mbarrier.init(stagger.index(i), count=2 if STAGGER == 3 else 1)
    else:
        stagger = ready
    # One epilogue staging buffer per consumer warpgroup (and one per warpgroup for split tiles' narrow wave);
    # split-K stages a 64 x BN FP32 partial there too (_split_k_reduce), so its buffers take that many bytes.
    C_ROWS: gl.constexpr = WG_ROWS * 32 // d_desc.dtype.primitive_bitwidth if SPLIT_K > 1 else WG_ROWS
    c_bufs = gl.allocate_shared_memory(d_desc.dtype, [2, C_ROWS, BN], d_desc.layout)
    if SPLIT:
        c2_bufs = gl.allocate_shared_memory(d2_desc.dtype, [2, WG_ROWS, NARROW], d2_desc.layout)
    else:
        c2_bufs = c_bufs
    if C_TMA:  # one C-load barrier per consumer warpgroup and wave
        c_bars = gl.allocate_shared_memory(gl.int64, [4, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(4):
            mbarrier.init(c_bars.index(i), count=1)
    else:
        c_bars = ready
    fence_async_shared()
    # Partition arguments are written out as tuple literals: a tuple built in a variable first turns the
    # constexprs inside it into runtime values (triton 3.6).
    gl.warp_specialize([
        (_consumer, (a_desc, b_desc, a_bufs, b_bufs, b2_bufs, sfb_bufs, sfa_bufs, sb_bufs, ready, empty, c_bars,
                     layout_ptr, sfa_ptr, sfb_ptr, d_ptr, c_ptr, d_desc, c_bufs.index(0), d2_desc, c2_bufs.index(0),
                     c_desc, M, N, K, NUM_GROUPS, stride_sfa_g, stride_sfa_m, stride_sfa_k, stride_sfb_g, stride_sfb_n,
                     stride_sfb_k, stride_dg, stride_dm, stride_cm, BM, BN, BK, STAGES, GROUP_M, NUM_SMS, GROUPING,
                     G_PAD, PSUM_ALIGN, ZERO_GAPS, HAS_C, D_TMA, WAVES, WAVE_N, TILE_N, NARROW, SPLIT,
                     SFB_SMEM, C_TMA, SCALES_SMEM, SPLIT_K, ws_ptr, counter_ptr, 0, WALK, UNIFORM, stagger, STAGGER)),
        (_consumer, (a_desc, b_desc, a_bufs, b_bufs, b2_bufs, sfb_bufs, sfa_bufs, sb_bufs, ready, empty, c_bars,
                     layout_ptr, sfa_ptr, sfb_ptr, d_ptr, c_ptr, d_desc, c_bufs.index(1), d2_desc, c2_bufs.index(1),
                     c_desc, M, N, K, NUM_GROUPS, stride_sfa_g, stride_sfa_m, stride_sfa_k, stride_sfb_g, stride_sfb_n,
                     stride_sfb_k, stride_dg, stride_dm, stride_cm, BM, BN, BK, STAGES, GROUP_M, NUM_SMS, GROUPING,
                     G_PAD, PSUM_ALIGN, ZERO_GAPS, HAS_C, D_TMA, WAVES, WAVE_N, TILE_N, NARROW, SPLIT,
                     SFB_SMEM, C_TMA, SCALES_SMEM, SPLIT_K, ws_ptr, counter_ptr, 1, WALK, UNIFORM, stagger, STAGGER)),
        (_producer, (a_desc, b_desc, b2_desc, a_bufs, b_bufs, b2_bufs, sfb_bufs, sfa_bufs, sb_bufs, ready, empty,
                     layout_ptr, sfa_ptr, sfb_ptr, M, N, K, NUM_GROUPS, stride_sfa_g, stride_sfa_m, stride_sfa_k,
                     stride_sfb_g, stride_sfb_n, stride_sfb_k, BM, BN, NARROW, TILE_N, BK, STAGES, GROUP_M, NUM_SMS,
                     GROUPING, G_PAD, PSUM_ALIGN, SPLIT, SFB_SMEM, SCALES_SMEM, SPLIT_K, ws_ptr, counter_ptr,
                     KG_DESC, WALK, UNIFORM)),
    ], [4, PRODUCER_WARPS], [CONSUMER_REGS, PRODUCER_REGS])
