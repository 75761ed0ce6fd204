"""Triton kernels of the SM90 FP8 Mega MoE layer (``fp8_mega_moe``), its pre-dispatch, and the BF16 layer
(``bf16_mega_moe``), for one rank (the FP8 x FP4 layer's L1 / L2 are in ``fp8_fp4_kernels.py``, around these route,
scan, dispatch and combine kernels); and those ``fp8_mega_moe`` adds over several ranks (at the end of the file).

The layer runs as six launches on one stream, with no host synchronisation (so it is CUDA-graph capturable):

1. ``_route_kernel``: every routed (token, slot) takes a position in its expert's slice of the token pool (an atomic
   counter per local expert in the buffer's workspace);
2. ``_scan_kernel`` (one program): per-expert pool starts (slices padded to BLOCK_M), the prefix sum of M tiles per
   expert, the expert-receive statistics; it clears the counters again, so the workspace is zero between calls;
3. ``_dispatch_kernel``: copies each routed token's FP8 row and FP32 scales into the pool (``l1_acts`` /
   ``l1_acts_sf``), with its source (token, slot) and top-k weight;
4. ``_l1_kernel``: per (M tile, N tile) the block-scaled FP8 GEMM against the expert's L1 weights, then SwiGLU
   (with the clamp) times the top-k weight, quantised to FP8 with one FP32 scale per (row, 64 columns) into
   ``l2_acts`` / ``l2_acts_sf``;
5. ``_l2_kernel``: the block-scaled FP8 GEMM against L2, written in BF16 to the combine area at (slot, token);
6. ``_combine_kernel``: per token, the FP32 sum of its routed slots in slot order, rounded to BF16 into ``y``.

Numerics follow the CPU reference (``reference.py``): each 128-K block of FP8 products goes into a fresh FP32 tile,
promoted into the FP32 accumulator with its scales (DeepGEMM's promotion); scales divide with IEEE rounding.

L1 weights arrive with their rows interleaved in 8-row gate/up chunks (``transform_weights_for_mega_moe_sm90``): an
N tile of 128 rows holds 64 gate and the matching 64 up columns, so SwiGLU and the per-64-column quantisation finish
inside the tile. Their FP32 128x128 block scales stay in ``[gate | up]`` order: each column finds its own block.

The BF16 layer runs the same route / scan / dispatch (without scales) / combine launches; its L1 and L2
(``_bf16_l1_kernel`` / ``_bf16_l2_kernel``) are plain BF16 ``tl.dot`` GEMMs accumulating in FP32 over 64-wide K
steps, with the same SwiGLU epilogue (``_swiglu_rows``) and combine-area store (``_store_to_combine``); the
intermediate is rounded to BF16, as the reference rounds it.

Pool rows are grouped per expert, each expert's slice starting at a multiple of BLOCK_M; a tile's expert is the
number of experts whose tiles end at or before it (a vector compare over the per-expert tile ends). Rows past an
expert's count are padding: computed (their values are never read) but not stored.

Over several ranks (symmetric memory; ``launch.fp8_mega_moe_rank_phases`` runs them) route, L1 and combine are the
kernels above (route and combine counting every global expert); new are the count publication into every rank's
receive table, the rank-aware scan, the dispatch into peers' pools, L2 writing into the source ranks' combine areas,
and a cross-rank barrier with a bounded wait. None of the one-rank kernels changed for them (``_l2_acc`` is the L2
main loop both L2 kernels share; the one-rank builds are identical, see scripts/kernel_fingerprint.py).
"""

import triton
import triton.language as tl

from . import buffer as _buffer

_FP8_MAX = tl.constexpr(448.0)
_AMAX_FLOOR = tl.constexpr(1e-10)


@triton.jit(do_not_specialize=["num_slots", "first_expert", "num_local"],
            do_not_specialize_on_alignment=["topk_idx_ptr", "counts_ptr", "slot_pos_ptr"])
