"""The warp-specialised BF16 kernel's tile scheduling (Gluon): the masked layout's tile count and placement from
masked_m (a prefix sum on the device), a tile's expert (expert ids or psum ends), its grouped (pid_m, pid_n), and a
K-grouped tile's K range. Every partition walks the same tiles in the same order.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from ....common.kernels.groupings import DENSE, K_GROUPED, M_IDS, M_PSUM, MASKED  # noqa: F401  (kernel globals)
from ....common.kernels.tiles import add, swizzle
from ....common.kernels.uniform import warp_uniform


# Rows each consumer warpgroup owns (wgmma's M per warpgroup).
WG_ROWS = gl.constexpr(64)


@gluon.jit
def _masked_rows(layout_ptr, M, NUM_GROUPS, G_PAD: gl.constexpr, VEC: gl.constexpr):
    """MASKED: (group indices, valid rows) as [G_PAD] vectors, zeros past NUM_GROUPS: masked_m, read on the device,
    clamped to [0, Mmax] (Mmax = M / NUM_GROUPS: a count past the group's block must not store into the next
    group's rows)."""
    g_idx = gl.arange(0, G_PAD, layout=VEC)
    rows = gl.load(layout_ptr + g_idx, mask=g_idx < NUM_GROUPS, other=0)
    return g_idx, gl.minimum(gl.maximum(rows, 0), M // NUM_GROUPS)


@gluon.jit
def _masked_num_tiles(layout_ptr, M, N, NUM_GROUPS, BM: gl.constexpr, TILE_N: gl.constexpr, G_PAD: gl.constexpr,
                      VEC: gl.constexpr, UNIFORM: gl.constexpr):
    """MASKED: every group's tiles, cdiv(rows, BM) row blocks by the column blocks: the tile loop's bound (marked
    warp-uniform with UNIFORM, as the values it compares with)."""
    _, rows = _masked_rows(layout_ptr, M, NUM_GROUPS, G_PAD, VEC)
    return warp_uniform(gl.sum(gl.cdiv(rows, BM) * gl.cdiv(N, TILE_N), axis=0), UNIFORM)


@gluon.jit
def _masked_tile(tile, layout_ptr, M, N, NUM_GROUPS, BM: gl.constexpr, TILE_N: gl.constexpr, GROUP_M: gl.constexpr,
                 G_PAD: gl.constexpr, VEC: gl.constexpr, UNIFORM: gl.constexpr):
    """MASKED tile `tile` (< _masked_num_tiles): (its first row in the [G*Mmax] matrices, its column block, its
    group, the end of its group's valid rows there). The group is the count of groups whose tiles end at or before
    the tile (empty groups end where their predecessor does); within it tiles go in grouped order. Every value is a
    reduction over the per-group vectors, marked warp-uniform with UNIFORM: they address the producer's TMA loads
    and bound what the consumers store."""
    g_idx, rows = _masked_rows(layout_ptr, M, NUM_GROUPS, G_PAD, VEC)
    tiles = gl.cdiv(rows, BM) * gl.cdiv(N, TILE_N)
    ends = gl.associative_scan(tiles, 0, add)
    group = warp_uniform(gl.sum((ends <= tile).to(gl.int32), axis=0), UNIFORM)
    this = g_idx == group
    local = tile - warp_uniform(gl.sum(gl.where(this, ends - tiles, 0), axis=0), UNIFORM)
    group_rows = warp_uniform(gl.sum(gl.where(this, rows, 0), axis=0), UNIFORM)
    pid_m, pid_n = swizzle(local, gl.cdiv(group_rows, BM), gl.cdiv(N, TILE_N), GROUP_M)
    first_row = group * (M // NUM_GROUPS)
    return first_row + pid_m * BM, pid_n, group, first_row + group_rows


@gluon.jit
def _tile_expert(layout_ptr, off_m, NUM_GROUPS, GROUPING: gl.constexpr, G_PAD: gl.constexpr,
                 PSUM_ALIGN: gl.constexpr, VEC: gl.constexpr, UNIFORM: gl.constexpr):
    """(expert, end row of its group) of the tile starting at row off_m; expert -1: no valid row (dense: 0).
    UNIFORM: the M_PSUM values marked warp-uniform (unmarked, the K loop they bound runs 80 instead of 53
    instructions per K block and consumer at 128 x 256, sm_90a)."""
    expert = off_m * 0
    row_end = off_m * 0
    if GROUPING == M_IDS:
        expert = gl.load(layout_ptr + off_m)
    if GROUPING == M_PSUM:
        g_idx = gl.arange(0, G_PAD, layout=VEC)
        g_ok = g_idx < NUM_GROUPS
        ends = gl.load(layout_ptr + g_idx, mask=g_ok, other=0)
        prev = gl.load(layout_ptr + g_idx - 1, mask=g_ok & (g_idx > 0), other=0)
        starts = (prev + PSUM_ALIGN - 1) // PSUM_ALIGN * PSUM_ALIGN
        inside = g_ok & (off_m >= starts) & (off_m < ends)
        expert = warp_uniform(gl.max(gl.where(inside, g_idx, -1), axis=0), UNIFORM)
        row_end = warp_uniform(gl.sum(gl.where(g_idx == expert, ends, 0), axis=0), UNIFORM)
    return expert, row_end


@gluon.jit
def _tile_pids(tile, num_m_blocks, num_n_blocks, GROUP_M: gl.constexpr, GROUPING: gl.constexpr):
    """(group, pid_m, pid_n) of tile ``tile`` in grouped order; K_GROUPED: groups run one after another, each one's
    tiles in grouped order (other groupings: group 0, unused)."""
    if GROUPING == K_GROUPED:
        per_group = num_m_blocks * num_n_blocks
        group = tile // per_group
        pid_m, pid_n = swizzle(tile - group * per_group, num_m_blocks, num_n_blocks, GROUP_M)
    else:
        group = 0
        pid_m, pid_n = swizzle(tile, num_m_blocks, num_n_blocks, GROUP_M)
    return group, pid_m, pid_n


@gluon.jit
def _k_sizes(layout_ptr, NUM_GROUPS, G_PAD: gl.constexpr, VEC: gl.constexpr):
    """K_GROUPED: (group indices, K sizes) as [G_PAD] vectors, zeros past NUM_GROUPS (``_k_group`` reduces them to a
    tile's K range)."""
    g_idx = gl.arange(0, G_PAD, layout=VEC)
    ks = gl.load(layout_ptr + g_idx, mask=g_idx < NUM_GROUPS, other=0)
    return g_idx, ks


@gluon.jit
def _k_group(ks, g_idx, group, BK: gl.constexpr, UNIFORM: gl.constexpr):
    """(first K row, K blocks) of K_GROUPED group `group`, from the vector of K sizes ks (g_idx: its group indices):
    the prefix sum before it and its own size over BK. Both bound the K loop and address its TMA loads, so they are
    marked warp-uniform with UNIFORM (uniform.warp_uniform; unmarked, ptxas keeps the loop off the uniform datapath,
    as on the FP8 kernel's K-grouped build)."""
    k_start = warp_uniform(gl.sum(gl.where(g_idx < group, ks, 0), axis=0), UNIFORM)
    num_kb = warp_uniform(gl.sum(gl.where(g_idx == group, ks, 0), axis=0) // BK, UNIFORM)
    return k_start, num_kb
