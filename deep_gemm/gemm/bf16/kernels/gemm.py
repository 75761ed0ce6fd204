"""BF16 GEMM kernel (tl.*), persistent, for the dense, M-grouped contiguous, masked and K-grouped ops.

Maths: D[m, n] = C[m, n] + sum_k A[m, k] * B[n, k], one ``tl.dot`` per BK block accumulating in FP32 registers
(BF16 wgmma accumulates in FP32 exactly; unlike FP8 there is no per-block promotion).

Operands are read through TMA descriptors built on the tensors as the caller holds them. BF16 wgmma reads either
majorness from shared memory, so an MN-major operand needs no copy: its descriptor covers the [K, M] (or [K, N])
matrix it is in memory and the kernel transposes the loaded tile's view (``A_K_MAJOR`` / ``B_K_MAJOR``). Every
operand is addressed as (row, k) of a stacked 2-D matrix:

  A K-major  [rows, K]:    tile at (a_row, a_k + k)          A MN-major [K rows, M]: tile at (a_k + k, a_row)
  B K-major  [rows, K]:    tile at (b_row, b_k + k), then .T B MN-major [K rows, N]: tile at (b_k + k, b_row)

with a_row = group * A_GROUP_M + off_m and b_row = expert * B_GROUP_N + off_n, b_k = expert * B_GROUP_K + k_start
(the launcher passes the strides of the stacking: e.g. a [G, N, K] B is [G*N, K] rows with B_GROUP_N = N, a
[G, K, N] B is [G*K, N] with B_GROUP_K = K). TMA zero-fills reads past the matrix, so M/N/K tails need no masks;
a K block that crosses into the next group's rows is avoided by the plan (BK divides such a K).

A tile may be BN + BN_TAIL columns wide (dense, unsplit, no C; forced configs only, bf16_plan.Bf16Config): register
tensors must have power-of-two shapes, so the tail columns get their own B tiles (b2_desc), accumulator (a second
MMA on the same A tile) and store (d2_desc). 128 + 16 = 144 columns tile N = 576 exactly (DeepGEMM's 128 x 144).

Groupings (constexpr GROUPING, shared with the FP8 kernel: kernels/groupings.py):
  DENSE      one problem; optionally split along K (SPLIT_K > 1) from tile SPLIT_FROM on: tiles before it run
             whole, each later tile is SPLIT_K work items (one K range each). SPLIT_FROM = 0 splits every tile; a
             SPLIT_FROM that is a multiple of the grid splits only the last, partial wave of tiles, so its pieces
             fill the SMs the whole tiles would leave idle (wave quantisation). Every piece writes an FP32 partial
             to its slot of a tile-major workspace [(tile - SPLIT_FROM) * SPLIT_K + split, BM, BN] and the last
             piece to arrive at the tile's counter sums them in split order (deterministic), runs the epilogue and
             resets the counter (``core/scratch.py``). FIRST_ITEM = SPLIT_FROM runs only the split pieces: the
             whole tiles before them ran in the warp-specialised kernel (gemm/bf16/kernels/gemm_ws.py, NUM_TILES =
             SPLIT_FROM).
  M_IDS      M-grouped contiguous, expert id per row (-1 = padding: the tile is skipped and its rows written as 0).
  M_PSUM     M-grouped contiguous, cumulative group ends; group g's rows start at align(end[g-1], PSUM_ALIGN).
             Gap rows are zeroed (ZERO_GAPS) or left untouched.
  MASKED     A [G*Mmax, K]; group g has masked_m[g] valid rows, read on the device only: tiles are enumerated over
             groups through a prefix sum of per-group tile counts. Rows >= masked_m[g] are untouched. SPLIT_K > 1:
             the tiles of the last, partial wave (from split_from = the whole waves' tiles, counted on the device)
             run as `splits` = min(SPLIT_K, NUM_PROGRAMS // those tiles) K ranges each, so their pieces fill the SMs
             the whole tiles would leave idle (few tiles of a B-streaming decode call: the last wave streams with a
             fraction of the SMs); each piece gets its balanced share of the K blocks. At most NUM_PROGRAMS pieces
             (splits * last-wave tiles), so the workspace holds NUM_PROGRAMS tile slots whatever masked_m is, and
             the partials are reduced as in DENSE. `splits` == 1 (a last wave of more than half the grid, or none):
             every tile whole, no counter touched. A group's tiles past masked_m do not exist (the tile count is
             cdiv(masked_m[g], BM) blocks), so no split of them runs.
             PSUM_WALK: an M_PSUM call (gaps left untouched) enumerated as a MASKED one from its group ends: group g
             has end[g] - align(end[g-1]) rows from align(end[g-1]) of the [M, *] A and D (A_GROUP_M and stride_dg
             0), so a call whose A holds far more rows than its groups use (the decode form, G x Mmax rows) runs
             only its groups' tiles.
  K_GROUPED  A [sum K, M], B [sum K, N]; group g owns K rows [k_start_g, k_start_g + K_g) (device prefix sum of the
             K sizes in layout_ptr); D[g] = C[g] + A_g.T @ B_g. Empty groups still write C[g] (or zeros). UNIFORM:
             the tile's k_start and K block count (reductions over the loaded K sizes) marked warp-uniform
             (uniform.tl_warp_uniform): unmarked, the K loop they bound loses ptxas's uniform datapath (119 SASS
             instructions per K block against the dense build's 87).
"""