def _route_kernel(topk_idx_ptr, counts_ptr, slot_pos_ptr, num_slots, first_expert, num_local,
                  BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < num_slots
    expert = tl.load(topk_idx_ptr + offs, mask=ok, other=-1) - first_expert  # int64
    routed = ok & (expert >= 0) & (expert < num_local)
    local = tl.where(routed, expert, 0).to(tl.int32)
    pos = tl.atomic_add(counts_ptr + local, tl.full((BLOCK,), 1, tl.int32), mask=routed, sem="relaxed")
    tl.store(slot_pos_ptr + offs, tl.where(routed, pos, -1), mask=ok)


@triton.jit(do_not_specialize=["num_local"],
            do_not_specialize_on_alignment=["counts_ptr", "stats_ptr", "starts_ptr", "ends_ptr", "tile_end_ptr"])
def _scan_kernel(counts_ptr, stats_ptr, starts_ptr, ends_ptr, tile_end_ptr, num_local,
                 BLOCK_M: tl.constexpr, E_POW2: tl.constexpr, HAS_STATS: tl.constexpr):
    e = tl.arange(0, E_POW2)
    ok = e < num_local
    count = tl.load(counts_ptr + e, mask=ok, other=0)
    tiles = (count + BLOCK_M - 1) // BLOCK_M
    tile_end = tl.cumsum(tiles, axis=0)
    start = (tile_end - tiles) * BLOCK_M
    tl.store(starts_ptr + e, start, mask=ok)
    tl.store(ends_ptr + e, start + count, mask=ok)
    tl.store(tile_end_ptr + e, tile_end, mask=ok)
    if HAS_STATS:
        stats = tl.load(stats_ptr + e, mask=ok, other=0)
        tl.store(stats_ptr + e, stats + count, mask=ok)
    tl.store(counts_ptr + e, tl.zeros_like(count), mask=ok)  # the workspace is left zero for the next call


@triton.jit(do_not_specialize=["first_expert", "num_local", "hidden", "stride_x", "stride_pool", "sf_cols",
                               "stride_pool_sf"],
            do_not_specialize_on_alignment=["x_ptr", "x_sf_ptr", "topk_idx_ptr", "topk_w_ptr", "slot_pos_ptr",
                                            "starts_ptr", "pool_ptr", "pool_sf_ptr", "row_src_ptr", "row_w_ptr"])
def _dispatch_kernel(x_ptr, x_sf_ptr, topk_idx_ptr, topk_w_ptr, slot_pos_ptr, starts_ptr,
                     pool_ptr, pool_sf_ptr, row_src_ptr, row_w_ptr,
                     first_expert, num_local, hidden, stride_x, stride_pool, sf_cols, stride_pool_sf,
                     NUM_TOPK: tl.constexpr, K_POW2: tl.constexpr, BLOCK_H: tl.constexpr, SF_POW2: tl.constexpr,
                     HAS_SF: tl.constexpr):
    """One token: its routed slots' pool rows get the token's row (and, with ``HAS_SF``, its scales; BF16 tokens
    have none: the scale pointers are then unused), their source (token, slot) and top-k weight."""
    t = tl.program_id(0).to(tl.int64)
    s = tl.arange(0, K_POW2)
    s_ok = s < NUM_TOPK
    expert = tl.load(topk_idx_ptr + t * NUM_TOPK + s, mask=s_ok, other=-1) - first_expert
    routed = s_ok & (expert >= 0) & (expert < num_local)
    local = tl.where(routed, expert, 0).to(tl.int32)
    pos = tl.load(slot_pos_ptr + t * NUM_TOPK + s, mask=routed, other=0)
    row = (tl.load(starts_ptr + local, mask=routed, other=0) + pos).to(tl.int64)
    tl.store(row_src_ptr + row, (t * NUM_TOPK + s).to(tl.int32), mask=routed)
    tl.store(row_w_ptr + row, tl.load(topk_w_ptr + t * NUM_TOPK + s, mask=routed, other=0.0), mask=routed)
    if HAS_SF:
        c = tl.arange(0, SF_POW2)
        sf = tl.load(x_sf_ptr + t * sf_cols + c, mask=c < sf_cols, other=0.0)
        tl.store(pool_sf_ptr + c[None, :] * stride_pool_sf + row[:, None],
                 tl.broadcast_to(sf[None, :], (K_POW2, SF_POW2)), mask=routed[:, None] & (c[None, :] < sf_cols))
    for h0 in range(0, hidden, BLOCK_H):
        h = h0 + tl.arange(0, BLOCK_H)
        h_ok = h < hidden
        values = tl.load(x_ptr + t * stride_x + h, mask=h_ok)
        tl.store(pool_ptr + row[:, None] * stride_pool + h[None, :],
                 tl.broadcast_to(values[None, :], (K_POW2, BLOCK_H)), mask=routed[:, None] & h_ok[None, :])


@triton.jit
def _m_tile(tile, tile_end_ptr, ends_ptr, num_local, BM: tl.constexpr, E_POW2: tl.constexpr):
    """(whether the tile exists, its expert, its pool rows, the end of its expert's rows): the tile's expert is the
    count of experts whose tiles end at or before it."""
    e = tl.arange(0, E_POW2)
    tile_ends = tl.load(tile_end_ptr + e, mask=e < num_local, other=2147483647)
    total = tl.max(tl.where(e < num_local, tile_ends, 0), axis=0)
    expert = tl.sum((tile_ends <= tile).to(tl.int32), axis=0)
    exists = tile < total
    row_end = tl.load(ends_ptr + expert, mask=exists, other=0)
    return exists, expert, tile * BM + tl.arange(0, BM), row_end


@triton.jit
def _silu(gate, FAST_MATH: tl.constexpr):
    if FAST_MATH:
        return gate / (1.0 + tl.exp(-gate))
    return tl.math.div_rn(gate, 1.0 + tl.exp(-gate))


@triton.jit
def _gate_up(acc, clamp, BM: tl.constexpr, BN: tl.constexpr, HAS_CLAMP: tl.constexpr):
    """(``min(gate, c)``, ``clamp(up, -c, c)``) [BM, BN / 2] each, of an L1 tile of interleaved gate/up columns."""
    # SwiGLU: columns c * 16 + h * 8 + i (h = 0 gate, 1 up) -> gate / up [BM, BN / 2].
    pairs = tl.permute(tl.reshape(acc, (BM, BN // 16, 2, 8)), (0, 1, 3, 2))
    gate, up = tl.split(pairs)
    gate = tl.reshape(gate, (BM, BN // 2))
    up = tl.reshape(up, (BM, BN // 2))
    if HAS_CLAMP:
        gate = tl.minimum(gate, clamp)
        up = tl.minimum(tl.maximum(up, -clamp), clamp)
    return gate, up


@triton.jit
def _swiglu_rows(acc, rows, row_end, row_w_ptr, clamp, BM: tl.constexpr, BN: tl.constexpr, HAS_CLAMP: tl.constexpr,
                 FAST_MATH: tl.constexpr, WEIGHTED: tl.constexpr = True):
    """(``silu(min(gate, c)) * clamp(up, -c, c) * w`` [BM, BN / 2] FP32, whether each row is a real one) of an L1
    tile of interleaved gate/up columns; padding rows get weight 0. Not ``WEIGHTED`` (the shared experts): w = 1."""
    gate, up = _gate_up(acc, clamp, BM, BN, HAS_CLAMP)
    row_ok = rows < row_end
    if WEIGHTED:  # (the weight loaded first: the FP8 layer's L1, validated on the GPU, keeps its code)
        weight = tl.load(row_w_ptr + rows, mask=row_ok, other=0.0)
        act = _silu(gate, FAST_MATH) * up * weight[:, None]
    else:
        act = _silu(gate, FAST_MATH) * up
    return act, row_ok


@triton.jit
def _store_to_combine(acc, rows, row_end, row_src_ptr, combine_ptr, n0, hidden, num_tokens_cap, BN: tl.constexpr,
                      NUM_TOPK: tl.constexpr):
    """An L2 tile's real rows, rounded to BF16, to the combine area ``[k, T, H]`` at (slot, token)."""
    row_ok = rows < row_end
    src = tl.load(row_src_ptr + rows, mask=row_ok, other=0).to(tl.int64)
    token, slot = src // NUM_TOPK, src % NUM_TOPK
    dst = combine_ptr + ((slot * num_tokens_cap + token) * hidden)[:, None] + (n0 + tl.arange(0, BN))[None, :]
    tl.store(dst, acc.to(tl.bfloat16), mask=row_ok[:, None])


@triton.jit(do_not_specialize=["num_local", "inter", "hidden", "stride_sf_e", "stride_sf_n", "stride_pool_sf",
                               "stride_l2a", "stride_l2a_sf", "clamp"],
            do_not_specialize_on_alignment=["pool_sf_ptr", "l1_sf_ptr", "tile_end_ptr", "ends_ptr", "row_w_ptr",
                                            "l2a_ptr", "l2a_sf_ptr"])
def _l1_kernel(a_desc, b_desc, pool_sf_ptr, l1_sf_ptr, tile_end_ptr, ends_ptr, row_w_ptr, l2a_ptr, l2a_sf_ptr,
               num_local, inter, hidden, stride_sf_e, stride_sf_n, stride_pool_sf, stride_l2a, stride_l2a_sf, clamp,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, E_POW2: tl.constexpr,
               HAS_CLAMP: tl.constexpr, FAST_MATH: tl.constexpr, NUM_STAGES: tl.constexpr):
    tile_n = tl.program_id(0)
    exists, expert, rows, row_end = _m_tile(tl.program_id(1), tile_end_ptr, ends_ptr, num_local, BM, E_POW2)
    if not exists:
        return
    row0 = tl.program_id(1) * BM
    # Interleaved weight row n -> its [gate | up] row (for its scale block): chunk n // 8, gate if even.
    n = tile_n * BN + tl.arange(0, BN)
    chunk = n // 8
    unmixed = tl.where(chunk % 2 == 0, 0, inter) + (chunk // 2) * 8 + n % 8
    sfb_cols = l1_sf_ptr + expert * stride_sf_e + (unmixed // 128) * stride_sf_n
    sfa_rows = pool_sf_ptr + rows
    b_row = expert * (2 * inter) + tile_n * BN
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kb in tl.range(0, hidden // BK, num_stages=NUM_STAGES):
        a = a_desc.load([row0, kb * BK])
        b = b_desc.load([b_row, kb * BK])
        partial = tl.dot(a, b.T)
        sfa = tl.load(sfa_rows + kb * stride_pool_sf)
        sfb = tl.load(sfb_cols + kb)
        acc += partial * (sfa[:, None] * sfb[None, :])
    act, row_ok = _swiglu_rows(acc, rows, row_end, row_w_ptr, clamp, BM, BN, HAS_CLAMP, FAST_MATH)
    # One FP32 scale per (row, 64 columns): BN / 2 == 64 columns per tile.
    amax = tl.max(tl.abs(act), axis=1)
    scale = tl.math.div_rn(tl.maximum(amax, _AMAX_FLOOR), _FP8_MAX)
    inv = tl.math.div_rn(tl.full((BM,), 1.0, tl.float32), scale)
    q = (act * inv[:, None]).to(tl.float8e4nv)
    cols = tile_n * (BN // 2) + tl.arange(0, BN // 2)
    tl.store(l2a_ptr + rows[:, None].to(tl.int64) * stride_l2a + cols[None, :], q, mask=row_ok[:, None])
    tl.store(l2a_sf_ptr + tile_n * stride_l2a_sf + rows, scale, mask=row_ok)


@triton.jit
def _l2_acc(a_desc, b_desc, l2a_sf_ptr, l2_sf_ptr, expert, rows, row0, n0, inter, hidden, stride_sf_e, stride_sf_n,
            stride_l2a_sf, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, NUM_STAGES: tl.constexpr):
    """The FP32 L2 tile of pool rows ``rows`` (from ``row0``) and output columns from ``n0``: the block-scaled FP8
    GEMM of the intermediate against the expert's L2 rows."""
    sfb = l2_sf_ptr + expert * stride_sf_e + (n0 // 128) * stride_sf_n  # BN divides 128: one block row
    b_row = expert * hidden + n0
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kb in tl.range(0, inter // BK, num_stages=NUM_STAGES):
        a = a_desc.load([row0, kb * BK])
        b = b_desc.load([b_row, kb * BK])
        partial = tl.dot(a, b.T)
        sfa = tl.load(l2a_sf_ptr + kb * stride_l2a_sf + rows)
        acc += partial * (sfa[:, None] * tl.load(sfb + (kb * BK) // 128))
    return acc


@triton.jit(do_not_specialize=["num_local", "inter", "hidden", "stride_sf_e", "stride_sf_n", "stride_l2a_sf",
                               "num_tokens_cap"],
            do_not_specialize_on_alignment=["l2a_sf_ptr", "l2_sf_ptr", "tile_end_ptr", "ends_ptr", "row_src_ptr",
                                            "combine_ptr"])
def _l2_kernel(a_desc, b_desc, l2a_sf_ptr, l2_sf_ptr, tile_end_ptr, ends_ptr, row_src_ptr, combine_ptr,
               num_local, inter, hidden, stride_sf_e, stride_sf_n, stride_l2a_sf, num_tokens_cap,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, E_POW2: tl.constexpr, NUM_TOPK: tl.constexpr,
               NUM_STAGES: tl.constexpr):
    tile_n = tl.program_id(0)
    exists, expert, rows, row_end = _m_tile(tl.program_id(1), tile_end_ptr, ends_ptr, num_local, BM, E_POW2)
    if not exists:
        return
    n0 = tile_n * BN
    acc = _l2_acc(a_desc, b_desc, l2a_sf_ptr, l2_sf_ptr, expert, rows, tl.program_id(1) * BM, n0, inter, hidden,
                  stride_sf_e, stride_sf_n, stride_l2a_sf, BM, BN, BK, NUM_STAGES)
    _store_to_combine(acc, rows, row_end, row_src_ptr, combine_ptr, n0, hidden, num_tokens_cap, BN, NUM_TOPK)


@triton.jit(do_not_specialize=["num_local", "inter", "hidden", "stride_l2a", "dense_rows", "clamp"],
            do_not_specialize_on_alignment=["tile_end_ptr", "ends_ptr", "row_w_ptr", "l2a_ptr"])
def _bf16_l1_kernel(a_desc, b_desc, tile_end_ptr, ends_ptr, row_w_ptr, l2a_ptr, num_local, inter, hidden, stride_l2a,
                    dense_rows, clamp, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, E_POW2: tl.constexpr,
                    HAS_CLAMP: tl.constexpr, FAST_MATH: tl.constexpr, NUM_STAGES: tl.constexpr,
                    DENSE: tl.constexpr):
    """``bf16_mega_moe``'s L1: the BF16 GEMM of an (M tile, N tile) against its expert's interleaved L1 rows, SwiGLU
    times the top-k weight, rounded to BF16 into ``l2a`` (the reference rounds the intermediate to BF16 there).
    ``DENSE``: the shared experts instead, one matrix over the first ``dense_rows`` token rows, with weight 1 (the
    routing arrays are then unused)."""
    tile_n = tl.program_id(0)
    row0 = tl.program_id(1) * BM
    if DENSE:
        rows = row0 + tl.arange(0, BM)
        b_row = tile_n * BN
    else:
        exists, expert, rows, row_end = _m_tile(tl.program_id(1), tile_end_ptr, ends_ptr, num_local, BM, E_POW2)
        if not exists:
            return
        b_row = expert * (2 * inter) + tile_n * BN
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kb in tl.range(0, hidden // BK, num_stages=NUM_STAGES):
        a = a_desc.load([row0, kb * BK])
        b = b_desc.load([b_row, kb * BK])
        acc = tl.dot(a, b.T, acc)
    if DENSE:
        row_end = dense_rows
    act, row_ok = _swiglu_rows(acc, rows, row_end, row_w_ptr, clamp, BM, BN, HAS_CLAMP, FAST_MATH, not DENSE)
    cols = tile_n * (BN // 2) + tl.arange(0, BN // 2)
    tl.store(l2a_ptr + rows[:, None].to(tl.int64) * stride_l2a + cols[None, :], act.to(tl.bfloat16),
             mask=row_ok[:, None])


@triton.jit(do_not_specialize=["num_local", "inter", "hidden", "num_tokens_cap", "dense_rows"],
            do_not_specialize_on_alignment=["tile_end_ptr", "ends_ptr", "row_src_ptr", "combine_ptr"])
def _bf16_l2_kernel(a_desc, b_desc, tile_end_ptr, ends_ptr, row_src_ptr, combine_ptr, num_local, inter, hidden,
                    num_tokens_cap, dense_rows, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                    E_POW2: tl.constexpr, NUM_TOPK: tl.constexpr, NUM_STAGES: tl.constexpr, DENSE: tl.constexpr):
    """``bf16_mega_moe``'s L2: the BF16 GEMM of an (M tile, N tile) of the intermediate against its expert's L2
    rows, rounded to BF16 into the combine area. ``DENSE``: the shared experts' L2 over the first ``dense_rows``
    rows, into ``combine_ptr`` as a ``[dense_rows, hidden]`` plane."""
    tile_n = tl.program_id(0)
    row0 = tl.program_id(1) * BM
    n0 = tile_n * BN
    if DENSE:
        rows = row0 + tl.arange(0, BM)
        b_row = n0
    else:
        exists, expert, rows, row_end = _m_tile(tl.program_id(1), tile_end_ptr, ends_ptr, num_local, BM, E_POW2)
        if not exists:
            return
        b_row = expert * hidden + n0
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kb in tl.range(0, inter // BK, num_stages=NUM_STAGES):
        a = a_desc.load([row0, kb * BK])
        b = b_desc.load([b_row, kb * BK])
        acc = tl.dot(a, b.T, acc)
    if DENSE:
        dst = combine_ptr + (rows.to(tl.int64) * hidden)[:, None] + (n0 + tl.arange(0, BN))[None, :]
        tl.store(dst, acc.to(tl.bfloat16), mask=(rows < dense_rows)[:, None])
    else:
        _store_to_combine(acc, rows, row_end, row_src_ptr, combine_ptr, n0, hidden, num_tokens_cap, BN, NUM_TOPK)


@triton.jit
def _combine_sum(topk_idx_ptr, combine_ptr, t, h, h_ok, first_expert, num_local, hidden, num_tokens_cap,
                 NUM_TOPK: tl.constexpr, BLOCK_H: tl.constexpr):
    """Token t's FP32 sum over its routed slots, in slot order, of the combine area's columns h."""
    acc = tl.zeros((BLOCK_H,), dtype=tl.float32)
    for s in tl.static_range(NUM_TOPK):
        expert = tl.load(topk_idx_ptr + t * NUM_TOPK + s) - first_expert
        routed = (expert >= 0) & (expert < num_local)
        part = tl.load(combine_ptr + (s * num_tokens_cap + t) * hidden + h, mask=h_ok & routed, other=0.0)
        acc += part.to(tl.float32)
    return acc


@triton.jit(do_not_specialize=["first_expert", "num_local", "hidden", "num_tokens_cap", "stride_y"],
            do_not_specialize_on_alignment=["topk_idx_ptr", "combine_ptr", "y_ptr"])
def _combine_kernel(topk_idx_ptr, combine_ptr, y_ptr, first_expert, num_local, hidden, num_tokens_cap, stride_y,
                    NUM_TOPK: tl.constexpr, BLOCK_H: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    h_ok = h < hidden
    acc = _combine_sum(topk_idx_ptr, combine_ptr, t, h, h_ok, first_expert, num_local, hidden, num_tokens_cap,
                       NUM_TOPK, BLOCK_H)
    tl.store(y_ptr + t * stride_y + h, acc.to(tl.bfloat16), mask=h_ok)


@triton.jit(do_not_specialize=["first_expert", "num_local", "hidden", "num_tokens_cap", "stride_y"],
            do_not_specialize_on_alignment=["topk_idx_ptr", "combine_ptr", "shared_ptr", "y_ptr"])
def _combine_shared_kernel(topk_idx_ptr, combine_ptr, shared_ptr, y_ptr, first_expert, num_local, hidden,
                           num_tokens_cap, stride_y, NUM_TOPK: tl.constexpr, BLOCK_H: tl.constexpr):
    """``_combine_kernel`` plus the shared experts' BF16 output (``[T, hidden]``), added after the routed slots as
    the reference adds it."""
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    h_ok = h < hidden
    acc = _combine_sum(topk_idx_ptr, combine_ptr, t, h, h_ok, first_expert, num_local, hidden, num_tokens_cap,
                       NUM_TOPK, BLOCK_H)
    acc += tl.load(shared_ptr + t * hidden + h, mask=h_ok, other=0.0).to(tl.float32)
    tl.store(y_ptr + t * stride_y + h, acc.to(tl.bfloat16), mask=h_ok)


@triton.jit(do_not_specialize=["num_tokens", "hidden", "stride_x", "stride_idx", "stride_w", "routed_scale"],
            do_not_specialize_on_alignment=["x_ptr", "idx_ptr", "w_ptr", "bx_ptr", "bsf_ptr", "bidx_ptr",
                                            "bw_ptr"])
def _pre_dispatch_kernel(x_ptr, idx_ptr, w_ptr, bx_ptr, bsf_ptr, bidx_ptr, bw_ptr, num_tokens, hidden, stride_x,
                         stride_idx, stride_w, routed_scale, NUM_TOPK: tl.constexpr, K_POW2: tl.constexpr,
                         GROUPS_POW2: tl.constexpr, GROUP: tl.constexpr):
    """One buffer row: a token (< num_tokens) quantised to FP8 with one FP32 scale per GROUP channels and its
    top-k copied (weights times ``routed_scale``), or an empty slot (ids -1, weights 0)."""
    t = tl.program_id(0).to(tl.int64)
    s = tl.arange(0, K_POW2)
    s_ok = s < NUM_TOPK
    if t < num_tokens:
        idx = tl.load(idx_ptr + t * stride_idx + s, mask=s_ok, other=-1).to(tl.int64)
        w = tl.load(w_ptr + t * stride_w + s, mask=s_ok, other=0.0) * routed_scale
        g = tl.arange(0, GROUPS_POW2)
        c = tl.arange(0, GROUP)
        g_ok = g < hidden // GROUP
        offs = g[:, None] * GROUP + c[None, :]
        values = tl.load(x_ptr + t * stride_x + offs, mask=g_ok[:, None], other=0.0).to(tl.float32)
        amax = tl.max(tl.abs(values), axis=1)
        scale = tl.math.div_rn(tl.maximum(amax, _AMAX_FLOOR), _FP8_MAX)
        inv = tl.math.div_rn(tl.full((GROUPS_POW2,), 1.0, tl.float32), scale)
        tl.store(bx_ptr + t * hidden + offs, (values * inv[:, None]).to(tl.float8e4nv), mask=g_ok[:, None])
        tl.store(bsf_ptr + t * (hidden // GROUP) + g, scale, mask=g_ok)
    else:
        idx = tl.full((K_POW2,), -1, tl.int64)
        w = tl.zeros((K_POW2,), tl.float32)
    tl.store(bidx_ptr + t * NUM_TOPK + s, idx, mask=s_ok)
    tl.store(bw_ptr + t * NUM_TOPK + s, w, mask=s_ok)


# ---- several ranks (``fp8_mega_moe`` over symmetric memory) ---------------------------------------------------------
# Every rank's buffer has the same byte plan, so a peer's array is its base address (``table_ptr[rank]``, int64, the
# symmetric-memory handle's ``buffer_ptrs``) plus the array's offset in this rank's buffer. The protocol and the
# launch order are in launch.py (``fp8_mega_moe_rank_phases``).

# The sticky ``status`` word: bits 0..29 name peers a barrier gave up waiting for; this bit, a call whose routing
# needed more pool rows than the pool holds (a token routed twice to one expert).
STATUS_OVERFLOW = tl.constexpr(_buffer.STATUS_OVERFLOW)


@triton.jit
def _peer(table_ptr, rank, offset, dtype: tl.constexpr):
    """Rank ``rank``'s copy of the array at byte ``offset`` of the buffer, as a pointer to ``dtype`` (element-wise
    for a tensor of ranks)."""
    return (tl.load(table_ptr + rank) + offset).to(tl.pointer_type(dtype))


@triton.jit(do_not_specialize=["recv_off", "rank", "num_ranks", "num_experts"],
            do_not_specialize_on_alignment=["counts_ptr", "table_ptr"])
def _publish_counts_kernel(counts_ptr, table_ptr, recv_off, rank, num_ranks, num_experts, E_POW2: tl.constexpr):
    """This rank's slot count per global expert into row ``rank`` of every rank's ``[R, E]`` receive table; the
    counters are left zero for the next call."""
    e = tl.arange(0, E_POW2)
    ok = e < num_experts
    count = tl.load(counts_ptr + e, mask=ok, other=0)
    for d in range(num_ranks):
        tl.store(_peer(table_ptr, d, recv_off, tl.int32) + rank * num_experts + e, count, mask=ok)
    tl.store(counts_ptr + e, tl.zeros_like(count), mask=ok)


@triton.jit(do_not_specialize=["rank", "num_ranks", "num_local", "max_tiles"],
            do_not_specialize_on_alignment=["recv_ptr", "stats_ptr", "send_base_ptr", "starts_ptr", "ends_ptr",
                                            "tile_end_ptr", "overflow_ptr", "status_ptr"])
def _scan_ranks_kernel(recv_ptr, stats_ptr, send_base_ptr, starts_ptr, ends_ptr, tile_end_ptr, overflow_ptr,
                       status_ptr, rank, num_ranks, num_local, max_tiles, BLOCK_M: tl.constexpr,
                       R_POW2: tl.constexpr, L_POW2: tl.constexpr, HAS_STATS: tl.constexpr):
    """Every destination's pool layout from the receive table (each rank computes the same): expert slices padded to
    BLOCK_M, within an expert the source ranks in rank order. Stores where this rank's slots go (``send_base`` per
    global expert), its own experts' starts / ends / tile prefix sums and statistics. A layout needing more than
    ``max_tiles`` M tiles on any rank (the pool's capacity) empties every layout and flags the call."""
    d = tl.arange(0, R_POW2)[:, None]
    e = tl.arange(0, L_POW2)[None, :]
    ok = (d < num_ranks) & (e < num_local)
    g = d * num_local + e
    total = tl.zeros((R_POW2, L_POW2), tl.int32)
    before = tl.zeros((R_POW2, L_POW2), tl.int32)
    for r in range(num_ranks):
        count = tl.load(recv_ptr + r * num_ranks * num_local + g, mask=ok, other=0)
        before += tl.where(r < rank, count, 0)
        total += count
    tiles = (total + BLOCK_M - 1) // BLOCK_M
    tile_end = tl.cumsum(tiles, axis=1)
    overflow = tl.max(tl.max(tile_end, axis=1), axis=0) > max_tiles
    tile_end = tl.where(overflow, 0, tile_end)
    total = tl.where(overflow, 0, total)
    start = (tile_end - tiles) * BLOCK_M
    tl.store(send_base_ptr + g, start + before, mask=ok)
    mine = ok & (d == rank)
    e_row = tl.broadcast_to(e, (R_POW2, L_POW2))
    tl.store(starts_ptr + e_row, start, mask=mine)
    tl.store(ends_ptr + e_row, start + total, mask=mine)
    tl.store(tile_end_ptr + e_row, tile_end, mask=mine)
    if HAS_STATS:
        stats = tl.load(stats_ptr + e_row, mask=mine, other=0)
        tl.store(stats_ptr + e_row, stats + total, mask=mine)
    tl.store(overflow_ptr, overflow.to(tl.int32))
    if overflow:
        tl.atomic_or(status_ptr, STATUS_OVERFLOW)


@triton.jit(do_not_specialize=["rank", "num_local", "hidden", "sf_cols", "stride_pool_sf", "num_tokens_cap",
                               "pool_off", "pool_sf_off", "row_src_off", "row_w_off"],
            do_not_specialize_on_alignment=["x_ptr", "x_sf_ptr", "topk_idx_ptr", "topk_w_ptr", "slot_pos_ptr",
                                            "send_base_ptr", "overflow_ptr", "table_ptr", "combine_ptr"])
def _dispatch_ranks_kernel(x_ptr, x_sf_ptr, topk_idx_ptr, topk_w_ptr, slot_pos_ptr, send_base_ptr, overflow_ptr,
                           table_ptr, combine_ptr, pool_off, pool_sf_off, row_src_off, row_w_off, rank, num_local,
                           hidden, sf_cols, stride_pool_sf, num_tokens_cap, NUM_TOPK: tl.constexpr,
                           K_POW2: tl.constexpr, BLOCK_H: tl.constexpr, SF_POW2: tl.constexpr):
    """One token: each routed slot's FP8 row, scales, top-k weight and source ``(rank, token, slot)`` (one int32,
    ``(rank * num_tokens_cap + token) * k + slot``) into its expert's rank's pool row. When the scan flagged the
    call, the slots' combine rows become NaN instead (so the result shows it; nothing is sent)."""
    t = tl.program_id(0).to(tl.int64)
    s = tl.arange(0, K_POW2)
    s_ok = s < NUM_TOPK
    expert = tl.load(topk_idx_ptr + t * NUM_TOPK + s, mask=s_ok, other=-1)
    flagged = tl.load(overflow_ptr) != 0
    poisoned = s_ok & (expert >= 0) & flagged
    routed = s_ok & (expert >= 0) & (not flagged)
    g = tl.where(routed, expert, 0)
    dest = (g // num_local).to(tl.int32)
    pos = tl.load(slot_pos_ptr + t * NUM_TOPK + s, mask=routed, other=0)
    row = (tl.load(send_base_ptr + g, mask=routed, other=0) + pos).to(tl.int64)
    src = ((rank * num_tokens_cap + t) * NUM_TOPK + s).to(tl.int32)
    tl.store(_peer(table_ptr, dest, row_src_off, tl.int32) + row, src, mask=routed)
    weight = tl.load(topk_w_ptr + t * NUM_TOPK + s, mask=routed, other=0.0)
    tl.store(_peer(table_ptr, dest, row_w_off, tl.float32) + row, weight, mask=routed)
    c = tl.arange(0, SF_POW2)
    sf = tl.load(x_sf_ptr + t * sf_cols + c, mask=c < sf_cols, other=0.0)
    pool_sf = _peer(table_ptr, dest, pool_sf_off, tl.float32)
    tl.store(pool_sf[:, None] + c[None, :] * stride_pool_sf + row[:, None],
             tl.broadcast_to(sf[None, :], (K_POW2, SF_POW2)), mask=routed[:, None] & (c[None, :] < sf_cols))
    pool = _peer(table_ptr, dest, pool_off, tl.float8e4nv)
    nan = tl.full((K_POW2, BLOCK_H), float("nan"), tl.float32).to(tl.bfloat16)
    for h0 in range(0, hidden, BLOCK_H):
        h = h0 + tl.arange(0, BLOCK_H)
        h_ok = h < hidden
        values = tl.load(x_ptr + t * hidden + h, mask=h_ok)
        tl.store(pool[:, None] + row[:, None] * hidden + h[None, :],
                 tl.broadcast_to(values[None, :], (K_POW2, BLOCK_H)), mask=routed[:, None] & h_ok[None, :])
        tl.store(combine_ptr + ((s * num_tokens_cap + t) * hidden)[:, None] + h[None, :], nan,
                 mask=poisoned[:, None] & h_ok[None, :])


@triton.jit(do_not_specialize=["num_local", "inter", "hidden", "stride_sf_e", "stride_sf_n", "stride_l2a_sf",
                               "num_tokens_cap", "combine_off"],
            do_not_specialize_on_alignment=["l2a_sf_ptr", "l2_sf_ptr", "tile_end_ptr", "ends_ptr", "row_src_ptr",
                                            "table_ptr"])
def _l2_ranks_kernel(a_desc, b_desc, l2a_sf_ptr, l2_sf_ptr, tile_end_ptr, ends_ptr, row_src_ptr, table_ptr,
                     combine_off, num_local, inter, hidden, stride_sf_e, stride_sf_n, stride_l2a_sf, num_tokens_cap,
                     BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, E_POW2: tl.constexpr,
                     NUM_TOPK: tl.constexpr, NUM_STAGES: tl.constexpr):
    """``_l2_kernel`` whose epilogue writes each row into its source rank's combine area (``[k, T, H]`` at
    (slot, token)) through that rank's base address."""
    tile_n = tl.program_id(0)
    exists, expert, rows, row_end = _m_tile(tl.program_id(1), tile_end_ptr, ends_ptr, num_local, BM, E_POW2)
    if not exists:
        return
    n0 = tile_n * BN
    acc = _l2_acc(a_desc, b_desc, l2a_sf_ptr, l2_sf_ptr, expert, rows, tl.program_id(1) * BM, n0, inter, hidden,
                  stride_sf_e, stride_sf_n, stride_l2a_sf, BM, BN, BK, NUM_STAGES)
    row_ok = rows < row_end
    src = tl.load(row_src_ptr + rows, mask=row_ok, other=0).to(tl.int64)
    source_rank = (src // (num_tokens_cap * NUM_TOPK)).to(tl.int32)
    token, slot = (src // NUM_TOPK) % num_tokens_cap, src % NUM_TOPK
    dst = _peer(table_ptr, source_rank, combine_off, tl.bfloat16) + (slot * num_tokens_cap + token) * hidden + n0
    # Half the columns at a time: a 64-bit address per element of the whole tile does not fit the registers.
    left, right = tl.split(tl.permute(tl.reshape(acc.to(tl.bfloat16), (BM, 2, BN // 2)), (0, 2, 1)))
    cols = tl.arange(0, BN // 2)
    tl.store(dst[:, None] + cols[None, :], left, mask=row_ok[:, None])
    tl.store(dst[:, None] + (BN // 2 + cols)[None, :], right, mask=row_ok[:, None])


@triton.jit(do_not_specialize=["signals_off", "rank", "num_ranks", "max_spins"],
            do_not_specialize_on_alignment=["table_ptr", "signals_ptr", "epoch_ptr", "status_ptr"])
def _barrier_kernel(table_ptr, signals_off, signals_ptr, epoch_ptr, status_ptr, rank, num_ranks, max_spins,
                    R_POW2: tl.constexpr):
    """A cross-rank barrier (one program): this rank's barrier count goes up by one and is posted, with release
    semantics at system scope, into slot ``rank`` of every rank's signal pad; then it polls its own pad (acquire)
    until every rank posted at least that count, at most ``max_spins`` polls. Ranks that did not arrive in time
    are OR-ed into the sticky ``status`` word (the call's results are then void; launch.py's ``check_status``
    raises naming them) and the barrier returns: never an endless spin."""
    r = tl.arange(0, R_POW2)
    ok = r < num_ranks
    epoch = tl.load(epoch_ptr) + 1
    tl.store(epoch_ptr, epoch)
    posted = tl.zeros((R_POW2,), tl.int32) + epoch
    tl.atomic_xchg(_peer(table_ptr, r, signals_off, tl.int32) + rank, posted, mask=ok, sem="release", scope="sys")
    seen = tl.atomic_add(signals_ptr + r, tl.zeros((R_POW2,), tl.int32), mask=ok, sem="acquire", scope="sys")
    missing = ok & ((seen - epoch) < 0)
    spins = 0
    while (tl.max(missing.to(tl.int32), axis=0) != 0) & (spins < max_spins):
        seen = tl.atomic_add(signals_ptr + r, tl.zeros((R_POW2,), tl.int32), mask=ok, sem="acquire", scope="sys")
        missing = ok & ((seen - epoch) < 0)
        spins += 1
    late = tl.sum(tl.where(missing, 1 << r, 0), axis=0)
    if late != 0:
        tl.atomic_or(status_ptr, late)
