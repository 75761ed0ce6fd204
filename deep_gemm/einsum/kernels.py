"""Triton kernels of the einsum ops: batched GEMMs read through 3-D TMA descriptors.

Every operand is seen in the batched NT form ``[G, rows, cols]`` (a permuted *view* of the caller's tensor, any
strides with a unit last stride; the descriptor carries the strides, so e.g. ``W = w_full[:, :, :R]`` or ``x[B, H, R]``
read per head need no copy). A block ``[1, rows, cols]`` of such a descriptor is reshaped to 2-D: dropping the
leading unit dim keeps the tile in shared memory for wgmma (a unit dim in the middle would send it through
registers), which is why the batch dim always comes first in the descriptor even when it is not the outermost
dim in memory.

* ``_bh_einsum_gemm_kernel`` (BF16): D[g] = C[g] + A[g] @ B[g]^T, FP32 accumulation with ONE accumulator chained
  through the K blocks in order (``tl.dot(a, b, acc)``: each wgmma adds into the running sum). No split K, no
  reordering: the result is the same FP32 sum as cuBLAS's batched GEMM (torch.einsum), which DeepGEMM's test
  compares against at calc_diff < 1e-10, i.e. almost bit for bit.
* ``_bmn_bnk_mn_gemm_impl`` (BF16, ``bmk,bnk->mn``): D = C + sum_s A[s] @ B[s]^T. The batch is split into ranges
  (one program per (range, tile)); each writes its FP32 partial to a workspace, and the partials are summed in
  range order: deterministic (bit-identical from run to run), unlike atomics. REDUCE_PARALLEL: by
  ``_bmk_reduce_partials``, a second launch whose programs each own a few rows of a tile; REDUCE_SERIAL: by the
  last range to arrive at the tile's counter, which resets it (counters are kept zeroed between calls,
  ``core/scratch``); REDUCE_GRID: in the same launch by every range (``_bmk_grid_reduce``): each waits at its
  tile's counter for all the tile's ranges, then sums its own 1/SPLITS of the tile's elements over every range
  (cooperative launch: the waits need every program resident).
* ``_fp8_einsum_gemm_kernel`` (block-scaled FP8): the FP8 GEMMs' numerics (``gemm/fp8/kernels/gemm.py``): every
  128-K block is one ``tl.dot`` into a fresh FP32 tile, promoted into the FP32 accumulator with its scales (A per
  row, B per 128-block or per row); K-major operands only (FP8 wgmma), the launcher copies MN-major ones.

Tiles are walked in grouped order (``common.kernels.tiles.tile_coords``) inside each batch entry, so a batch
entry's B stays in
L2 while its M blocks pass; a program loops over tiles p, p + NUM_PROGRAMS, ... (persistent when the grid is #SMs).
"""

import triton
import triton.language as tl

from ..common.kernels.scaling import promote
from ..common.kernels.tiles import tile_coords


