"""Warp-specialised block-scaled FP8 GEMM (Gluon, SM90): DeepGEMM's producer/consumer structure in Triton.

Maths as in gemm/fp8/kernels/gemm.py: every 128-K block is one wgmma chain into a fresh FP32 tile, promoted into the FP32
accumulator with sfa[row] * sfb (per-row products formed once per block), so FP8 products never accumulate across K
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

Groupings mirror gemm/fp8/kernels/gemm.py (DENSE, M_IDS, M_PSUM, MASKED, K_GROUPED); the expert of an M_IDS tile is the id of
its first row (segments start at multiples of the tile height), rows with another id are written as zeros.
M_PSUM and MASKED tiles are enumerated per group on the device (_tile_info: cdiv(rows, BM) row blocks from the
group's first row), so no tile straddles two groups or covers rows of no group, and no host ever reads the layout.
With WALK (Fp8Overrides.tile_walk) each partition finds those tiles as DeepGEMM's scheduler does, carrying the current
group from tile to tile (_walk) instead of scanning every group's rows per tile (_tile_info); the same tiles.
K_GROUPED (weight gradients of grouped experts, 1D1D scales, two-wave tiles only) enumerates every group's output
tiles; a tile's K blocks are its group's columns of the concatenated K (_k_blocks).
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)

from ...._internals.gluon import cp_async_load, smem_reinterpret, thread_barrier, tma_load, tma_store
from ....common.kernels.groupings import DENSE, K_GROUPED, M_IDS, M_PSUM, MASKED  # noqa: F401  (kernel globals)
from ....common.kernels.uniform import warp_uniform
# Rows each consumer warpgroup owns (wgmma's M per warpgroup).
WG_ROWS = gl.constexpr(64)
# Warps of the producer partition (gl.warp_specialize's worker_num_warps) and its threads: with staged scales every
# producer thread arrives on a stage's `ready` barrier once per K block, when its cp.async copies land.
PRODUCER_WARPS = gl.constexpr(1)
PRODUCER_THREADS = gl.constexpr(32 * PRODUCER_WARPS.value)


@gluon.jit
def _add(a, b):
    return a + b


@gluon.jit
def _swizzle(tile, num_m_blocks, num_n_blocks, GROUP_M: gl.constexpr):
    per_group = GROUP_M * num_n_blocks
    first_m = (tile // per_group) * GROUP_M
    rows = gl.minimum(num_m_blocks - first_m, GROUP_M)
    pid_m = first_m + (tile % per_group) % rows
    pid_n = (tile % per_group) // rows
    return pid_m, pid_n


@gluon.jit
def _split_tile_cols(off_n, N, BN: gl.constexpr, NARROW: gl.constexpr):
    """(wide_n, narrow_n): first columns of the BN-wide and the NARROW-wide wave of a BN + NARROW tile. Each wave
    must lie inside one 128-column B scale block (one B scale per wave and K block).
    * NARROW = 64, contiguous 192-wide tiles: a tile that starts mid-block (off_n % 128 == 64) takes its narrow wave
      first, so its wide wave starts on the next block boundary.
    * NARROW < 64, tail tiles: tile j's wide wave is the whole block [128 j, 128 j + 128) and its narrow wave the
      j-th NARROW-wide piece of the columns past the last whole block (N = 576: 4 tiles of 128 + 16 columns,
      instead of 3 of 192 that leave a quarter of the SMs idle at M = 4096). The launcher picks NARROW so that
      cdiv(N, BN + NARROW) == N // 128 (the tile count _tile_info derives) and the pieces cover the tail
      (fp8_launch.tail_narrow)."""
    gl.static_assert(BN == 128 and (NARROW == 64 or NARROW == 32 or NARROW == 16),
                     "split tiles are 128 + 64 columns, or 128 + 16 / 32 (tail tiles)")
    if NARROW == 64:
        narrow_first = (off_n % 128) != 0
        wide_n = gl.where(narrow_first, off_n + NARROW, off_n)
        narrow_n = gl.where(narrow_first, off_n, off_n + BN)
    else:
        j = off_n // (BN + NARROW)
        wide_n = j * BN
        narrow_n = (N // BN) * BN + j * NARROW
    return wide_n, narrow_n


@gluon.constexpr_function
def _ready_arrivals(staged_scales):
    """Arrivals that complete one phase of a stage's `ready` barrier: the producer's arrive.expect_tx (one elected
    thread), plus, when the producer stages scales by cp.async, one `cp.async.mbarrier.arrive.noinc` per producer
    thread (it fires when that thread's copies have landed). `.noinc` does not raise the barrier's pending count, so
    the count set here must include those arrivals: initialised for one arrival, the 32 extra ones overflowed the
    barrier (compute-sanitizer synccheck, "Barrier overflow") and could complete a phase before the scales landed.
    (Without `.noinc` each arrival first raises the pending count of whatever phase is current, which synccheck
    reports as the same overflow.)"""
    return 1 + (PRODUCER_THREADS.value if staged_scales else 0)


@gluon.jit
def _group_rows(layout_ptr, M, NUM_GROUPS, GROUPING: gl.constexpr, G_PAD: gl.constexpr, PSUM_ALIGN: gl.constexpr,
                VEC: gl.constexpr):
    """(rows, starts): every group's row count and first row, as [G_PAD] vectors (zeros past NUM_GROUPS), read on
    the device. MASKED: masked_m rows from row 0 of the group's own [Mmax] block. M_PSUM: group g's rows are
    [align(end[g-1], PSUM_ALIGN), end[g]) of A and D (none when the end lies before the aligned start); ends are
    clamped to [0, M], so a layout that overruns A never sends a row (or a scale load) past it."""
    g_idx = gl.arange(0, G_PAD, layout=VEC)
    g_ok = g_idx < NUM_GROUPS
    if GROUPING == MASKED:
        rows = gl.load(layout_ptr + g_idx, mask=g_ok, other=0)
        starts = rows * 0
    else:
        ends = gl.minimum(gl.maximum(gl.load(layout_ptr + g_idx, mask=g_ok, other=0), 0), M)
        prev = gl.minimum(gl.maximum(gl.load(layout_ptr + g_idx - 1, mask=g_ok & (g_idx > 0), other=0), 0), M)
        starts = (prev + PSUM_ALIGN - 1) // PSUM_ALIGN * PSUM_ALIGN
        rows = gl.where(g_ok, gl.maximum(ends - starts, 0), 0)
    return rows, starts


@gluon.jit
def _num_tiles(layout_ptr, M, N, NUM_GROUPS, BM: gl.constexpr, BN: gl.constexpr, GROUPING: gl.constexpr,
               G_PAD: gl.constexpr, VEC: gl.constexpr, PSUM_ALIGN: gl.constexpr = 128, UNIFORM: gl.constexpr = False):
    num_n_blocks = gl.cdiv(N, BN)
    if GROUPING == MASKED or GROUPING == M_PSUM:
        rows, starts = _group_rows(layout_ptr, M, NUM_GROUPS, GROUPING, G_PAD, PSUM_ALIGN, VEC)
        total = warp_uniform(gl.sum(gl.cdiv(rows, BM) * num_n_blocks, axis=0), UNIFORM)
    elif GROUPING == K_GROUPED:
        total = NUM_GROUPS * gl.cdiv(M, BM) * num_n_blocks
    else:
        total = gl.cdiv(M, BM) * num_n_blocks
    return total


@gluon.jit
def _tile_info(tile, layout_ptr, M, N, NUM_GROUPS, BM: gl.constexpr, BN: gl.constexpr, GROUP_M: gl.constexpr,
               GROUPING: gl.constexpr, G_PAD: gl.constexpr, PSUM_ALIGN: gl.constexpr, VEC: gl.constexpr,
               UNIFORM: gl.constexpr = False):
    """(group, expert, off_m, off_n, m_limit, row_end): expert < 0 means the tile has no valid row; rows
    [off_m, m_limit) of group `group` are the valid ones (hold a product), rows below row_end may be stored (M_PSUM:
    the padding rows of a group's last tile, up to the next group's aligned start; the others: m_limit)."""
    num_n_blocks = gl.cdiv(N, BN)
    group = tile * 0
    m_limit = M
    first_row = tile * 0
    if GROUPING == MASKED or GROUPING == M_PSUM:
        # Tiles walk the groups in order, cdiv(rows, BM) row blocks each from the group's first row: no tile
        # straddles two groups or lies wholly outside every group (M_PSUM: a group's last tile ends at or before
        # the next group's aligned start, since BM divides PSUM_ALIGN).
        g_idx = gl.arange(0, G_PAD, layout=VEC)
        rows, starts = _group_rows(layout_ptr, M, NUM_GROUPS, GROUPING, G_PAD, PSUM_ALIGN, VEC)
        group_tiles = gl.cdiv(rows, BM) * num_n_blocks
        group_end = gl.associative_scan(group_tiles, 0, _add)
        group = warp_uniform(gl.sum((group_end <= tile).to(gl.int32), axis=0), UNIFORM)
        this = g_idx == group
        local = warp_uniform(tile - gl.sum(gl.where(this, group_end - group_tiles, 0), axis=0), UNIFORM)
        group_rows = warp_uniform(gl.sum(gl.where(this, rows, 0), axis=0), UNIFORM)
        first_row = warp_uniform(gl.sum(gl.where(this, starts, 0), axis=0), UNIFORM)
        m_limit = first_row + group_rows
        pid_m, pid_n = _swizzle(local, gl.cdiv(group_rows, BM), num_n_blocks, GROUP_M)
    elif GROUPING == K_GROUPED:  # every group's [M, N] output, one after the other
        per_group = gl.cdiv(M, BM) * num_n_blocks
        group = tile // per_group
        pid_m, pid_n = _swizzle(tile % per_group, gl.cdiv(M, BM), num_n_blocks, GROUP_M)
    else:
        pid_m, pid_n = _swizzle(tile, gl.cdiv(M, BM), num_n_blocks, GROUP_M)
    off_m = first_row + pid_m * BM
    off_n = pid_n * BN
    expert = group
    if GROUPING == K_GROUPED:
        expert = 0  # one B for every group; the group picks the K columns (_k_blocks)
    row_end = m_limit
    if GROUPING == M_IDS:
        expert = gl.load(layout_ptr + off_m)
    if GROUPING == M_PSUM:
        row_end = M  # the tile's rows past the group's end are its padding: stored (as zeros) with ZERO_GAPS
    return group, expert, off_m, off_n, m_limit, row_end


@gluon.jit
def _group_at(layout_ptr, g, M, GROUPING: gl.constexpr, PSUM_ALIGN: gl.constexpr, UNIFORM: gl.constexpr = False):
    """(rows, first row) of group g from scalar loads: _group_rows for one group (0 <= g < NUM_GROUPS)."""
    if GROUPING == MASKED:
        rows = warp_uniform(gl.load(layout_ptr + g), UNIFORM)
        start = rows * 0
    else:
        end = gl.minimum(gl.maximum(warp_uniform(gl.load(layout_ptr + g), UNIFORM), 0), M)
        prev = gl.minimum(gl.maximum(warp_uniform(gl.load(layout_ptr + gl.maximum(g - 1, 0)), UNIFORM), 0), M) * (
            g > 0).to(gl.int32)
        start = (prev + PSUM_ALIGN - 1) // PSUM_ALIGN * PSUM_ALIGN
        rows = gl.maximum(end - start, 0)
    return rows, start


@gluon.jit
def _walk_start(tile):
    """The walk's carried state before group 0 (_walk): (group, the group's first tile)."""
    zero = tile * 0
    return zero - 1, zero


@gluon.jit
def _walk(tile, g, g_first, layout_ptr, M, N, NUM_GROUPS, BM: gl.constexpr, BN: gl.constexpr,
          GROUPING: gl.constexpr, PSUM_ALIGN: gl.constexpr, UNIFORM: gl.constexpr = False):
    """(group, its first tile, its rows, its first row) of `tile` (M_PSUM / MASKED, Fp8Overrides.tile_walk), from the
    carried (group, first tile) of the CTA's previous tile: DeepGEMM's scheduler, which carries the current group
    from tile to tile and reads the layout again only for it (scalar loads, cache hits) and for each group a tile
    passes into, instead of _tile_info's scan over every group's rows on every tile (vector loads, a scan and four
    cross-warp reductions). A CTA's tiles only increase, so the walk only moves forward. Only the group and its
    first tile are carried (two registers: more live state spilled inside the K loops, sm_90a). Stops at the last
    group (a tile past every group's tiles is never computed)."""
    num_n_blocks = gl.cdiv(N, BN)
    g_rows, g_start = _group_at(layout_ptr, gl.maximum(g, 0), M, GROUPING, PSUM_ALIGN, UNIFORM)
    g_tiles = gl.cdiv(g_rows, BM) * num_n_blocks * (g >= 0).to(gl.int32)
    while (tile >= g_first + g_tiles) & (g + 1 < NUM_GROUPS):
        g_first = g_first + g_tiles
        g = g + 1
        g_rows, g_start = _group_at(layout_ptr, g, M, GROUPING, PSUM_ALIGN, UNIFORM)
        g_tiles = gl.cdiv(g_rows, BM) * num_n_blocks
    return g, g_first, g_rows, g_start


@gluon.jit
def _walk_info(tile, g, g_first, g_rows, g_start, M, N, BM: gl.constexpr, BN: gl.constexpr, GROUP_M: gl.constexpr,
               GROUPING: gl.constexpr):
    """_tile_info's (group, expert, off_m, off_n, m_limit, row_end) of `tile` from the walk's state (_walk)."""
    pid_m, pid_n = _swizzle(tile - g_first, gl.cdiv(g_rows, BM), gl.cdiv(N, BN), GROUP_M)
    m_limit = g_start + g_rows
    row_end = m_limit
    if GROUPING == M_PSUM:
        row_end = M + tile * 0
    return g, g, g_start + pid_m * BM, pid_n * BN, m_limit, row_end


@gluon.jit
def _k_blocks(layout_ptr, group, K, NUM_GROUPS, BK: gl.constexpr, GROUPING: gl.constexpr, G_PAD: gl.constexpr,
              VEC: gl.constexpr, split=0, SPLIT_K: gl.constexpr = 1, UNIFORM: gl.constexpr = False):
    """(first K block, number of K blocks) of a work unit: all of K, split `split`'s share of it (SPLIT_K > 1:
    cdiv(#blocks, SPLIT_K) blocks each, the last split the rest; the launcher keeps every split non-empty), or
    (K_GROUPED) its group's K_g columns of the concatenated K (K sizes in layout_ptr, multiples of BK; zero for an
    empty group). K_GROUPED's two reductions bound the K loops: marked warp-uniform with UNIFORM (uniform.warp_uniform;
    unmarked, 412 / 414 instructions per K block and consumer with 32 R2UR and 0 uniform ops against the dense
    build's 373 with 48, two-wave 128 x 256 1D1D, sm_90a)."""
    if GROUPING == K_GROUPED:
        g_idx = gl.arange(0, G_PAD, layout=VEC)
        ks = gl.load(layout_ptr + g_idx, mask=g_idx < NUM_GROUPS, other=0)
        kb0 = warp_uniform(gl.sum(gl.where(g_idx < group, ks, 0), axis=0) // BK, UNIFORM)
        num_kb = warp_uniform(gl.sum(gl.where(g_idx == group, ks, 0), axis=0) // BK, UNIFORM)
    elif SPLIT_K > 1:
        per_split = gl.cdiv(gl.cdiv(K, BK), SPLIT_K)
        kb0 = split * per_split
        num_kb = gl.minimum(gl.cdiv(K, BK) - kb0, per_split)
    else:
        kb0 = 0
        num_kb = gl.cdiv(K, BK)
    return kb0, num_kb


@gluon.jit
def _producer(a_desc, b_desc, b2_desc, a_bufs, b_bufs, b2_bufs, sfb_bufs, sfa_bufs, sb_bufs, ready, empty,
              layout_ptr, sfa_ptr, sfb_ptr, M, N, K, NUM_GROUPS, stride_sfa_g, stride_sfa_m, stride_sfa_k,
              stride_sfb_g, stride_sfb_n, stride_sfb_k,
              BM: gl.constexpr, BN: gl.constexpr, NARROW: gl.constexpr, TILE_N: gl.constexpr, BK: gl.constexpr,
              STAGES: gl.constexpr, GROUP_M: gl.constexpr, NUM_SMS: gl.constexpr, GROUPING: gl.constexpr,
              G_PAD: gl.constexpr, PSUM_ALIGN: gl.constexpr, SPLIT: gl.constexpr, SFB_SMEM: gl.constexpr,
              SCALES_SMEM: gl.constexpr, SPLIT_K: gl.constexpr, a_flat, b_flat, KG_DESC: gl.constexpr,
              WALK: gl.constexpr, UNIFORM: gl.constexpr):
    VEC: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
    SFB_VEC: gl.constexpr = gl.BlockedLayout([TILE_N // 32], [32], [1], [0])
    SFA_VEC: gl.constexpr = gl.BlockedLayout([BM // 32], [32], [1], [0])
    # TMA bytes of one stage: A, B, and the narrow wave's B rows of a split tile.
    STAGE_BYTES: gl.constexpr = (a_desc.block_type.nbytes + b_desc.block_type.nbytes
                                 + (b2_desc.block_type.nbytes if SPLIT else 0))
    # Work units: output tiles, each SPLIT_K times (one unit per tile and K split).
    num_units = _num_tiles(layout_ptr, M, N, NUM_GROUPS, BM, TILE_N, GROUPING, G_PAD, VEC, PSUM_ALIGN,
                           UNIFORM) * SPLIT_K
    it = 0
    if WALK:
        w_g, w_first = _walk_start(gl.program_id(0))
    for unit in range(gl.program_id(0), num_units, NUM_SMS):
        if WALK:
            w_g, w_first, w_rows, w_start = _walk(unit, w_g, w_first, layout_ptr, M, N, NUM_GROUPS, BM, TILE_N,
                                                  GROUPING, PSUM_ALIGN, UNIFORM)
            group, expert, off_m, off_n, m_limit, row_end = _walk_info(unit, w_g, w_first, w_rows, w_start, M, N, BM,
                                                                       TILE_N, GROUP_M, GROUPING)
        else:
            group, expert, off_m, off_n, m_limit, row_end = _tile_info(
                unit // SPLIT_K, layout_ptr, M, N, NUM_GROUPS, BM, TILE_N, GROUP_M, GROUPING, G_PAD, PSUM_ALIGN, VEC,
                UNIFORM)
        kb0, num_kb = _k_blocks(layout_ptr, group, K, NUM_GROUPS, BK, GROUPING, G_PAD, VEC, unit % SPLIT_K, SPLIT_K,
                               UNIFORM)
        if expert >= 0:
            a_row = off_m
            if GROUPING == MASKED:  # A is [G * Mmax, K]
                a_row = group * M + off_m
            b_row = expert * N + off_n
            b2_row = b_row
            if KG_DESC:
                # K-grouped, A and B as each group's own K-major blocks [M, K_g] and [N, K_g] stored one after
                # the other (the nt layout, no concatenating copy): descriptors over this group's blocks, built on
                # the device (an empty group gets a one-block shape it never loads from).
                k_first = kb0.to(gl.int64) * BK
                k_len = gl.maximum(num_kb, 1) * BK
                a_group = tma.make_tensor_descriptor(a_flat + k_first * M, [M, k_len], [k_len, 1], [BM, BK],
                                                     a_desc.layout)
                b_group = tma.make_tensor_descriptor(b_flat + k_first * N, [N, k_len], [k_len, 1], [TILE_N, BK],
                                                     b_desc.layout)
            if SPLIT:  # the wide wave's B rows go to b_bufs, the narrow wave's to b2_bufs
                wide_n, narrow_n = _split_tile_cols(off_n, N, BN, NARROW)
                b_row = expert * N + wide_n
                b2_row = expert * N + narrow_n
            if SFB_SMEM:
                sfb_cols = off_n + gl.arange(0, TILE_N, layout=SFB_VEC)
                sfb_src = sfb_ptr + expert * stride_sfb_g + sfb_cols * stride_sfb_n
                sfb_ok = sfb_cols < N
            if SCALES_SMEM:
                # 1D2D scales of each K block, staged with the operands: the tile's BM A scales (zeros past the
                # valid rows) and its one B scale (lane 0; the other lanes' slots are zero-filled).
                sfa_idx = off_m + gl.arange(0, BM, layout=SFA_VEC)
                sfa_src = sfa_ptr + group * stride_sfa_g + sfa_idx * stride_sfa_m
                sfa_ok = sfa_idx < m_limit
                lane = gl.arange(0, 32, layout=VEC)
                sb_src = sfb_ptr + expert * stride_sfb_g + (off_n // 128) * stride_sfb_n + lane * 0
            for kb in range(kb0, kb0 + num_kb):
                stage = it % STAGES
                # A fresh barrier counts as having completed the phase before phase 0: the first pass is free.
                mbarrier.wait(empty.index(stage), ((it // STAGES) & 1) ^ 1)
                bar = ready.index(stage)
                if SFB_SMEM:
                    # Per-column B scales of the block (zeros past N) by cp.async; each thread's arrival comes when
                    # its copies land, and `ready` counts it (_ready_arrivals), so it covers them too.
                    cp_async_load(sfb_bufs.index(stage), sfb_src + kb * stride_sfb_k, mask=sfb_ok)
                    async_copy.mbarrier_arrive(bar, increment_count=False)
                if SCALES_SMEM:
                    cp_async_load(sfa_bufs.index(stage), sfa_src + kb * stride_sfa_k, mask=sfa_ok)
                    cp_async_load(sb_bufs.index(stage), sb_src + kb * stride_sfb_k, mask=lane == 0)
                    async_copy.mbarrier_arrive(bar, increment_count=False)
                mbarrier.expect(bar, STAGE_BYTES)
                if KG_DESC:
                    tma_load(a_group, [a_row, (kb - kb0) * BK], bar, a_bufs.index(stage))
                    tma_load(b_group, [off_n, (kb - kb0) * BK], bar, b_bufs.index(stage))
                else:
                    tma_load(a_desc, [a_row, kb * BK], bar, a_bufs.index(stage))
                    tma_load(b_desc, [b_row, kb * BK], bar, b_bufs.index(stage))
                if SPLIT:
                    tma_load(b2_desc, [b2_row, kb * BK], bar, b2_bufs.index(stage))
                it += 1


@gluon.jit
def _promote(acc, part, sa, sb):
    """acc += part * sa[row] * sb (1D2D: one B scale per block)."""
    return acc + part * gl.expand_dims(sa * sb, 1)


@gluon.jit
def _load_scales(sfa_rows, sfb_block, kb, num_kb, row_ok, stride_sfa_k, stride_sfb_k):
    """1D2D scales of K block kb (zeros past the last block, so prefetching beyond the end is harmless)."""
    live = kb < num_kb
    sa = gl.load(sfa_rows + kb * stride_sfa_k, mask=row_ok & live, other=0.0)
    sb = gl.load(sfb_block + kb * stride_sfb_k, mask=live, other=0.0)
    return sa, sb


@gluon.jit
def _staged_scales(sfa_bufs, sb_bufs, stage, A_ROW0: gl.constexpr, MMA: gl.constexpr):
    """(A scales of this warpgroup's rows, the B scale) of the block in `stage` (SCALES_SMEM)."""
    sa = sfa_bufs.index(stage).slice(A_ROW0, WG_ROWS).load(gl.SliceLayout(1, MMA))
    # Lane 0 holds the B scale, the other slots zeros: the sum is the scale, exactly.
    sb = gl.sum(sb_bufs.index(stage).load(gl.BlockedLayout([1], [32], [4], [0])), axis=0)
    return sa, sb


@gluon.jit
def _mainloop_one_wave(a_bufs, b_bufs, sfa_bufs, sb_bufs, ready, empty, sfa_rows, sfb_cols, row_ok, num_kb, it,
                       stride_sfa_k, stride_sfb_k, A_ROW0: gl.constexpr, BN: gl.constexpr, STAGES: gl.constexpr,
                       MMA: gl.constexpr, SCALES_SMEM: gl.constexpr):
    """One 64 x BN wave per K block, each block promoted while the next block's wgmma runs. Two partials take turns
    (p for even steps, q for odd: the loop is unrolled by two), and each is read only after a wait_group(0) retired
    it: ptxas serialises every wgmma of a kernel that reads a partial retired by wait_group(1) while another group is
    in flight (C7514), which the textbook deferred form (issue kb, wait(1), promote kb-1) compiles to. An odd block
    count ends with p as the last partial. (Peeling block 0 off instead made ptxas spill the dense variant: 240 B.)
    SCALES_SMEM: the block's scales come from its stage (staged by the producer), read before the stage is released,
    instead of global loads issued next to the wgmma (whose latency the short wgmma of a 64 x BN wave does not
    cover)."""
    acc = gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA)
    # q: the previous block's partial and scales, zero before the first (its promotion then adds nothing).
    q = gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA)
    q_sa, q_sb = _load_scales(sfa_rows, sfb_cols, 0, 0, row_ok, stride_sfa_k, stride_sfb_k)
    for kb in range(0, num_kb, 2):
        stage = it % STAGES
        mbarrier.wait(ready.index(stage), (it // STAGES) & 1)
        p = warpgroup_mma(a_bufs.index(stage).slice(A_ROW0, WG_ROWS, dim=0), b_bufs.index(stage).permute((1, 0)),
                          gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA), use_acc=False, is_async=True)
        acc = _promote(acc, q, q_sa, q_sb)
        if SCALES_SMEM:
            p_sa, p_sb = _staged_scales(sfa_bufs, sb_bufs, stage, A_ROW0, MMA)
        else:
            p_sa, p_sb = _load_scales(sfa_rows, sfb_cols, kb, num_kb, row_ok, stride_sfa_k, stride_sfb_k)
        p = warpgroup_mma_wait(num_outstanding=0, deps=(p,))
        mbarrier.arrive(empty.index(stage), count=1)
        it += 1
        if kb + 1 < num_kb:
            stage = it % STAGES
            mbarrier.wait(ready.index(stage), (it // STAGES) & 1)
            q = warpgroup_mma(a_bufs.index(stage).slice(A_ROW0, WG_ROWS, dim=0),
                              b_bufs.index(stage).permute((1, 0)), gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA),
                              use_acc=False, is_async=True)
            acc = _promote(acc, p, p_sa, p_sb)
            if SCALES_SMEM:
                q_sa, q_sb = _staged_scales(sfa_bufs, sb_bufs, stage, A_ROW0, MMA)
            else:
                q_sa, q_sb = _load_scales(sfa_rows, sfb_cols, kb + 1, num_kb, row_ok, stride_sfa_k, stride_sfb_k)
            q = warpgroup_mma_wait(num_outstanding=0, deps=(q,))
            mbarrier.arrive(empty.index(stage), count=1)
            it += 1
        else:  # odd count: the last block is p; promote it after the loop in q's place
            q = p
            q_sa = p_sa
            q_sb = p_sb
    acc = _promote(acc, q, q_sa, q_sb)
    return acc, it


@gluon.jit
def _stagger_wait(stagger, stage, phase, kb, WG: gl.constexpr, STAGGER: gl.constexpr):
    """Two-wave tiles, before a K block's first wgmma (Fp8Overrides.stagger; 0 = off). Staggered, warpgroup 1
    issues wave 0 of a block only after warpgroup 0's wave 0 of that block has completed (1: the tile's first block
    only, 2: every block). Built to keep the two warpgroups from promoting at the same moment while the tensor core
    idles; a clock probe later showed they do not (warpgroup 1 trails by one to two K blocks), but level 1 narrows
    how much that lag varies across CTAs and is faster on psum layouts (fp8_plan.STAGGER).

    Warpgroup 0 arrives on the stage's `stagger` barrier (count 1) after every wave 0 (_stagger_arrive), so that
    barrier's phases follow the stage ring's: warpgroup 0 cannot complete a stage's next phase before warpgroup 1
    has released the stage, so warpgroup 1's parity wait never sees a phase too far. (Level 3 is the opposite
    probe: the two warpgroups meet before each tile's K loop, in _consumer, and then issue together.) A level that
    also kept warpgroup 0 at most one block ahead of warpgroup 1 was slower on every row family and was removed."""
    if (STAGGER == 1 or STAGGER == 2) and WG == 1:
        if STAGGER == 2:
            mbarrier.wait(stagger.index(stage), phase)
        elif kb == 0:
            mbarrier.wait(stagger.index(stage), phase)


@gluon.jit
def _stagger_arrive(stagger, stage, WG: gl.constexpr, STAGGER: gl.constexpr):
    """Warpgroup 0, after a K block's first wave completed: what _stagger_wait waits for."""
    if (STAGGER == 1 or STAGGER == 2) and WG == 0:
        mbarrier.arrive(stagger.index(stage), count=1)


@gluon.jit
def _mainloop_two_waves(a_bufs, b_bufs, ready, empty, sfa_rows0, sfa_rows1, sfb_cols0, sfb_cols1, row_ok0, row_ok1,
                        wave1_ok, num_kb, it, stride_sfa_k, stride_sfb_k, sa0, sb0, x1, A_ROW0: gl.constexpr,
                        BN: gl.constexpr, STAGES: gl.constexpr, WAVE_N: gl.constexpr, MMA: gl.constexpr,
                        stagger=None, WG: gl.constexpr = 0, STAGGER: gl.constexpr = 0):
    """Two 64 x BN waves per warpgroup and K block (DeepGEMM's structure): wave 0's wgmma, wait, promote, then
    wave 1's. Waves split the warpgroup's rows (WAVE_N false: a 256-row tile) or the tile's columns (WAVE_N true:
    a 128 x 2BN tile: measured faster on dense shapes, and the only choice for grouped layouts, whose segments are
    128-row aligned). Either way one stage feeds twice the
    MMA work of a 128 x BN tile per byte loaded. One partial is live (2 x 64 accumulator + 64 partial registers at
    BN = 128), so the waves do not overlap within a warpgroup; the other warpgroup's wgmmas fill the tensor core
    meanwhile. 1D2D scales only (one B scale per 128-column wave).

    (sa0, sb0, x1): the first block's scales (x1: the second wave's sb1, or sa1 for waves along M), loaded by the
    caller (_first_block_scales, before the previous tile's epilogue where it pays: _next_first_scales); each block
    prefetches the next block's while its wgmma runs. STAGGER: _stagger_wait."""
    acc0 = gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA)
    acc1 = gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA)
    if WAVE_N:
        sb1 = x1
    else:
        sa1 = x1
    for kb in range(num_kb):
        stage = it % STAGES
        a_tile = a_bufs.index(stage)
        b_tile = b_bufs.index(stage)
        mbarrier.wait(ready.index(stage), (it // STAGES) & 1)
        _stagger_wait(stagger, stage, (it // STAGES) & 1, kb, WG, STAGGER)
        part = warpgroup_mma(a_tile.slice(A_ROW0, WG_ROWS, dim=0), b_tile.slice(0, BN, dim=0).permute((1, 0)),
                             gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA), use_acc=False, is_async=True)
        # Next block's scales while the wgmma runs (zeros past the last block).
        nxt = kb + 1 < num_kb
        na0 = gl.load(sfa_rows0 + (kb + 1) * stride_sfa_k, mask=row_ok0 & nxt, other=0.0)
        nb0 = gl.load(sfb_cols0 + (kb + 1) * stride_sfb_k, mask=nxt, other=0.0)
        if WAVE_N:
            nb1 = gl.load(sfb_cols1 + (kb + 1) * stride_sfb_k, mask=wave1_ok & nxt, other=0.0)
        else:
            na1 = gl.load(sfa_rows1 + (kb + 1) * stride_sfa_k, mask=row_ok1 & nxt, other=0.0)
        part = warpgroup_mma_wait(num_outstanding=0, deps=(part,))
        _stagger_arrive(stagger, stage, WG, STAGGER)
        acc0 = acc0 + part * gl.expand_dims(sa0 * sb0, 1)
        if WAVE_N:
            part = warpgroup_mma(a_tile.slice(A_ROW0, WG_ROWS, dim=0), b_tile.slice(BN, BN, dim=0).permute((1, 0)),
                                 gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA), use_acc=False, is_async=True)
        else:
            part = warpgroup_mma(a_tile.slice(A_ROW0 + WG_ROWS, WG_ROWS, dim=0), b_tile.permute((1, 0)),
                                 gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA), use_acc=False, is_async=True)
        part = warpgroup_mma_wait(num_outstanding=0, deps=(part,))
        mbarrier.arrive(empty.index(stage), count=1)
        if WAVE_N:
            acc1 = acc1 + part * gl.expand_dims(sa0 * sb1, 1)
            sb1 = nb1
        else:
            acc1 = acc1 + part * gl.expand_dims(sa1 * sb0, 1)
            sa1 = na1
        sa0 = na0
        sb0 = nb0
        it += 1
    return acc0, acc1, it


@gluon.jit
def _first_block_scales(sfa_rows0, sfa_rows1, sfb_cols0, sfb_cols1, row_ok0, row_ok1, ok, wave1_ok,
                        WAVE_N: gl.constexpr):
    """(sa0, sb0, x1): the first K block's 1D2D scales of a two-wave warpgroup's tile (_mainloop_two_waves), zeros
    where masked (`ok`: the tile has rows to compute)."""
    sa0 = gl.load(sfa_rows0, mask=ok & row_ok0, other=0.0)
    sb0 = gl.load(sfb_cols0, mask=ok, other=0.0)
    if WAVE_N:
        x1 = gl.load(sfb_cols1, mask=ok & wave1_ok, other=0.0)
    else:
        x1 = gl.load(sfa_rows1, mask=ok & row_ok1, other=0.0)
    return sa0, sb0, x1


@gluon.jit
def _next_first_scales(sfa_ptr, sfb_ptr, unit, num_units, layout_ptr, M, N, NUM_GROUPS, stride_sfa_g, stride_sfa_m,
                       stride_sfb_g, stride_sfb_n, BM: gl.constexpr, BN: gl.constexpr, TILE_N: gl.constexpr,
                       GROUP_M: gl.constexpr, GROUPING: gl.constexpr, G_PAD: gl.constexpr, PSUM_ALIGN: gl.constexpr,
                       A_ROW0: gl.constexpr, WAVE_N: gl.constexpr, VEC: gl.constexpr, ROWS: gl.constexpr,
                       UNIFORM: gl.constexpr = False):
    """_first_block_scales of the warpgroup's work unit `unit` (zeros when there is none or it has no rows; the
    layout is read at a valid unit either way), loaded before the previous tile's epilogue, which hides their
    latency. Loaded at the tile's start instead, the first promotion waits for them. Not for masked layouts, whose
    tile lookup (a scan over the groups) costs more than the latency hides."""
    group, expert, off_m, off_n, m_limit, row_end = _tile_info(
        gl.maximum(gl.minimum(unit, num_units - 1), 0), layout_ptr, M, N, NUM_GROUPS, BM, TILE_N, GROUP_M,
        GROUPING, G_PAD, PSUM_ALIGN, VEC, UNIFORM)
    return _tile_first_scales(sfa_ptr, sfb_ptr, group, expert, off_m, off_n, m_limit, unit < num_units, N,
                              stride_sfa_g, stride_sfa_m, stride_sfb_g, stride_sfb_n, BN, A_ROW0, WAVE_N, ROWS)


@gluon.jit
def _tile_first_scales(sfa_ptr, sfb_ptr, group, expert, off_m, off_n, m_limit, valid, N, stride_sfa_g, stride_sfa_m,
                       stride_sfb_g, stride_sfb_n, BN: gl.constexpr, A_ROW0: gl.constexpr, WAVE_N: gl.constexpr,
                       ROWS: gl.constexpr):
    """_first_block_scales of the tile at (group, expert, off_m, off_n) (zeros unless `valid` and it has rows)."""
    rows = off_m + A_ROW0 + gl.arange(0, WG_ROWS, layout=ROWS)
    sfa_rows = sfa_ptr + group * stride_sfa_g + rows * stride_sfa_m
    sfb_col = sfb_ptr + expert * stride_sfb_g + (off_n // 128) * stride_sfb_n
    return _first_block_scales(sfa_rows, sfa_rows + WG_ROWS * stride_sfa_m, sfb_col, sfb_col + stride_sfb_n,
                               rows < m_limit, rows + WG_ROWS < m_limit, valid & (expert >= 0), off_n + BN < N,
                               WAVE_N)


@gluon.jit
def _walk_first_scales(sfa_ptr, sfb_ptr, unit, num_units, g, g_first, layout_ptr, M, N, NUM_GROUPS, stride_sfa_g,
                       stride_sfa_m, stride_sfb_g, stride_sfb_n, BM: gl.constexpr, BN: gl.constexpr,
                       TILE_N: gl.constexpr, GROUP_M: gl.constexpr, GROUPING: gl.constexpr,
                       PSUM_ALIGN: gl.constexpr, A_ROW0: gl.constexpr, WAVE_N: gl.constexpr, ROWS: gl.constexpr,
                       UNIFORM: gl.constexpr = False):
    """_next_first_scales by the walk: (the walk's state moved on to `unit`, the unit's first-block scales). The
    loop's top then finds that tile's group where the walk stopped."""
    u = gl.maximum(gl.minimum(unit, num_units - 1), 0)
    g, g_first, g_rows, g_start = _walk(u, g, g_first, layout_ptr, M, N, NUM_GROUPS, BM, TILE_N, GROUPING,
                                        PSUM_ALIGN, UNIFORM)
    group, expert, off_m, off_n, m_limit, row_end = _walk_info(u, g, g_first, g_rows, g_start, M, N, BM, TILE_N,
                                                               GROUP_M, GROUPING)
    sa0, sb0, x1 = _tile_first_scales(sfa_ptr, sfb_ptr, group, expert, off_m, off_n, m_limit, unit < num_units, N,
                                      stride_sfa_g, stride_sfa_m, stride_sfb_g, stride_sfb_n, BN, A_ROW0, WAVE_N,
                                      ROWS)
    return g, g_first, sa0, sb0, x1


@gluon.jit
def _mainloop_two_waves_1d1d(a_bufs, b_bufs, sfb_bufs, ready, empty, sfa_rows, row_ok, num_kb, it, stride_sfa_k,
                             A_ROW0: gl.constexpr, BN: gl.constexpr, STAGES: gl.constexpr, MMA: gl.constexpr,
                             stagger=None, WG: gl.constexpr = 0, STAGGER: gl.constexpr = 0):
    """The two-wave (128 x 2BN, waves along N) mainloop for 1D1D scales: B is scaled per column, so each
    promotion needs BN / 4 = 32 column scales per thread. Prefetching them into registers as the 1D2D loop does
    with its one scalar would not fit next to two accumulators and a partial; the producer stages them in shared
    memory with the operands instead (`sfb_bufs`, one TILE_N vector per stage), and each wave reads its slice right
    before its promotion. The stage is released after the second wave's read. STAGGER: _stagger_wait."""
    COLS: gl.constexpr = gl.SliceLayout(0, MMA)
    acc0 = gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA)
    acc1 = gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA)
    sa = gl.load(sfa_rows, mask=row_ok & (num_kb > 0), other=0.0)  # (an empty K-group reads no scale)
    for kb in range(num_kb):
        stage = it % STAGES
        a_tile = a_bufs.index(stage).slice(A_ROW0, WG_ROWS, dim=0)
        b_tile = b_bufs.index(stage)
        sb_tile = sfb_bufs.index(stage)
        mbarrier.wait(ready.index(stage), (it // STAGES) & 1)
        _stagger_wait(stagger, stage, (it // STAGES) & 1, kb, WG, STAGGER)
        part = warpgroup_mma(a_tile, b_tile.slice(0, BN, dim=0).permute((1, 0)),
                             gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA), use_acc=False, is_async=True)
        # Next block's A scales while the wgmma runs (zeros past the last block).
        na = gl.load(sfa_rows + (kb + 1) * stride_sfa_k, mask=row_ok & (kb + 1 < num_kb), other=0.0)
        part = warpgroup_mma_wait(num_outstanding=0, deps=(part,))
        _stagger_arrive(stagger, stage, WG, STAGGER)
        sb = sb_tile.slice(0, BN).load(COLS)
        acc0 = acc0 + part * gl.expand_dims(sa, 1) * gl.expand_dims(sb, 0)
        part = warpgroup_mma(a_tile, b_tile.slice(BN, BN, dim=0).permute((1, 0)),
                             gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA), use_acc=False, is_async=True)
        part = warpgroup_mma_wait(num_outstanding=0, deps=(part,))
        sb = sb_tile.slice(BN, BN).load(COLS)
        mbarrier.arrive(empty.index(stage), count=1)
        acc1 = acc1 + part * gl.expand_dims(sa, 1) * gl.expand_dims(sb, 0)
        sa = na
        it += 1
    return acc0, acc1, it


@gluon.jit
def _mainloop_split(a_bufs, b_bufs, b2_bufs, ready, empty, sfa_rows, sfb_wide, sfb_narrow, row_ok, wide_ok,
                    narrow_ok, num_kb, it, stride_sfa_k, stride_sfb_k, A_ROW0: gl.constexpr, BN: gl.constexpr,
                    NARROW: gl.constexpr, STAGES: gl.constexpr, MMA: gl.constexpr, MMA2: gl.constexpr):
    """A BN-wide and a NARROW-wide wave per K block, each wave promoted while the other wave's wgmma runs:
        issue wide kb, promote narrow kb-1, wait(0), issue narrow kb, promote wide kb, wait(0), release stage kb.
    Both partials stay live (64 + 32 registers at 128 + 64 columns), so the warpgroup keeps the tensor core busy
    during its own promotions. Every promotion reads a partial that a wait_group(0) retired: ptxas (CUDA 12.8/13)
    serialises *all* wgmmas of a kernel that reads a partial retired by wait_group(1) while another group is in
    flight (C7514), which is what the textbook deferred form (issue kb, wait(1), promote kb-1) compiles to.
    Scales are loaded one block ahead (zeros past the last block)."""
    ROWS2: gl.constexpr = gl.SliceLayout(1, MMA2)
    acc0 = gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA)
    acc1 = gl.zeros([WG_ROWS, NARROW], gl.float32, layout=MMA2)
    y = gl.zeros([WG_ROWS, NARROW], gl.float32, layout=MMA2)  # the narrow partial of the previous block
    y_scale = gl.zeros([WG_ROWS], gl.float32, layout=ROWS2)  # ... and its scale (0 before block 0)
    sa = gl.load(sfa_rows, mask=row_ok, other=0.0)
    sb0 = gl.load(sfb_wide, mask=wide_ok, other=0.0)
    sb1 = gl.load(sfb_narrow, mask=narrow_ok, other=0.0)
    for kb in range(num_kb):
        stage = it % STAGES
        a_tile = a_bufs.index(stage).slice(A_ROW0, WG_ROWS, dim=0)
        mbarrier.wait(ready.index(stage), (it // STAGES) & 1)
        x = warpgroup_mma(a_tile, b_bufs.index(stage).permute((1, 0)),
                          gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA), use_acc=False, is_async=True)
        acc1 = acc1 + y * gl.expand_dims(y_scale, 1)
        nxt = kb + 1 < num_kb
        na = gl.load(sfa_rows + (kb + 1) * stride_sfa_k, mask=row_ok & nxt, other=0.0)
        nb0 = gl.load(sfb_wide + (kb + 1) * stride_sfb_k, mask=wide_ok & nxt, other=0.0)
        nb1 = gl.load(sfb_narrow + (kb + 1) * stride_sfb_k, mask=narrow_ok & nxt, other=0.0)
        x = warpgroup_mma_wait(num_outstanding=0, deps=(x,))
        y = warpgroup_mma(a_tile, b2_bufs.index(stage).permute((1, 0)),
                          gl.zeros([WG_ROWS, NARROW], gl.float32, layout=MMA2), use_acc=False, is_async=True)
        acc0 = acc0 + x * gl.expand_dims(sa * sb0, 1)
        y_scale = gl.convert_layout(sa * sb1, ROWS2)
        y = warpgroup_mma_wait(num_outstanding=0, deps=(y,))
        mbarrier.arrive(empty.index(stage), count=1)
        sa = na
        sb0 = nb0
        sb1 = nb1
        it += 1
    acc1 = acc1 + y * gl.expand_dims(y_scale, 1)
    return acc0, acc1, it


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
        out_ptrs = d_ptr + group * stride_dg + gl.expand_dims(rows, 1) * stride_dm + gl.expand_dims(cols, 0)
        gl.store(out_ptrs, acc.to(d_ptr.dtype.element_ty), mask=mask)


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
