"""The prefill MQA-logits kernel and the clean pass over its out-of-window columns (see the package docstring for
the score-tile orientation shared by every kernel)."""

import triton
import triton.language as tl

from .common import _head_weighted_sum, _load_f32_nc, _unpack_fp4  # noqa: F401  (kernel globals)


@triton.jit
def _prefill_block(k0, kv_desc, kv_ptr, kv_sf_ptr, q_t, weights, ks, ks_raw, ke, query_ok, out_rows, SK, max_k,
                   D: tl.constexpr, BQ: tl.constexpr, H: tl.constexpr, BLOCK_KV: tl.constexpr, USE_TMA: tl.constexpr,
                   IS_FP4: tl.constexpr, FP4_DOT_BF16: tl.constexpr, COMPRESSED: tl.constexpr,
                   FMA_RELU: tl.constexpr, MASKED: tl.constexpr):
    """Keys k0 .. k0 + BLOCK_KV against the program's BQ queries: logits stored. MASKED=False: the block lies inside
    every query's window, inside SK and (compressed) inside max_k columns, so no key or window test is made (the
    caller's interior range guarantees it)."""
    keys = k0 + tl.arange(0, BLOCK_KV)
    key_ok = keys < SK
    if IS_FP4:
        packed_kv = tl.load(kv_ptr + keys[:, None].to(tl.int64) * (D // 2) + tl.arange(0, D // 2)[None, :],
                            mask=key_ok[:, None], other=0)
        kv_sf = tl.load(kv_sf_ptr + keys, mask=key_ok, other=0)
        kv = _unpack_fp4(packed_kv, kv_sf, BLOCK_KV, D)
        if FP4_DOT_BF16:
            kv = kv.to(tl.bfloat16)
    elif USE_TMA:
        kv = kv_desc.load([k0, 0])
    else:
        kv = tl.load(kv_ptr + keys[:, None].to(tl.int64) * D + tl.arange(0, D)[None, :],
                     mask=key_ok[:, None], other=0.0)
    scores = tl.dot(kv, q_t)  # [BLOCK_KV, BQ * H], FP32
    logits = _head_weighted_sum(scores, weights, BLOCK_KV, BQ, H, FMA_RELU)  # (FMA_RELU: halved weights)
    if not IS_FP4:
        if MASKED:
            logits = logits * tl.load(kv_sf_ptr + keys, mask=key_ok, other=0.0)[:, None]
        else:  # (inside SK: no key test; sm_90a, H = 64: 297 -> 282 instructions per block, the same values)
            logits = logits * tl.load(kv_sf_ptr + keys)[:, None]
    if COMPRESSED:
        column = keys[:, None] - ks_raw[None, :]
    else:
        column = keys[:, None] + 0 * ks[None, :]
    if MASKED:
        inside = (keys[:, None] >= ks[None, :]) & (keys[:, None] < ke[None, :])
        logits = tl.where(inside, logits, float("-inf"))
        if COMPRESSED:
            mask = inside & (column < max_k)
        else:
            mask = key_ok[:, None] & query_ok[None, :]
        tl.store(out_rows[None, :] + column, logits.to(out_rows.dtype.element_ty), mask=mask)
    else:
        tl.store(out_rows[None, :] + column, logits.to(out_rows.dtype.element_ty))


@triton.jit
def _prefill_interior(in_lo, in_hi, kv_desc, kv_ptr, kv_sf_ptr, q_t, weights, ks_raw, out_ptr, q0, stride_out, SK,
                      D: tl.constexpr, BQ: tl.constexpr, H: tl.constexpr, BLOCK_KV: tl.constexpr,
                      NUM_STAGES: tl.constexpr, USE_TMA: tl.constexpr, IS_FP4: tl.constexpr,
                      FP4_DOT_BF16: tl.constexpr, COMPRESSED: tl.constexpr, FMA_RELU: tl.constexpr,
                      PTX: tl.constexpr):
    """The interior blocks [in_lo, in_hi) (inside every query's window, SK and max_k: no tests), with less live
    across the loop than ``_prefill_block`` in a loop (the LEAN_INTERIOR lever, the same values and stores):

    - the output address is one 64-bit base (row q0) plus an int32 offset per element instead of a 64-bit pointer
      per query row (the launcher takes this path only while (BQ - 1) * stride_out + SK fits in int32);
    - the key scales of the next block are loaded into registers during this one (loop-carried, through
      ``_load_f32_nc``) instead of the pipeliner's cp.async ring in shared memory (its wait, its barrier, the
      shared-memory reads and the ring's counters per block).

    At H = 64 under 128 registers this leaves the loop with fewer instructions per block and no local memory."""
    lanes = tl.arange(0, BLOCK_KV)
    out_base = out_ptr + q0.to(tl.int64) * stride_out
    row_off = tl.arange(0, BQ) * stride_out
    if COMPRESSED:
        row_off = row_off - ks_raw  # compressed column of key k in row r: k - ks_raw[r]
    if not IS_FP4:
        # (an empty range still loads: keys clamped into [0, SK), SK >= 1)
        first_keys = tl.minimum(tl.maximum(tl.minimum(in_lo, in_hi - BLOCK_KV), 0) + lanes, SK - 1)
        sf_next = _load_f32_nc(kv_sf_ptr + first_keys, PTX)
    for k0 in tl.range(in_lo, in_hi, BLOCK_KV, num_stages=NUM_STAGES):
        keys = k0 + lanes
        if IS_FP4:
            packed_kv = tl.load(kv_ptr + keys[:, None].to(tl.int64) * (D // 2) + tl.arange(0, D // 2)[None, :])
            kv = _unpack_fp4(packed_kv, tl.load(kv_sf_ptr + keys), BLOCK_KV, D)
            if FP4_DOT_BF16:
                kv = kv.to(tl.bfloat16)
        elif USE_TMA:
            kv = kv_desc.load([k0, 0])
        else:
            kv = tl.load(kv_ptr + keys[:, None].to(tl.int64) * D + tl.arange(0, D)[None, :])
        scores = tl.dot(kv, q_t)  # [BLOCK_KV, BQ * H], FP32
        logits = _head_weighted_sum(scores, weights, BLOCK_KV, BQ, H, FMA_RELU)
        if not IS_FP4:
            sf = sf_next
            # The next block's scales (the last block reloads its own: in_hi - BLOCK_KV >= k0 inside SK).
            sf_next = _load_f32_nc(kv_sf_ptr + tl.minimum(k0 + BLOCK_KV, in_hi - BLOCK_KV) + lanes, PTX)
            logits = logits * sf[:, None]
        tl.store(out_base + (keys[:, None] + row_off[None, :]), logits.to(out_ptr.dtype.element_ty))


@triton.jit(do_not_specialize=["S", "SK", "stride_w", "stride_out", "max_k", "num_q_blocks"],
            do_not_specialize_on_alignment=["q_ptr", "q_sf_ptr", "kv_ptr", "kv_sf_ptr", "w_ptr", "ks_ptr",
                                            "ke_ptr", "out_ptr"])
def _fp8_mqa_logits_kernel(
        q_desc, kv_desc,  # TMA descriptors over Q [S * H, D] and KV [SK, D] (FP8, USE_TMA only)
        q_ptr, q_sf_ptr,  # Q [S * H, D] FP8 or packed FP4 [S * H, D / 2] with int32 UE8M0 scales [S * H]
        kv_ptr, kv_sf_ptr,  # KV [SK, D] FP8 with FP32 scales [SK], or packed FP4 [SK, D / 2] with int32 [SK]
        w_ptr, ks_ptr, ke_ptr,  # weights [S, H] (row stride stride_w), int32 windows [S]
        out_ptr,  # logits [*, stride_out] (FP32 or BF16)
        S, SK, stride_w, stride_out, max_k, num_q_blocks,
        H: tl.constexpr, D: tl.constexpr, BQ: tl.constexpr, BLOCK_KV: tl.constexpr, NUM_STAGES: tl.constexpr,
        USE_TMA: tl.constexpr, IS_FP4: tl.constexpr, FP4_DOT_BF16: tl.constexpr, COMPRESSED: tl.constexpr,
        FMA_RELU: tl.constexpr = False, INTERIOR: tl.constexpr = False, LEAN_INTERIOR: tl.constexpr = False,
        PTX: tl.constexpr = False):
    """Program (p, c): the block of BQ = 128 / H queries num_q_blocks - 1 - p against part c of the KV blocks that
    meet some of its queries' windows (the parts split that range evenly, in BLOCK_KV steps, so short problems still
    fill the SMs; each output element is still written by one program).

    Queries are taken in reverse order: windows usually grow with the query index (causal prefill), so the longest
    programs start first and the short ones fill the tail.

    The per-block work is issue-bound, not tensor-bound (H200, Nsight Compute: ~300 instructions per warp per
    64-key block, the ALU pipe the busiest): FMA_RELU computes relu(s) * w as (s + |s|) * (w / 2) on the FMA pipe
    instead of a min/max on the ALU pipe (the same products: s + |s| is 2s or 0 exactly); INTERIOR runs the blocks
    inside every query's window in a second loop without key, window and column tests (causal prefill: all but the
    last one or two blocks of a part); LEAN_INTERIOR runs that loop as ``_prefill_interior`` (fewer registers live
    across it, no shared-memory ring for the key scales). PTX: not in the interpreter (inline PTX allowed)."""
    BN: tl.constexpr = BQ * H
    q_block = num_q_blocks - 1 - tl.program_id(0)
    q0 = q_block * BQ

    queries = q0 + tl.arange(0, BQ)
    query_ok = queries < S
    ks_raw = tl.load(ks_ptr + queries, mask=query_ok, other=0)  # compressed column 0 is key ks (even if < 0)
    ks = tl.maximum(ks_raw, 0)
    ke = tl.minimum(tl.load(ke_ptr + queries, mask=query_ok, other=0), SK)
    nonempty = query_ok & (ks < ke)
    lo = tl.min(tl.where(nonempty, ks, SK), axis=0)
    hi = tl.max(tl.where(nonempty, ke, 0), axis=0)
    lo = lo // 16 * 16  # 16-element aligned stores for the first block
    part = tl.cdiv(tl.cdiv(hi - lo, BLOCK_KV), tl.num_programs(1)) * BLOCK_KV
    lo = lo + tl.program_id(1) * part
    hi = tl.minimum(hi, lo + part)

    cols = tl.arange(0, BN)
    col_query = q0 + cols // H
    weights = tl.load(w_ptr + col_query.to(tl.int64) * stride_w + cols % H, mask=col_query < S,
                      other=0.0).to(tl.float32)
    if FMA_RELU:
        weights = weights * 0.5

    q_rows = q0 * H + cols
    if IS_FP4:
        packed = tl.load(q_ptr + q_rows[:, None].to(tl.int64) * (D // 2) + tl.arange(0, D // 2)[None, :],
                         mask=(q_rows < S * H)[:, None], other=0)
        q_sf = tl.load(q_sf_ptr + q_rows, mask=q_rows < S * H, other=0)
        q_tile = _unpack_fp4(packed, q_sf, BN, D)
        if FP4_DOT_BF16:
            q_tile = q_tile.to(tl.bfloat16)
    elif USE_TMA:
        q_tile = q_desc.load([q0 * H, 0])
    else:
        q_tile = tl.load(q_ptr + q_rows[:, None].to(tl.int64) * D + tl.arange(0, D)[None, :],
                         mask=(q_rows < S * H)[:, None], other=0.0)
    q_t = tl.trans(q_tile)

    out_rows = out_ptr + queries.to(tl.int64) * stride_out
    if INTERIOR:
        # Blocks [in_lo, in_hi) (on the part's BLOCK_KV grid from lo) lie inside every query's window; with a query
        # past S the range is empty and every block takes the tested loop.
        first = tl.max(tl.where(query_ok, ks, SK), axis=0)
        last = tl.minimum(tl.min(tl.where(query_ok, ke, 0), axis=0), hi)
        if COMPRESSED:
            last = tl.minimum(last, tl.min(ks_raw, axis=0) + max_k)
        in_lo = lo + tl.cdiv(tl.maximum(first - lo, 0), BLOCK_KV) * BLOCK_KV
        in_hi = lo + tl.maximum(last - lo, 0) // BLOCK_KV * BLOCK_KV
        if (in_hi <= in_lo) | (q0 + BQ > S):
            in_lo = hi
            in_hi = hi
        if LEAN_INTERIOR:
            _prefill_interior(in_lo, in_hi, kv_desc, kv_ptr, kv_sf_ptr, q_t, weights, ks_raw, out_ptr, q0,
                              stride_out, SK, D, BQ, H, BLOCK_KV, NUM_STAGES, USE_TMA, IS_FP4, FP4_DOT_BF16, COMPRESSED,
                              FMA_RELU, PTX)
        else:
            for k0 in tl.range(in_lo, in_hi, BLOCK_KV, num_stages=NUM_STAGES):
                _prefill_block(k0, kv_desc, kv_ptr, kv_sf_ptr, q_t, weights, ks, ks_raw, ke, query_ok, out_rows,
                               SK, max_k, D, BQ, H, BLOCK_KV, USE_TMA, IS_FP4, FP4_DOT_BF16, COMPRESSED, FMA_RELU,
                               False)
        # The other blocks, tested key by key: those before in_lo, then those from in_hi to hi.
        before = tl.cdiv(tl.minimum(in_lo, hi) - lo, BLOCK_KV)
        edge_blocks = before + tl.cdiv(hi - in_hi, BLOCK_KV)
        for j in tl.range(0, edge_blocks, num_stages=NUM_STAGES):
            k0 = tl.where(j < before, lo + j * BLOCK_KV, in_hi + (j - before) * BLOCK_KV)
            _prefill_block(k0, kv_desc, kv_ptr, kv_sf_ptr, q_t, weights, ks, ks_raw, ke, query_ok, out_rows, SK,
                           max_k, D, BQ, H, BLOCK_KV, USE_TMA, IS_FP4, FP4_DOT_BF16, COMPRESSED, FMA_RELU, True)
    else:
        for k0 in tl.range(lo, hi, BLOCK_KV, num_stages=NUM_STAGES):
            _prefill_block(k0, kv_desc, kv_ptr, kv_sf_ptr, q_t, weights, ks, ks_raw, ke, query_ok, out_rows, SK,
                           max_k, D, BQ, H, BLOCK_KV, USE_TMA, IS_FP4, FP4_DOT_BF16, COMPRESSED, FMA_RELU, True)


@triton.jit
def _fill_columns_masked(row_ptr, lo, hi, value, BLOCK: tl.constexpr):
    """``value`` at columns [lo, hi) of the row at ``row_ptr`` (nothing when hi <= lo), BLOCK columns per masked
    store."""
    for c0 in range(lo, hi, BLOCK):
        offs = c0 + tl.arange(0, BLOCK)
        tl.store(row_ptr + offs, value, mask=offs < hi)


@triton.jit
def _fill_columns(row_ptr, lo, hi, value, BLOCK: tl.constexpr, ALIGNED: tl.constexpr):
    """``value`` at columns [lo, hi) of the row at ``row_ptr`` (0 <= lo; nothing when hi <= lo). ALIGNED (the row
    starts 16-byte aligned): the whole BLOCK-aligned blocks inside the range are stored unmasked, so in 16-byte
    vectors (a masked store with an arbitrary bound stays per element); the partial blocks at either end masked."""
    if ALIGNED:
        if hi > lo:  # (lo >= 0 and hi > lo: no negative division below)
            body_lo = tl.minimum((lo + BLOCK - 1) // BLOCK * BLOCK, hi)
            body_hi = tl.maximum(hi // BLOCK * BLOCK, body_lo)
            _fill_columns_masked(row_ptr, lo, body_lo, value, BLOCK)
            for b in range(body_lo // BLOCK, body_hi // BLOCK):
                tl.store(row_ptr + b * BLOCK + tl.arange(0, BLOCK), value)
            _fill_columns_masked(row_ptr, body_hi, hi, value, BLOCK)
    else:
        _fill_columns_masked(row_ptr, lo, hi, value, BLOCK)


@triton.jit(do_not_specialize=["cols", "stride_out", "cols_per_program"],
            do_not_specialize_on_alignment=["out_ptr", "ks_ptr", "ke_ptr"])
def _clean_logits_kernel(out_ptr, ks_ptr, ke_ptr, cols, stride_out, cols_per_program, BLOCK: tl.constexpr,
                         ALIGNED: tl.constexpr):
    """-inf at every column c < cols of row r outside [ks[r], ke[r]). Program (r, p) covers columns
    [p * cols_per_program, (p + 1) * cols_per_program) and stores only its parts left of ks and right of ke, so the
    work is the out-of-window bytes plus one program per (row, part). ALIGNED: the launcher checked that ``out``
    and its row stride are 16-byte aligned (which the kernel is not specialised on, to keep one build)."""
    row = tl.program_id(0)
    c_begin = tl.program_id(1) * cols_per_program
    c_end = tl.minimum(c_begin + cols_per_program, cols)
    ks = tl.load(ks_ptr + row)
    ke = tl.load(ke_ptr + row)
    row_ptr = out_ptr + row.to(tl.int64) * stride_out
    if ALIGNED:
        row_ptr = tl.multiple_of(row_ptr, 16)
    neg_inf = tl.full([BLOCK], float("-inf"), tl.float32).to(out_ptr.dtype.element_ty)
    _fill_columns(row_ptr, c_begin, tl.minimum(ks, c_end), neg_inf, BLOCK, ALIGNED)
    _fill_columns(row_ptr, tl.maximum(ke, c_begin), c_end, neg_inf, BLOCK, ALIGNED)