@triton.jit
def _batched_tile(tile, M, N, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
    """(g, off_m, off_n) of a tile: batch entry outermost, grouped order inside it."""
    num_m_blocks = tl.cdiv(M, BM)
    num_n_blocks = tl.cdiv(N, BN)
    per_g = num_m_blocks * num_n_blocks
    g = tile // per_g
    pid_m, pid_n = tile_coords(tile % per_g, num_m_blocks, num_n_blocks, GROUP_M)
    return g, pid_m * BM, pid_n * BN


@triton.jit
def _store_part(acc, d_ptr, c_ptr, g, off_m, off_n, M, N, stride_dg, stride_dm, stride_cg, stride_cm,
                BM: tl.constexpr, BN: tl.constexpr, HAS_C: tl.constexpr):
    """D[g, rows, cols] = C[...] + acc through masked pointers (D or C not TMA-ready)."""
    offs_m = off_m + tl.arange(0, BM)
    offs_n = off_n + tl.arange(0, BN)
    mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
    if HAS_C:
        c = tl.load(c_ptr + g * stride_cg + offs_m[:, None] * stride_cm + offs_n[None, :], mask=mask, other=0.0)
        acc += c.to(tl.float32)
    tl.store(d_ptr + g * stride_dg + offs_m[:, None] * stride_dm + offs_n[None, :], acc.to(d_ptr.dtype.element_ty),
             mask=mask)


@triton.jit
def _store_tile(acc, d_desc, c_desc, d_ptr, c_ptr, g, off_m, off_n, M, N, stride_dg, stride_dm, stride_cg,
                stride_cm, BM: tl.constexpr, BN: tl.constexpr, HAS_C: tl.constexpr, D_TMA: tl.constexpr,
                C_TMA: tl.constexpr, D_HALVES: tl.constexpr = False):
    """D[g, tile] = C[g, tile] + acc, rounded once to D's dtype. With D_TMA (and C_TMA) one TMA store (load) of the
    tile (out-of-range rows and columns are clipped / zero-filled by the hardware), or two half-width stores
    (D_HALVES: d_desc's block is [1, BM, BN/2], so the epilogue buffer is half a tile); otherwise masked pointers, in
    four column quarters (a whole tile of 64-bit addresses would not fit in registers next to the accumulator)."""
    if D_TMA:
        if HAS_C:
            if C_TMA:
                acc += c_desc.load([g, off_m, off_n]).reshape(BM, BN).to(tl.float32)
            else:
                offs_m = off_m + tl.arange(0, BM)
                offs_n = off_n + tl.arange(0, BN)
                mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
                c = tl.load(c_ptr + g * stride_cg + offs_m[:, None] * stride_cm + offs_n[None, :], mask=mask,
                            other=0.0)
                acc += c.to(tl.float32)
        if D_HALVES:  # two [BM, BN/2] stores through a half-width descriptor: half the epilogue buffer
            left, right = acc.reshape(BM, 2, BN // 2).permute(0, 2, 1).split()
            d_desc.store([g, off_m, off_n], left.to(d_desc.dtype).reshape(1, BM, BN // 2))
            d_desc.store([g, off_m, off_n + BN // 2], right.to(d_desc.dtype).reshape(1, BM, BN // 2))
        else:
            d_desc.store([g, off_m, off_n], acc.to(d_desc.dtype).reshape(1, BM, BN))
    else:
        left, right = acc.reshape(BM, 2, BN // 2).permute(0, 2, 1).split()
        _store_half(left, d_ptr, c_ptr, g, off_m, off_n, M, N, stride_dg, stride_dm, stride_cg, stride_cm, BM,
                    BN // 2, HAS_C)
        _store_half(right, d_ptr, c_ptr, g, off_m, off_n + BN // 2, M, N, stride_dg, stride_dm, stride_cg,
                    stride_cm, BM, BN // 2, HAS_C)


@triton.jit
def _store_half(acc, d_ptr, c_ptr, g, off_m, off_n, M, N, stride_dg, stride_dm, stride_cg, stride_cm,
                BM: tl.constexpr, BN: tl.constexpr, HAS_C: tl.constexpr):
    """Half a tile through pointers, itself in two column quarters (see _store_tile)."""
    left, right = acc.reshape(BM, 2, BN // 2).permute(0, 2, 1).split()
    _store_part(left, d_ptr, c_ptr, g, off_m, off_n, M, N, stride_dg, stride_dm, stride_cg, stride_cm, BM,
                BN // 2, HAS_C)
    _store_part(right, d_ptr, c_ptr, g, off_m, off_n + BN // 2, M, N, stride_dg, stride_dm, stride_cg, stride_cm,
                BM, BN // 2, HAS_C)


@triton.jit
def _load_b(b_desc, g, off_n, k, BN: tl.constexpr, BK: tl.constexpr, B_K_MAJOR: tl.constexpr):
    """B's [BK, BN] tile for tl.dot: from [G, N, K] (K-major) or [G, K, N] (N-major; BF16 wgmma reads it as is)."""
    if B_K_MAJOR:
        b = b_desc.load([g, off_n, k]).reshape(BN, BK).T
    else:
        b = b_desc.load([g, k, off_n]).reshape(BK, BN)
    return b


# Runtime ints and pointers are not specialised on (see core/launch.py): one binary per config.
@triton.jit(do_not_specialize=["G", "M", "N", "K", "stride_dg", "stride_dm", "stride_cg", "stride_cm"],
            do_not_specialize_on_alignment=["d_ptr", "c_ptr"])
def _bh_einsum_gemm_kernel(
        a_desc, b_desc,  # BF16 A [G, M, K]; B [G, N, K] (B_K_MAJOR) or [G, K, N]; blocks [1, BM|BN|BK, ...]
        d_desc, c_desc,  # D and C [G, M, N], blocks [1, BM, BN] (used when D_TMA / C_TMA)
        d_ptr, c_ptr,  # D and the optional C [G, M, N] (unit last stride)
        G, M, N, K, stride_dg, stride_dm, stride_cg, stride_cm,
        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr,
        NUM_STAGES: tl.constexpr, B_K_MAJOR: tl.constexpr, HAS_C: tl.constexpr, D_TMA: tl.constexpr,
        C_TMA: tl.constexpr, FLATTEN: tl.constexpr, D_HALVES: tl.constexpr):
    pid = tl.program_id(0)
    num_tiles = G * tl.cdiv(M, BM) * tl.cdiv(N, BN)
    num_kb = tl.cdiv(K, BK)
    # FLATTEN: one software pipeline over (tile, K block) pairs, so the next tile's loads overlap this tile's last
    # blocks and epilogue (short K loops, persistent grids).
    for tile in tl.range(pid, num_tiles, NUM_PROGRAMS, flatten=FLATTEN):
        g, off_m, off_n = _batched_tile(tile, M, N, BM, BN, GROUP_M)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kb in tl.range(0, num_kb, num_stages=NUM_STAGES):
            a = a_desc.load([g, off_m, kb * BK]).reshape(BM, BK)
            b = _load_b(b_desc, g, off_n, kb * BK, BN, BK, B_K_MAJOR)
            acc = tl.dot(a, b, acc)  # chained: the K order of cuBLAS's FP32 accumulation
        _store_tile(acc, d_desc, c_desc, d_ptr, c_ptr, g, off_m, off_n, M, N, stride_dg, stride_dm, stride_cg,
                    stride_cm, BM, BN, HAS_C, D_TMA, C_TMA, D_HALVES)


@triton.jit
def _publish_partial(part, ws_ptr, split, off_m, off_n, M, N, BM: tl.constexpr, BN: tl.constexpr):
    offs_m = off_m + tl.arange(0, BM)
    offs_n = off_n + tl.arange(0, BN)
    mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
    tl.store(ws_ptr + split * M * N + offs_m[:, None] * N + offs_n[None, :], part, mask=mask)


@triton.jit
def _sum_partials(ws_ptr, splits, off_m, off_n, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """sum_r partial[r] over the tile, in range order r = 0, 1, ... (deterministic); L2 reads (.cg): the partials
    were written by other programs."""
    offs_m = off_m + tl.arange(0, BM)
    offs_n = off_n + tl.arange(0, BN)
    mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
    tile = ws_ptr + offs_m[:, None] * N + offs_n[None, :]
    total = tl.zeros((BM, BN), dtype=tl.float32)
    for r in range(0, splits):
        total += tl.load(tile + r * M * N, mask=mask, other=0.0, cache_modifier=".cg")
    return total


# How the ranges of a split batch are combined (the launcher's BmkPlan.reduce, a constexpr of the kernel).
REDUCE_NONE, REDUCE_SERIAL, REDUCE_PARALLEL, REDUCE_GRID = 0, 1, 2, 3
# REDUCE_GRID: elements of a slice summed at once (per program, 2 or 4 per thread) and ranges loaded before they are
# added (16 partials in flight per element: a 44-range sum is three L2 round trips, not 44).
GRID_CHUNK = tl.constexpr(512)


@triton.jit
def _publish_tile_partial(part, ws_ptr, slot, BM: tl.constexpr, BN: tl.constexpr):
    """A whole [BM, BN] partial into its own contiguous slot of the workspace (no masks: out-of-range rows and
    columns hold the zeros TMA filled in). The workspace is a fresh allocation (16-byte aligned, as every slot: BN
    is a multiple of 4), which ws_ptr's type does not say (not specialised on alignment): the hint lets each
    thread store its accumulator's column pairs 8 bytes at a time, half the store instructions of 4-byte ones."""
    offs = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    tl.store(tl.multiple_of(ws_ptr + slot * (BM * BN) + offs, [16, 16]), part)


@triton.jit(do_not_specialize=["S", "M", "N", "K", "SPLITS", "stride_dm", "stride_cm"],
            do_not_specialize_on_alignment=["d_ptr", "c_ptr", "ws_ptr", "counter_ptr"])
def _bmn_bnk_mn_gemm_impl(
        a_desc, b_desc,  # BF16 A [S, M, K], B [S, N, K], blocks [1, BM, BK] and [1, BN, BK]
        d_desc, c_desc,  # D and C as [1, M, N], blocks [1, BM, BN] (used when D_TMA / C_TMA)
        d_ptr, c_ptr,  # D [M, N] (BF16/FP32) and the optional C (may be D)
        ws_ptr, counter_ptr,  # FP32 partials and (REDUCE_SERIAL, REDUCE_GRID) one int32 arrival counter per tile
        S, M, N, K, SPLITS, stride_dm, stride_cm,
        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, NUM_STAGES: tl.constexpr, HAS_C: tl.constexpr,
        D_TMA: tl.constexpr, C_TMA: tl.constexpr, REDUCE: tl.constexpr):
    # Program pid = split * tiles + tile: the tiles of one batch range are neighbours in launch order, so they run
    # together and the A (B) blocks they share come from L2 instead of DRAM once per tile.
    pid = tl.program_id(0)
    num_n_blocks = tl.cdiv(N, BN)
    num_tiles = tl.cdiv(M, BM) * num_n_blocks
    split = pid // num_tiles
    tile = pid % num_tiles
    off_m = (tile // num_n_blocks) * BM
    off_n = (tile % num_n_blocks) * BN
    num_kb = tl.cdiv(K, BK)
    per_split = tl.cdiv(S, SPLITS)
    s_begin = split * per_split
    s_count = tl.minimum(per_split, S - s_begin)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    # One loop over (batch entry, K block) pairs, so the pipeline runs across batch entries.
    for it in tl.range(0, s_count * num_kb, num_stages=NUM_STAGES):
        s = s_begin + it // num_kb
        k = (it % num_kb) * BK
        a = a_desc.load([s, off_m, k]).reshape(BM, BK)
        b = b_desc.load([s, off_n, k]).reshape(BN, BK).T
        acc = tl.dot(a, b, acc)

    if REDUCE == 0:
        _store_tile(acc, d_desc, c_desc, d_ptr, c_ptr, 0, off_m, off_n, M, N, 0, stride_dm, 0, stride_cm, BM, BN,
                    HAS_C, D_TMA, C_TMA)
    elif REDUCE == 2:
        # Partials only: _bmk_reduce_partials (a second launch) sums them, spread over many programs.
        left, right = acc.reshape(BM, 2, BN // 2).permute(0, 2, 1).split()
        _publish_tile_partial(left, ws_ptr, 2 * pid, BM, BN // 2)
        _publish_tile_partial(right, ws_ptr, 2 * pid + 1, BM, BN // 2)
    elif REDUCE == 3:
        # The parallel reduction's partial slots, summed in this launch: each range waits for the tile's other
        # ranges, then owns 1/SPLITS of the tile (_bmk_grid_reduce).
        left, right = acc.reshape(BM, 2, BN // 2).permute(0, 2, 1).split()
        _publish_tile_partial(left, ws_ptr, 2 * pid, BM, BN // 2)
        _publish_tile_partial(right, ws_ptr, 2 * pid + 1, BM, BN // 2)
        _bmk_grid_reduce(ws_ptr, counter_ptr, d_ptr, c_ptr, split, tile, num_tiles, M, N, SPLITS, stride_dm,
                         stride_cm, BM, BN, HAS_C)
    else:
        # Publish this range's partial (two column halves: fewer live addresses); the last range to arrive at the
        # tile's counter sums every partial in range order, stores, and resets the counter.
        left, right = acc.reshape(BM, 2, BN // 2).permute(0, 2, 1).split()
        _publish_partial(left, ws_ptr, split, off_m, off_n, M, N, BM, BN // 2)
        _publish_partial(right, ws_ptr, split, off_m, off_n + BN // 2, M, N, BM, BN // 2)
        tl.debug_barrier()
        counter = counter_ptr + tile
        arrived = tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu")
        if arrived == SPLITS - 1:
            left = _sum_partials(ws_ptr, SPLITS, off_m, off_n, M, N, BM, BN // 2)
            right = _sum_partials(ws_ptr, SPLITS, off_m, off_n + BN // 2, M, N, BM, BN // 2)
            total = tl.join(left, right).permute(0, 2, 1).reshape(BM, BN)
            _store_tile(total, d_desc, c_desc, d_ptr, c_ptr, 0, off_m, off_n, M, N, 0, stride_dm, 0, stride_cm, BM,
                        BN, HAS_C, D_TMA, C_TMA)
            tl.atomic_xchg(counter, 0, sem="relaxed", scope="gpu")


@triton.jit
def _add_ranges_in_order(total, at, step, r0, SPLITS, ok, LOADS: tl.constexpr, CACHE: tl.constexpr):
    """total + partial[r0] + partial[r0 + 1] + ... (LOADS ranges from ``at``, ``step`` apart; those at or past
    SPLITS and the elements not ``ok`` load -0.0, which adds no bits), the adds in range order. Every load is
    written before the first add (a tuple), so that they are issued together: written as load, add, load, add,
    ... they stayed interleaved in the SASS, a few loads in flight. CACHE: the loads' cache modifier."""
    parts = ()
    for i in tl.static_range(LOADS):
        # (range r0 itself exists: the callers' loops start below SPLITS)
        in_range = ok if i == 0 else ok & (r0 + i < SPLITS)
        parts = parts + (tl.load(at + i * step, mask=in_range, other=-0.0, cache_modifier=CACHE),)
    for i in tl.static_range(LOADS):
        total = total + parts[i]
    return total


@triton.jit
def _wait_for_ranges(counter, SPLITS):
    """Arrive at a tile's counter and wait until all SPLITS ranges of the tile have; then leave, the last to leave
    resetting it to zero (for the next launch on this stream: ``core/scratch``).

    The arrival is a release at GPU scope after a CTA barrier, so every thread's partial stores precede it (the
    release is cumulative over what the barrier ordered before it); the wait polls with acquire loads (a relaxed
    add of 0 would not order the partial loads after it), and a second barrier orders every thread's loads after
    the one thread's acquire. A counter reads SPLITS..2 * SPLITS - 1 between the last arrival and the last
    departure, so a waiting range never sees it reset: the reset needs its own departure first."""
    tl.debug_barrier()
    seen = tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu") + 1
    while seen < SPLITS:
        seen = tl.atomic_add(counter, 0, sem="acquire", scope="gpu")
    tl.debug_barrier()
    if tl.atomic_add(counter, 1, sem="relaxed", scope="gpu") == 2 * SPLITS - 1:
        tl.atomic_xchg(counter, 0, sem="relaxed", scope="gpu")


@triton.jit
def _bmk_grid_reduce(ws_ptr, counter_ptr, d_ptr, c_ptr, split, tile, num_tiles, M, N, SPLITS, stride_dm, stride_cm,
                     BM: tl.constexpr, BN: tl.constexpr, HAS_C: tl.constexpr):
    """REDUCE_GRID: D = C + sum_r partial[r] over slice ``split`` of tile ``tile`` (the tile's elements cut into
    SPLITS runs of ceil(BM * BN / SPLITS); the last ones may be short or empty), once every range of the tile has
    published its partial. Element e of a tile is e's place in its partial slot pair (half, row, column in half, as
    _publish_tile_partial wrote them), so a slice is contiguous in every range's slots; each element is summed
    exactly as ``_bmk_reduce_partials`` sums it: -0.0, then r = 0, 1, ..., SPLITS - 1, then C: the same bits
    (float additions are not reassociated), whichever reduction runs."""
    HALF: tl.constexpr = BN // 2
    TILE: tl.constexpr = BM * BN
    _wait_for_ranges(counter_ptr + tile, SPLITS)
    num_n_blocks = tl.cdiv(N, BN)
    off_m = (tile // num_n_blocks) * BM
    off_n = (tile % num_n_blocks) * BN
    per_slice = tl.cdiv(TILE, SPLITS)
    begin = split * per_slice
    end = tl.minimum(begin + per_slice, TILE)
    step = (num_tiles * TILE).to(tl.int64)  # one range's slots to the next
    for e0 in range(begin, end, GRID_CHUNK):
        e = e0 + tl.arange(0, GRID_CHUNK)
        ok = e < end
        at = ws_ptr + tile * TILE + e
        total = tl.full((GRID_CHUNK,), -0.0, dtype=tl.float32)  # -0.0: the exact additive identity
        for r0 in range(0, SPLITS, 16):
            # Sixteen loads issued before the first add (explicit: the adds must stay in range order). Written
            # out, not through _add_ranges_in_order: that gives this loop other SASS (sm_90a: 2256-3376
            # instructions against 2416-2944), and the form measured on the H200 is this one.
            p0 = tl.load(at + r0 * step, mask=ok, other=-0.0, cache_modifier=".cg")
            p1 = tl.load(at + (r0 + 1) * step, mask=ok & (r0 + 1 < SPLITS), other=-0.0, cache_modifier=".cg")
            p2 = tl.load(at + (r0 + 2) * step, mask=ok & (r0 + 2 < SPLITS), other=-0.0, cache_modifier=".cg")
            p3 = tl.load(at + (r0 + 3) * step, mask=ok & (r0 + 3 < SPLITS), other=-0.0, cache_modifier=".cg")
            p4 = tl.load(at + (r0 + 4) * step, mask=ok & (r0 + 4 < SPLITS), other=-0.0, cache_modifier=".cg")
            p5 = tl.load(at + (r0 + 5) * step, mask=ok & (r0 + 5 < SPLITS), other=-0.0, cache_modifier=".cg")
            p6 = tl.load(at + (r0 + 6) * step, mask=ok & (r0 + 6 < SPLITS), other=-0.0, cache_modifier=".cg")
            p7 = tl.load(at + (r0 + 7) * step, mask=ok & (r0 + 7 < SPLITS), other=-0.0, cache_modifier=".cg")
            p8 = tl.load(at + (r0 + 8) * step, mask=ok & (r0 + 8 < SPLITS), other=-0.0, cache_modifier=".cg")
            p9 = tl.load(at + (r0 + 9) * step, mask=ok & (r0 + 9 < SPLITS), other=-0.0, cache_modifier=".cg")
            p10 = tl.load(at + (r0 + 10) * step, mask=ok & (r0 + 10 < SPLITS), other=-0.0, cache_modifier=".cg")
            p11 = tl.load(at + (r0 + 11) * step, mask=ok & (r0 + 11 < SPLITS), other=-0.0, cache_modifier=".cg")
            p12 = tl.load(at + (r0 + 12) * step, mask=ok & (r0 + 12 < SPLITS), other=-0.0, cache_modifier=".cg")
            p13 = tl.load(at + (r0 + 13) * step, mask=ok & (r0 + 13 < SPLITS), other=-0.0, cache_modifier=".cg")
            p14 = tl.load(at + (r0 + 14) * step, mask=ok & (r0 + 14 < SPLITS), other=-0.0, cache_modifier=".cg")
            p15 = tl.load(at + (r0 + 15) * step, mask=ok & (r0 + 15 < SPLITS), other=-0.0, cache_modifier=".cg")
            total = total + p0
            total = total + p1
            total = total + p2
            total = total + p3
            total = total + p4
            total = total + p5
            total = total + p6
            total = total + p7
            total = total + p8
            total = total + p9
            total = total + p10
            total = total + p11
            total = total + p12
            total = total + p13
            total = total + p14
            total = total + p15
        half = e // (BM * HALF)
        rows = off_m + (e % (BM * HALF)) // HALF
        cols = off_n + half * HALF + e % HALF
        mask = ok & (rows < M) & (cols < N)
        if HAS_C:
            total += tl.load(c_ptr + rows * stride_cm + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(d_ptr + rows * stride_dm + cols, total.to(d_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _reduce_program(pid, M, N, BM: tl.constexpr, BN: tl.constexpr, RM: tl.constexpr):
    """What program ``pid`` of a bmk partial-sum reduction owns: (chunk, half, tile) = its RM-row chunk of a BN/2-
    column half of output tile ``tile`` (BM / RM chunks per half, two halves per tile, tiles in row-major order
    over [M, N]), with the tile grid's N blocks and tile count."""
    CHUNKS: tl.constexpr = BM // RM
    num_n_blocks = tl.cdiv(N, BN)
    num_tiles = tl.cdiv(M, BM) * num_n_blocks
    return pid % CHUNKS, (pid // CHUNKS) % 2, pid // (2 * CHUNKS), num_n_blocks, num_tiles


@triton.jit(do_not_specialize=["M", "N", "SPLITS", "stride_dm", "stride_cm"],
            do_not_specialize_on_alignment=["ws_ptr", "d_ptr", "c_ptr"])
def _bmk_reduce_partials(
        ws_ptr,  # FP32 partials of _bmn_bnk_mn_gemm_impl (REDUCE_PARALLEL): slot (split * tiles + tile) * 2 + half
        d_ptr, c_ptr,  # D [M, N] (BF16/FP32) and the optional C (may be D)
        M, N, SPLITS, stride_dm, stride_cm,
        BM: tl.constexpr, BN: tl.constexpr, RM: tl.constexpr, LOADS: tl.constexpr, HAS_C: tl.constexpr,
        ALIGNED: tl.constexpr):
    """D = C + sum_r partial[r], each program owning RM rows of one half tile (BN/2 columns) and summing the
    partials of every range for them in range order r = 0, 1, ...: the same bits on every call, whatever the
    order in which the ranges finished.

    The partials are hot in L2 and few (a few MB), so the time is latency: LOADS ranges' loads are issued before
    the first add (unrolled; the adds stay in range order), so a sum of up to LOADS ranges is one L2 round trip
    rather than one per eight, and C's load (from DRAM) is issued before them all, its latency hidden behind
    theirs. Program pid's elements of range r are the contiguous run pid * RM * BN/2 + [0, RM * BN/2) of range
    r's slots (its rows of its tile's half slot), read 8 bytes per thread (two elements: the launcher gives each
    program RM * BN / 128 warps; the workspace is a fresh, aligned allocation). With four elements per thread
    (16-byte loads) ptxas interleaved the loads with the adds again, two in flight (sm_90a, triton 3.6,
    scripts/compile_check_einsum.py). ALIGNED: D and C (and N) allow vector access too (the launcher checks:
    start and row stride 16-byte aligned, N a multiple of 4)."""
    HALF: tl.constexpr = BN // 2
    pid = tl.program_id(0)
    chunk, half, tile, num_n_blocks, num_tiles = _reduce_program(pid, M, N, BM, BN, RM)
    in_chunk = tl.arange(0, RM)
    cols = tl.arange(0, HALF)
    offs_m = (tile // num_n_blocks) * BM + chunk * RM + in_chunk
    offs_n = (tile % num_n_blocks) * BN + half * HALF + cols
    if ALIGNED:
        n_cols = N // 4 * 4  # (= N: only its known divisibility keeps 4 columns' mask one predicate)
    else:
        n_cols = N
    mask = (offs_m < M)[:, None] & (offs_n < n_cols)[None, :]
    d_at = d_ptr + offs_m[:, None] * stride_dm + offs_n[None, :]
    if ALIGNED:
        d_at = tl.multiple_of(d_at, [16, 16])
    if HAS_C:
        c_at = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :]
        if ALIGNED:
            c_at = tl.multiple_of(c_at, [16, 16])
        c = tl.load(c_at, mask=mask, other=0.0)
    first = tl.multiple_of(ws_ptr + pid * (RM * HALF) + in_chunk[:, None] * HALF + cols[None, :], [16, 16])
    step = (num_tiles * (BM * BN)).to(tl.int64)  # one range's slots to the next
    total = tl.full((RM, HALF), -0.0, dtype=tl.float32)  # -0.0: the exact additive identity
    for r0 in range(0, SPLITS, LOADS):
        total = _add_ranges_in_order(total, first + r0 * step, step, r0, SPLITS, True, LOADS, "")
    if HAS_C:
        total += c.to(tl.float32)
    tl.store(d_at, total.to(d_ptr.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=["G", "M", "N", "K", "stride_sfa_g", "stride_sfa_m", "stride_sfa_k", "stride_sfb_g",
                               "stride_sfb_n", "stride_sfb_k", "stride_dg", "stride_dm", "stride_cg", "stride_cm"],
            do_not_specialize_on_alignment=["sfa_ptr", "sfb_ptr", "d_ptr", "c_ptr"])
def _fp8_einsum_gemm_kernel(
        a_desc, b_desc,  # FP8 K-major A [G, M, K], B [G, N, K]; blocks [1, BM, 128], [1, BN, 128]
        sfa_ptr, sfb_ptr,  # FP32 scales: A [G, M, ceil(K/128)], B [G, ceil(N/128) or N, ceil(K/128)] (strided)
        d_desc, c_desc, d_ptr, c_ptr,  # D [G, M, N] and the optional C (descriptors used when D_TMA / C_TMA)
        G, M, N, K,
        stride_sfa_g, stride_sfa_m, stride_sfa_k, stride_sfb_g, stride_sfb_n, stride_sfb_k,
        stride_dg, stride_dm, stride_cg, stride_cm,
        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr,
        NUM_STAGES: tl.constexpr, B_PER_ROW: tl.constexpr, HAS_C: tl.constexpr, D_TMA: tl.constexpr,
        C_TMA: tl.constexpr, FLATTEN: tl.constexpr):
    pid = tl.program_id(0)
    num_tiles = G * tl.cdiv(M, BM) * tl.cdiv(N, BN)
    num_kb = tl.cdiv(K, BK)
    for tile in tl.range(pid, num_tiles, NUM_PROGRAMS, flatten=FLATTEN):
        g, off_m, off_n = _batched_tile(tile, M, N, BM, BN, GROUP_M)
        offs_m = off_m + tl.arange(0, BM)
        offs_n = off_n + tl.arange(0, BN)
        m_ok = offs_m < M
        n_ok = offs_n < N
        sfa_rows = sfa_ptr + g * stride_sfa_g + offs_m * stride_sfa_m
        if B_PER_ROW:
            sfb_cols = sfb_ptr + g * stride_sfb_g + offs_n * stride_sfb_n
        else:
            sfb_cols = sfb_ptr + g * stride_sfb_g + (off_n // 128) * stride_sfb_n  # BN divides 128
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kb in tl.range(0, num_kb, num_stages=NUM_STAGES):
            a = a_desc.load([g, off_m, kb * BK]).reshape(BM, BK)
            b = b_desc.load([g, off_n, kb * BK]).reshape(BN, BK).T
            partial = tl.dot(a, b)  # a fresh FP32 tile per 128-K block, promoted below
            acc = promote(acc, partial, sfa_rows, sfb_cols, kb, m_ok, n_ok, stride_sfa_k, stride_sfb_k, B_PER_ROW)
        _store_tile(acc, d_desc, c_desc, d_ptr, c_ptr, g, off_m, off_n, M, N, stride_dg, stride_dm, stride_cg,
                    stride_cm, BM, BN, HAS_C, D_TMA, C_TMA)
