"""Block-scaled FP8 GEMM kernel (tl.*), persistent, for the dense, M-grouped contiguous and masked ops.

Maths: D[m, n] = C[m, n] + sum_kb sfa[m, kb] * sfb[n(/128), kb] * (A[m, kb*128:(kb+1)*128] . B[n, same]).
Each 128-K block is one tl.dot into a *fresh* FP32 tile which is then promoted into the FP32 accumulator with its
scales (one FFMA per element: the per-row product sfa[m] * sfb is formed once per block), so FP8 products are
never accumulated across K blocks in the tensor core's reduced-precision accumulator (DeepGEMM's numerics).

Tiling: BM x BN output tiles, BK = 128 (one scale block). A and B are K-major and read through TMA descriptors (OOB
reads zero-fill, so M/N/K tails need no masks; MN-major operands are copied to K-major by the launcher, because FP8
wgmma reads K-major shared memory only); scales and the output go through pointers (D's row stride need not be
16-byte aligned). Program p owns tiles p, p + NUM_PROGRAMS, ... in a grouped (GROUP_M) order: NUM_PROGRAMS = #SMs
for large tiles (persistent), or one program per tile for small-M tiles (several CTAs per SM hide memory latency).

Groupings (constexpr GROUPING):
  DENSE      one problem; optionally split along K (SPLIT_K > 1): every split writes an FP32 partial to a workspace
             and the last split to arrive (per-tile counter) sums them and runs the epilogue (self-cleaning counter).
  M_IDS      M-grouped contiguous, expert id per row (-1 = padding): the tile's expert is the largest id among its
             rows; rows whose id differs are written as zeros.
  M_PSUM     M-grouped contiguous, cumulative group ends; group g's rows start at align(end[g-1], PSUM_ALIGN).
             Gap rows are zeroed (ZERO_GAPS) or left untouched.
  MASKED     A [G*Mmax, K]; group g has masked_m[g] valid rows; tiles are enumerated over groups on the device
             (prefix sum of per-group tile counts), so there is no host sync. Rows >= masked_m[g] are untouched.
  K_GROUPED  A [M, sum K], B [N, sum K] (K-major), group g owns K columns [k_start_g, k_start_g + K_g) (a device
             prefix sum of the int32 K sizes); D[g] (+)= C[g]. Every (group, tile) is a tile, empty groups included.
"""

import triton
import triton.language as tl

from ....common.kernels.groupings import DENSE, K_GROUPED, M_IDS, M_PSUM, MASKED  # noqa: F401  (kernel globals)
from ....common.kernels.epilogue import store_tile
from ....common.kernels.groupings import grouped_rows, k_grouped_starts, masked_tile, masked_tiles
from ....common.kernels.scaling import promote
from ....common.kernels.tiles import tile_coords