import triton
import triton.language as tl

from ....common.kernels.groupings import DENSE, K_GROUPED, M_IDS, M_PSUM, MASKED  # noqa: F401  (kernel globals)
from ....common.kernels.epilogue import store_tile
from ....common.kernels.groupings import grouped_rows, k_grouped_starts, masked_tile, masked_tiles, psum_walk_tiles
from ....common.kernels.tiles import tile_coords
from ....common.kernels.uniform import tl_warp_uniform


@triton.jit
def _load_a(a_desc, a_row, k, A_K_MAJOR: tl.constexpr):
    """A's [BM, BK] tile at K offset k (row a_row)."""
    if A_K_MAJOR:
        return a_desc.load([a_row, k])
    else:
        return a_desc.load([k, a_row]).T


@triton.jit
def _load_b(b_desc, b_row, k, B_K_MAJOR: tl.constexpr):
    """B's [BK, BN] tile (the block shape of b_desc) at K offset k (row b_row)."""
    if B_K_MAJOR:
        return b_desc.load([b_row, k]).T
    else:
        return b_desc.load([k, b_row])


@triton.jit
def _mainloop(a_desc, b_desc, a_row, a_k, b_row, b_k, kb_begin, kb_end, BM: tl.constexpr, BN: tl.constexpr,
              BK: tl.constexpr, NUM_STAGES: tl.constexpr, A_K_MAJOR: tl.constexpr, B_K_MAJOR: tl.constexpr):
    """FP32 accumulator of one tile over K blocks [kb_begin, kb_end)."""
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kb in tl.range(kb_begin, kb_end, num_stages=NUM_STAGES):
        k = kb * BK
        acc = tl.dot(_load_a(a_desc, a_row, a_k + k, A_K_MAJOR), _load_b(b_desc, b_row, b_k + k, B_K_MAJOR), acc)
    return acc


