"""The grouping kinds of the GEMM kernels (their GROUPING constexpr), shared by the FP8 and BF16 tl.* and Gluon
kernels, and the tl.* kernels' grouping preamble: a masked launch's tiles per group (``masked_tiles``), where a
masked tile lies (``masked_tile``), a K-grouped launch's K ranges (``k_grouped_starts``), which rows of an
M-grouped tile are stored and from which expert B comes (``grouped_rows``). The launchers name the kinds through
their plans' ``GROUPING``, plain ints so that importing the launchers does not import Triton;
tests/test_fp8_gemm_plan_cpu.py checks that the two agree."""

import triton
import triton.language as tl

from .tiles import tile_coords

DENSE = tl.constexpr(0)
M_IDS = tl.constexpr(1)
M_PSUM = tl.constexpr(2)
MASKED = tl.constexpr(3)
K_GROUPED = tl.constexpr(4)


@triton.jit
def grouped_rows(layout_ptr, off_m, offs_m, row_store, expert, NUM_GROUPS, GROUPING: tl.constexpr,
                 G_PAD: tl.constexpr, PSUM_ALIGN: tl.constexpr, ZERO_GAPS: tl.constexpr):
    """(expert, row_valid, row_store) of the tile at rows offs_m: M_IDS, the expert of its first row, the rows of
    another expert not valid; M_PSUM, the group the tile lies in (-1: a gap), its rows past the group's end not valid
    (nor stored unless ZERO_GAPS). Other groupings keep ``expert`` and every stored row valid."""
    row_valid = row_store
    if GROUPING == M_IDS:
        ids = tl.load(layout_ptr + offs_m, mask=row_store, other=-1)
        expert = tl.max(ids, axis=0)
        row_valid = row_store & (ids == expert)
    if GROUPING == M_PSUM:
        g_idx = tl.arange(0, G_PAD)
        ends, starts = psum_bounds(layout_ptr, g_idx, NUM_GROUPS, PSUM_ALIGN)
        # PSUM_ALIGN is a multiple of BM (the plan), so a tile lies in one group or in a gap.
        inside = (off_m >= starts) & (off_m < ends) & (g_idx < NUM_GROUPS)
        expert = tl.max(tl.where(inside, g_idx, -1), axis=0)
        group_end_row = tl.sum(tl.where(g_idx == expert, ends, 0), axis=0)
        row_valid = row_store & (expert >= 0) & (offs_m < group_end_row)
        if not ZERO_GAPS:
            row_store = row_valid
    return expert, row_valid, row_store


@triton.jit
def psum_bounds(layout_ptr, g_idx, NUM_GROUPS, PSUM_ALIGN: tl.constexpr):
    """(ends, starts) of the M_PSUM groups g_idx (zeros past NUM_GROUPS): group g's rows run from
    align(end[g-1], PSUM_ALIGN) (0 for the first) to end[g], the cumulative ends in layout_ptr."""
    ends = tl.load(layout_ptr + g_idx, mask=g_idx < NUM_GROUPS, other=0)
    prev = tl.load(layout_ptr + g_idx - 1, mask=(g_idx > 0) & (g_idx < NUM_GROUPS), other=0)
    return ends, (prev + PSUM_ALIGN - 1) // PSUM_ALIGN * PSUM_ALIGN


@triton.jit
def _group_tiles(rows, num_n_blocks, BM: tl.constexpr):
    """(tiles per group, running tile count, tiles) of groups of ``rows`` rows: cdiv(rows, BM) row blocks by
    num_n_blocks column blocks each, counted through an on-device prefix sum."""
    group_tiles = tl.cdiv(rows, BM) * num_n_blocks
    return group_tiles, tl.cumsum(group_tiles, axis=0), tl.sum(group_tiles, axis=0)


@triton.jit
def masked_tiles(layout_ptr, NUM_GROUPS, num_n_blocks, BM: tl.constexpr, G_PAD: tl.constexpr):
    """(g_idx, masked_m, tiles per group, running tile count, tiles) of a MASKED launch: group g has
    cdiv(masked_m[g], BM) * num_n_blocks tiles, enumerated through an on-device prefix sum."""
    g_idx = tl.arange(0, G_PAD)
    masked = tl.load(layout_ptr + g_idx, mask=g_idx < NUM_GROUPS, other=0)
    group_tiles, group_end, num_tiles = _group_tiles(masked, num_n_blocks, BM)
    return g_idx, masked, group_tiles, group_end, num_tiles


@triton.jit
def psum_walk_tiles(layout_ptr, NUM_GROUPS, num_n_blocks, M, BM: tl.constexpr, G_PAD: tl.constexpr,
                    PSUM_ALIGN: tl.constexpr):
    """(g_idx, rows per group, tiles per group, running tile count, tiles, first rows) of an M_PSUM call walked as a
    MASKED one: group g's rows run from align(end[g-1], PSUM_ALIGN) to end[g] (ends past M read as M), and it has
    cdiv(rows, BM) * num_n_blocks tiles, so the launch enumerates the groups' tiles only, however many rows A has."""
    g_idx = tl.arange(0, G_PAD)
    ends, starts = psum_bounds(layout_ptr, g_idx, NUM_GROUPS, PSUM_ALIGN)
    rows = tl.maximum(tl.minimum(ends, M) - starts, 0)
    group_tiles, group_end, num_tiles = _group_tiles(rows, num_n_blocks, BM)
    return g_idx, rows, group_tiles, group_end, num_tiles, starts


@triton.jit
def k_grouped_starts(layout_ptr, NUM_GROUPS, G_PAD: tl.constexpr):
    """(g_idx, K sizes, K starts) of a K_GROUPED launch: group g reduces over ks[g] columns of K from k_starts[g]
    (an on-device exclusive prefix sum of the sizes in layout_ptr)."""
    g_idx = tl.arange(0, G_PAD)
    ks = tl.load(layout_ptr + g_idx, mask=g_idx < NUM_GROUPS, other=0)
    k_starts = tl.cumsum(ks, axis=0) - ks
    return g_idx, ks, k_starts


@triton.jit
def masked_tile(tile, g_idx, masked, group_tiles, group_end, num_n_blocks, BM: tl.constexpr, GROUP_M: tl.constexpr):
    """(group, rows of the group, pid_m, pid_n) of MASKED tile ``tile``: the groups' tiles are numbered one group
    after the other (group_end: the running count of group_tiles), each group's in grouped order."""
    group = tl.sum((group_end <= tile).to(tl.int32), axis=0)
    local = tile - tl.sum(tl.where(g_idx == group, group_end - group_tiles, 0), axis=0)
    m_limit = tl.sum(tl.where(g_idx == group, masked, 0), axis=0)
    pid_m, pid_n = tile_coords(local, tl.cdiv(m_limit, BM), num_n_blocks, GROUP_M)
    return group, m_limit, pid_m, pid_n
