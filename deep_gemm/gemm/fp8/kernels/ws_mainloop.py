"""The warp-specialised FP8 kernel's mainloops (Gluon): the TMA producer partition (_producer) and the consumers'
K loops, one wave, two waves (along N or M; 1D2D or 1D1D scales) and the split BN + NARROW tile, each 128-K block a
wgmma chain promoted into the FP32 accumulator with its scales; the first K block's scales of the next tile loaded
ahead (the *_first_scales helpers), and the warpgroup stagger.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait

from ...._internals.gluon import cp_async_load, tma_load
from ....common.kernels.groupings import DENSE, K_GROUPED, M_IDS, M_PSUM, MASKED  # noqa: F401  (kernel globals)
from .ws_scheduler import WG_ROWS, _k_blocks, _num_tiles, _split_tile_cols, _tile_info, _walk, _walk_info, _walk_start


# Warps of the producer partition (gl.warp_specialize's worker_num_warps) and its threads: with staged scales every
# producer thread arrives on a stage's `ready` barrier once per K block, when its cp.async copies land.
PRODUCER_WARPS = gl.constexpr(1)
PRODUCER_THREADS = gl.constexpr(32 * PRODUCER_WARPS.value)


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