@triton.jit
def _mainloop_tail(a_desc, b_desc, b2_desc, a_row, b_row, kb_end, BM: tl.constexpr, BN: tl.constexpr,
                   BN_TAIL: tl.constexpr, BK: tl.constexpr, NUM_STAGES: tl.constexpr, A_K_MAJOR: tl.constexpr,
                   B_K_MAJOR: tl.constexpr):
    """The two FP32 accumulators of a BN + BN_TAIL wide dense tile: columns [0, BN) from b_desc's tile at b_row,
    [BN, BN + BN_TAIL) from b2_desc's at b_row + BN, both MMAs on the same A tile."""
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    acc_tail = tl.zeros((BM, BN_TAIL), dtype=tl.float32)
    for kb in tl.range(0, kb_end, num_stages=NUM_STAGES):
        k = kb * BK
        a = _load_a(a_desc, a_row, k, A_K_MAJOR)
        acc = tl.dot(a, _load_b(b_desc, b_row, k, B_K_MAJOR), acc)
        acc_tail = tl.dot(a, _load_b(b2_desc, b_row + BN, k, B_K_MAJOR), acc_tail)
    return acc, acc_tail


# Runtime ints and pointers are not specialised on (value 1, divisibility, alignment), so one compiled binary per
# config serves every call (host time, see core/launch.py).
@triton.jit(do_not_specialize=["M", "N", "K", "NUM_GROUPS", "A_GROUP_M", "B_GROUP_N", "B_GROUP_K", "stride_dg",
                               "stride_dm", "stride_cg", "stride_cm", "SPLIT_FROM", "FIRST_ITEM"],
            do_not_specialize_on_alignment=["d_ptr", "c_ptr", "layout_ptr", "ws_ptr", "counter_ptr"])