@triton.jit
def _scaled_mainloop(a_desc, b_desc, sfa_ptr, sfb_ptr, a_row, b_row, off_n, offs_m, offs_n, m_limit,
                     n_limit, kb_begin, kb_end, stride_sfa_m, stride_sfa_k, stride_sfb_n, stride_sfb_k,
                     BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, B_PER_ROW: tl.constexpr,
                     NUM_STAGES: tl.constexpr):
    """FP32 accumulator of one tile over K blocks [kb_begin, kb_end), promoted per block with its scales.

    sfa_ptr / sfb_ptr already point at the tile's group. offs_m / offs_n are the tile's logical row / column
    indices (used for scale lookups); a_row / b_row the first descriptor row of the tile.
    """
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    m_ok = offs_m < m_limit
    n_ok = offs_n < n_limit
    sfa_rows = sfa_ptr + offs_m * stride_sfa_m
    if B_PER_ROW:
        sfb_cols = sfb_ptr + offs_n * stride_sfb_n
    else:
        # BN divides 128, so the whole tile shares one B scale block along N.
        sfb_cols = sfb_ptr + (off_n // 128) * stride_sfb_n
    for kb in tl.range(kb_begin, kb_end, num_stages=NUM_STAGES):
        a = a_desc.load([a_row, kb * BK])
        b = b_desc.load([b_row, kb * BK]).T
        partial = tl.dot(a, b)
        acc = promote(acc, partial, sfa_rows, sfb_cols, kb, m_ok, n_ok, stride_sfa_k, stride_sfb_k, B_PER_ROW)
    return acc


# Runtime ints and pointers are not specialised on (value 1, divisibility, alignment), so one compiled binary per
# config serves every call and the launcher's cache key needs no per-argument inspection (host time, see launch.py).
@triton.jit(do_not_specialize=["M", "N", "K", "NUM_GROUPS", "stride_sfa_g", "stride_sfa_m", "stride_sfa_k",
                               "stride_sfb_g", "stride_sfb_n", "stride_sfb_k", "stride_dg", "stride_dm", "stride_cg",
                               "stride_cm"],
            do_not_specialize_on_alignment=["sfa_ptr", "sfb_ptr", "d_ptr", "c_ptr", "layout_ptr", "ws_ptr",
                                            "counter_ptr"])
def _fp8_gemm_kernel(
        a_desc, b_desc,  # FP8 K-major: A [rows, K], B [G*N, K] (K_GROUPED: A [M, sum K], B [N, sum K])
        sfa_ptr, sfb_ptr,  # FP32 scales: A [G?, M, ceil(K/128)], B [G?, ceil(N/128) or N, ceil(K/128)]
        d_ptr, c_ptr,  # output [G?, M, N'] (BF16/FP32), optional accumulator of the same shape
        d_desc,  # TMA descriptor over D [M, N] when D_TMA (else unused)
        layout_ptr,  # int32: expert id per row (M_IDS), group ends (M_PSUM), masked_m (MASKED), K sizes (K_GROUPED)
        ws_ptr, counter_ptr,  # split-K FP32 workspace [SPLIT_K, M, N] and int32 per-tile arrival counters
        M, N, K, NUM_GROUPS,
        stride_sfa_g, stride_sfa_m, stride_sfa_k, stride_sfb_g, stride_sfb_n, stride_sfb_k,
        stride_dg, stride_dm, stride_cg, stride_cm,
        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr,
        NUM_STAGES: tl.constexpr, SPLIT_K: tl.constexpr, GROUPING: tl.constexpr, G_PAD: tl.constexpr,
        PSUM_ALIGN: tl.constexpr, ZERO_GAPS: tl.constexpr, B_PER_ROW: tl.constexpr, HAS_C: tl.constexpr,
        D_TMA: tl.constexpr, HEAD_LEFT: tl.constexpr, HEAD_MID: tl.constexpr, HEAD_RIGHT: tl.constexpr):
    pid = tl.program_id(0)
    num_m_blocks = tl.cdiv(M, BM)
    num_n_blocks = tl.cdiv(N, BN)
    num_kb = tl.cdiv(K, BK)

    if GROUPING == MASKED:
        g_idx, masked, group_tiles, group_end, num_tiles = masked_tiles(layout_ptr, NUM_GROUPS, num_n_blocks, BM,
                                                                        G_PAD)
    elif GROUPING == K_GROUPED:
        g_idx, ks, k_starts = k_grouped_starts(layout_ptr, NUM_GROUPS, G_PAD)
        num_tiles = NUM_GROUPS * num_m_blocks * num_n_blocks
    else:
        num_tiles = num_m_blocks * num_n_blocks * SPLIT_K

    for tile in tl.range(pid, num_tiles, NUM_PROGRAMS):
        group = 0
        split = 0
        kb_begin = 0
        kb_end = num_kb
        if GROUPING == MASKED:
            group, m_limit, pid_m, pid_n = masked_tile(tile, g_idx, masked, group_tiles, group_end, num_n_blocks, BM,
                                                       GROUP_M)
        elif GROUPING == K_GROUPED:
            per_group = num_m_blocks * num_n_blocks
            group = tile // per_group
            pid_m, pid_n = tile_coords(tile % per_group, num_m_blocks, num_n_blocks, GROUP_M)
            m_limit = M
            kb_begin = tl.sum(tl.where(g_idx == group, k_starts, 0), axis=0) // BK
            kb_end = kb_begin + tl.sum(tl.where(g_idx == group, ks, 0), axis=0) // BK
        else:
            split = tile % SPLIT_K
            pid_m, pid_n = tile_coords(tile // SPLIT_K, num_m_blocks, num_n_blocks, GROUP_M)
            m_limit = M
            kb_per_split = tl.cdiv(num_kb, SPLIT_K)
            kb_begin = split * kb_per_split
            kb_end = tl.minimum(kb_begin + kb_per_split, num_kb)
        off_m = pid_m * BM
        off_n = pid_n * BN
        offs_m = off_m + tl.arange(0, BM)
        offs_n = off_n + tl.arange(0, BN)

        # Which rows this tile stores, and from which expert B comes.
        row_store = offs_m < m_limit
        expert, row_valid, row_store = grouped_rows(layout_ptr, off_m, offs_m, row_store, group, NUM_GROUPS, GROUPING,
                                                    G_PAD, PSUM_ALIGN, ZERO_GAPS)
        if GROUPING == K_GROUPED:
            expert = 0  # one B for all groups; the group picks the K range

        a_row = off_m
        if GROUPING == MASKED:
            a_row = group * M + off_m
        sfa_group = 0
        if GROUPING == MASKED:
            sfa_group = group
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        if expert >= 0:
            acc = _scaled_mainloop(
                a_desc, b_desc, sfa_ptr + sfa_group * stride_sfa_g, sfb_ptr + expert * stride_sfb_g,
                a_row, expert * N + off_n, off_n, offs_m, offs_n, m_limit, N, kb_begin, kb_end,
                stride_sfa_m, stride_sfa_k, stride_sfb_n, stride_sfb_k, BM, BN, BK, B_PER_ROW, NUM_STAGES)
        acc = tl.where(row_valid[:, None], acc, 0.0)

        # 64-bit group offsets: a grouped d (or c) may hold more than 2^31 elements (e.g. 384 experts x 1024 rows x
        # 7168 columns), where an int32 product wraps.
        group_wide = tl.cast(group, tl.int64)
        d_tile = d_ptr + group_wide * stride_dg
        c_tile = c_ptr + group_wide * stride_cg
        if SPLIT_K == 1:
            store_tile(acc, d_tile, d_desc, c_tile, off_m, off_n, offs_m, offs_n, row_store, N, stride_dm,
                       stride_cm, HAS_C, D_TMA, HEAD_LEFT, HEAD_MID, HEAD_RIGHT)
        else:
            # Split-K: publish this split's partial, and let the last split to arrive reduce and store.
            mask = row_store[:, None] & (offs_n < N)[None, :]
            ws_tile = ws_ptr + offs_m[:, None] * N + offs_n[None, :]
            tl.store(ws_tile + split * M * N, acc, mask=mask)
            tl.debug_barrier()
            counter = counter_ptr + tile // SPLIT_K
            arrived = tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu")
            if arrived == SPLIT_K - 1:
                total = tl.zeros((BM, BN), dtype=tl.float32)
                for s in range(SPLIT_K):
                    total += tl.load(ws_tile + s * M * N, mask=mask, other=0.0, cache_modifier=".cg")
                store_tile(total, d_tile, d_desc, c_tile, off_m, off_n, offs_m, offs_n, row_store, N, stride_dm,
                           stride_cm, HAS_C, D_TMA, HEAD_LEFT, HEAD_MID, HEAD_RIGHT)
                tl.atomic_xchg(counter, 0, sem="relaxed", scope="gpu")
