"""The warp-specialised FP8 kernel's tile scheduling (Gluon): how many tiles a launch has, which rows, columns and
group a tile covers (the scan over the groups' rows, _tile_info, or the carried walk, _walk, for psum and masked
layouts), the column split of a BN + NARROW tile, and a K-grouped tile's K blocks (_k_blocks). Every partition
walks the same tiles in the same order.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from ....common.kernels.groupings import DENSE, K_GROUPED, M_IDS, M_PSUM, MASKED  # noqa: F401  (kernel globals)
from ....common.kernels.tiles import add, swizzle
from ....common.kernels.uniform import warp_uniform


# Rows each consumer warpgroup owns (wgmma's M per warpgroup).
WG_ROWS = gl.constexpr(64)


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
        group_end = gl.associative_scan(group_tiles, 0, add)
        group = warp_uniform(gl.sum((group_end <= tile).to(gl.int32), axis=0), UNIFORM)
        this = g_idx == group
        local = warp_uniform(tile - gl.sum(gl.where(this, group_end - group_tiles, 0), axis=0), UNIFORM)
        group_rows = warp_uniform(gl.sum(gl.where(this, rows, 0), axis=0), UNIFORM)
        first_row = warp_uniform(gl.sum(gl.where(this, starts, 0), axis=0), UNIFORM)
        m_limit = first_row + group_rows
        pid_m, pid_n = swizzle(local, gl.cdiv(group_rows, BM), num_n_blocks, GROUP_M)
    elif GROUPING == K_GROUPED:  # every group's [M, N] output, one after the other
        per_group = gl.cdiv(M, BM) * num_n_blocks
        group = tile // per_group
        pid_m, pid_n = swizzle(tile % per_group, gl.cdiv(M, BM), num_n_blocks, GROUP_M)
    else:
        pid_m, pid_n = swizzle(tile, gl.cdiv(M, BM), num_n_blocks, GROUP_M)
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
    pid_m, pid_n = swizzle(tile - g_first, gl.cdiv(g_rows, BM), gl.cdiv(N, BN), GROUP_M)
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