def _bf16_gemm_kernel(
        a_desc, b_desc,  # BF16, as in memory (see the module docstring)
        b2_desc,  # BN_TAIL > 0: B's [BN_TAIL, BK] (or [BK, BN_TAIL]) tail tiles (else unused)
        d_ptr, c_ptr,  # output [G?, M, N] (BF16/FP32), optional accumulator of the same shape
        d_desc,  # TMA descriptor over D [M, N] when D_TMA (else unused)
        d2_desc,  # BN_TAIL > 0 and D_TMA: D's [BM, BN_TAIL] tail tiles (else unused)
        layout_ptr,  # int32: expert id per row (M_IDS), group ends (M_PSUM), masked_m (MASKED), K sizes (K_GROUPED)
        ws_ptr, counter_ptr,  # split-K FP32 workspace [split tiles * SPLIT_K, BM, BN] (MASKED: [NUM_PROGRAMS, BM, BN]),
        # int32 counter per split tile (MASKED: NUM_PROGRAMS)
        M, N, K, NUM_GROUPS, A_GROUP_M, B_GROUP_N, B_GROUP_K,
        stride_dg, stride_dm, stride_cg, stride_cm,
        SPLIT_FROM,  # DENSE with SPLIT_K > 1: the first tile that is split (0: every tile); MASKED: unused (device)
        FIRST_ITEM,  # DENSE: the first work item to run (SPLIT_FROM: the whole tiles ran in another launch)
        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr,
        NUM_STAGES: tl.constexpr, SPLIT_K: tl.constexpr, GROUPING: tl.constexpr, G_PAD: tl.constexpr,
        PSUM_ALIGN: tl.constexpr, ZERO_GAPS: tl.constexpr, HAS_C: tl.constexpr, D_TMA: tl.constexpr,
        A_K_MAJOR: tl.constexpr, B_K_MAJOR: tl.constexpr, BN_TAIL: tl.constexpr,
        UNIFORM: tl.constexpr = False,  # K_GROUPED: the tile's K range marked warp-uniform
        PSUM_WALK: tl.constexpr = False):  # MASKED: the tiles of M_PSUM group ends (see the module docstring)
    tl.static_assert(BN_TAIL == 0 or (GROUPING == DENSE and SPLIT_K == 1 and not HAS_C),
                     "a tail accumulator: dense, unsplit, no C")
    tl.static_assert(not PSUM_WALK or GROUPING == MASKED, "the psum walk runs as a MASKED launch")
    pid = tl.program_id(0)
    num_m_blocks = tl.cdiv(M, BM)
    num_n_blocks = tl.cdiv(N, BN + BN_TAIL)
    num_kb = tl.cdiv(K, BK)

    split_from = SPLIT_FROM
    splits = SPLIT_K
    if PSUM_WALK:
        g_idx, masked, group_tiles, group_end, num_tiles, starts = psum_walk_tiles(layout_ptr, NUM_GROUPS,
                                                                                   num_n_blocks, M, BM, G_PAD,
                                                                                   PSUM_ALIGN)
    elif GROUPING == MASKED:
        g_idx, masked, group_tiles, group_end, num_tiles = masked_tiles(layout_ptr, NUM_GROUPS, num_n_blocks, BM,
                                                                        G_PAD)
    if GROUPING == MASKED:
        if SPLIT_K > 1:  # (every program computes the same values from the same masked_m)
            whole_waves = num_tiles // NUM_PROGRAMS * NUM_PROGRAMS
            last_wave = num_tiles - whole_waves
            splits = tl.minimum(NUM_PROGRAMS // tl.maximum(last_wave, 1), SPLIT_K)
            split_from = tl.where(splits > 1, whole_waves, num_tiles)
            num_tiles = split_from + (num_tiles - split_from) * splits  # work items
    elif GROUPING == K_GROUPED:
        g_idx, ks, k_starts = k_grouped_starts(layout_ptr, NUM_GROUPS, G_PAD)
        num_tiles = NUM_GROUPS * num_m_blocks * num_n_blocks
    else:
        num_tiles = SPLIT_FROM + (num_m_blocks * num_n_blocks - SPLIT_FROM) * SPLIT_K  # work items

    for tile in tl.range(FIRST_ITEM + pid, num_tiles, NUM_PROGRAMS):
        group = 0
        split = 0
        kb_begin = 0
        kb_end = num_kb
        k_start = 0
        if GROUPING == MASKED:
            mn_tile = tile
            if SPLIT_K > 1:
                is_piece = tile >= split_from
                piece = tl.maximum(tile - split_from, 0)
                mn_tile = tl.where(is_piece, split_from + piece // splits, tile)
                split = tl.where(is_piece, piece % splits, 0)
                # (balanced K ranges: the pieces of a wave end together; none is empty, as splits <= the K blocks
                # by the plan, and an empty one would still publish its zero partial)
                kb_begin = split * num_kb // splits
                kb_end = tl.where(is_piece, (split + 1) * num_kb // splits, num_kb)
            group, m_limit, pid_m, pid_n = masked_tile(mn_tile, g_idx, masked, group_tiles, group_end, num_n_blocks,
                                                       BM, GROUP_M)
            if PSUM_WALK:  # (the group's rows start at its aligned start, of the whole [M, *] matrices)
                row0 = tl.sum(tl.where(g_idx == group, starts, 0), axis=0)
                m_limit = row0 + m_limit
        elif GROUPING == K_GROUPED:
            per_group = num_m_blocks * num_n_blocks
            group = tile // per_group
            pid_m, pid_n = tile_coords(tile % per_group, num_m_blocks, num_n_blocks, GROUP_M)
            m_limit = M
            k_start = tl_warp_uniform(tl.sum(tl.where(g_idx == group, k_starts, 0), axis=0), UNIFORM)
            # (BK divides every K_g: the plan)
            kb_end = tl_warp_uniform(tl.sum(tl.where(g_idx == group, ks, 0), axis=0) // BK, UNIFORM)
        else:
            mn_tile = tile
            if SPLIT_K > 1:  # (tensors before the runtime branch below reassigns them)
                split = tile * 0
                kb_begin = tile * 0
                kb_end = kb_begin + num_kb
                if tile >= SPLIT_FROM:
                    piece = tile - SPLIT_FROM
                    mn_tile = SPLIT_FROM + piece // SPLIT_K
                    split = piece % SPLIT_K
                    kb_per_split = tl.cdiv(num_kb, SPLIT_K)
                    kb_begin = split * kb_per_split
                    kb_end = tl.minimum(kb_begin + kb_per_split, num_kb)
            pid_m, pid_n = tile_coords(mn_tile, num_m_blocks, num_n_blocks, GROUP_M)
            m_limit = M
        off_m = pid_m * BM
        if PSUM_WALK:
            off_m = row0 + off_m
        off_n = pid_n * (BN + BN_TAIL)
        offs_m = off_m + tl.arange(0, BM)
        offs_n = off_n + tl.arange(0, BN)

        # Which rows this tile stores, and from which expert B comes.
        row_store = offs_m < m_limit
        expert, row_valid, row_store = grouped_rows(layout_ptr, off_m, offs_m, row_store, 0, NUM_GROUPS, GROUPING,
                                                    G_PAD, PSUM_ALIGN, ZERO_GAPS)
        if GROUPING == MASKED:
            expert = group

        acc = tl.zeros((BM, BN), dtype=tl.float32)
        if BN_TAIL > 0:  # (dense: the tail's columns are stored here, the first BN below as any tile's)
            acc, acc_tail = _mainloop_tail(a_desc, b_desc, b2_desc, off_m, off_n, num_kb, BM, BN, BN_TAIL, BK,
                                           NUM_STAGES, A_K_MAJOR, B_K_MAJOR)
            store_tile(acc_tail, d_ptr, d2_desc, c_ptr, off_m, off_n + BN, offs_m,
                       off_n + BN + tl.arange(0, BN_TAIL), row_store, N, stride_dm, stride_cm, False, D_TMA, 0, 0, 0)
        elif expert >= 0:
            acc = _mainloop(a_desc, b_desc, group * A_GROUP_M + off_m, k_start, expert * B_GROUP_N + off_n,
                            expert * B_GROUP_K + k_start, kb_begin, kb_end, BM, BN, BK, NUM_STAGES, A_K_MAJOR,
                            B_K_MAJOR)
        if GROUPING == M_IDS or GROUPING == M_PSUM:
            acc = tl.where(row_valid[:, None], acc, 0.0)

        # 64-bit group offsets: a grouped d (or c) may hold more than 2^31 elements, where an int32 product wraps.
        group_wide = tl.cast(group, tl.int64)
        d_tile = d_ptr + group_wide * stride_dg
        c_tile = c_ptr + group_wide * stride_cg
        if SPLIT_K == 1:
            store_tile(acc, d_tile, d_desc, c_tile, off_m, off_n, offs_m, offs_n, row_store, N, stride_dm,
                       stride_cm, HAS_C, D_TMA, 0, 0, 0)
        elif tile < split_from:  # a whole tile before the split ones
            store_tile(acc, d_tile, d_desc, c_tile, off_m, off_n, offs_m, offs_n, row_store, N, stride_dm,
                       stride_cm, HAS_C, D_TMA, 0, 0, 0)
        else:
            # Split-K: publish this piece's partial in the tile's workspace slots (whole tiles: no masks); the last
            # piece to arrive reduces them in split order (the same sum every call) and stores (MASKED: only rows
            # below masked_m, row_store).
            slot = (mn_tile - split_from).to(tl.int64) * splits
            in_tile = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
            ws_tile = ws_ptr + slot * (BM * BN) + in_tile
            tl.store(ws_tile + split * (BM * BN), acc)
            tl.debug_barrier()
            counter = counter_ptr + (mn_tile - split_from)
            arrived = tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu")
            if arrived == splits - 1:
                total = tl.zeros((BM, BN), dtype=tl.float32)
                for s in range(splits):
                    total += tl.load(ws_tile + s * (BM * BN), cache_modifier=".cg")
                store_tile(total, d_tile, d_desc, c_tile, off_m, off_n, offs_m, offs_n, row_store, N, stride_dm,
                           stride_cm, HAS_C, D_TMA, 0, 0, 0)
                tl.atomic_xchg(counter, 0, sem="relaxed", scope="gpu")
