"""Paged decode MQA logits: the per-call kernel, the per-SM schedule (``get_paged_mqa_logits_metadata``) and the
persistent kernel over that schedule."""

import triton
import triton.language as tl

from .common import (  # noqa: F401  (kernel globals)
    SPLIT_KV, _head_weighted_sum, _load_f32_nc, _load_fp4_rows, _load_fp8_rows, _load_i32_nc, _row_logits, _unpack_fp4)


# ---- paged decode ----------------------------------------------------------------------------------------------

@triton.jit
def _load_q_columns(q_ptr, q_sf_ptr, w_ptr, b, next_n, cols, col_row, col_ok, stride_w, H: tl.constexpr,
                    BN: tl.constexpr, D: tl.constexpr, IS_FP4: tl.constexpr, FP4_DOT_BF16: tl.constexpr,
                    Q_ALIGN: tl.constexpr):
    """(the [D, BN] transposed query tile, the [BN] FP32 head weights) of a paged program's dot columns: column c is
    head c % H of query row col_row[c] of sequence b, zeros where not col_ok. Q_ALIGN: see ``_load_fp8_rows``."""
    q_rows = (b * next_n + col_row).to(tl.int64) * H + cols % H
    weights = tl.load(w_ptr + (b * next_n + col_row).to(tl.int64) * stride_w + cols % H, mask=col_ok,
                      other=0.0).to(tl.float32)
    if IS_FP4:
        q_tile = _load_fp4_rows(q_ptr, q_sf_ptr, q_rows, col_ok, BN, D, FP4_DOT_BF16)
    else:
        q_tile = _load_fp8_rows(q_ptr, q_rows, col_ok, D, Q_ALIGN)
    return tl.trans(q_tile), weights


@triton.jit
def _load_kv_page(kv_desc, kv_ptr, kv_sf_ptr, page, page_bytes, scale_at, tokens, BLOCK_KV: tl.constexpr,
                  D: tl.constexpr, IS_FP4: tl.constexpr, FP4_DOT_BF16: tl.constexpr, KV_TMA: tl.constexpr):
    """The [BLOCK_KV, D] keys of one KV-cache page (``page``, at byte ``page_bytes``; its scales at word
    ``scale_at``): FP4 values unpacked and scaled (BF16 with FP4_DOT_BF16), FP8 values as stored (their scales are
    the caller's), through the page's TMA descriptor with KV_TMA."""
    if IS_FP4:
        packed_kv = tl.load(kv_ptr + page_bytes + tokens[:, None] * (D // 2) + tl.arange(0, D // 2)[None, :])
        kv = _unpack_fp4(packed_kv, tl.load(kv_sf_ptr + scale_at), BLOCK_KV, D)
        if FP4_DOT_BF16:
            kv = kv.to(tl.bfloat16)
    elif KV_TMA:
        kv = tl.reshape(kv_desc.load([page, 0, 0]), [BLOCK_KV, D])
    else:
        kv = tl.load(kv_ptr + page_bytes + tokens[:, None] * D + tl.arange(0, D)[None, :])
    return kv


@triton.jit(do_not_specialize=["next_n", "max_ctx", "max_blocks", "num_blocks", "stride_bt", "stride_page",
                               "stride_w", "stride_out"],
            do_not_specialize_on_alignment=["q_ptr", "q_sf_ptr", "kv_ptr", "kv_sf_ptr", "w_ptr", "ctx_ptr", "bt_ptr",
                                            "out_ptr"])
def _fp8_paged_mqa_logits_kernel(
        q_ptr, q_sf_ptr,  # Q [B, next_n, H, D] FP8, or packed FP4 [B, next_n, H, D / 2] + int32 [B, next_n, H]
        kv_desc,  # TMA descriptor over the pages' values [num_blocks, BLOCK_KV, D] (FP8, KV_TMA only)
        kv_ptr,  # the cache's bytes as FP8 (or int8 for FP4) from its first page
        kv_sf_ptr,  # the same memory as FP32 (int32 for FP4): token t's scale of page p at
                    # (p * stride_page + BLOCK_KV * value_bytes) / 4 + t
        w_ptr, ctx_ptr, bt_ptr, out_ptr,
        next_n, max_ctx, max_blocks, num_blocks, stride_bt, stride_page, stride_w, stride_out,
        H: tl.constexpr, D: tl.constexpr, ROWS: tl.constexpr, BLOCK_KV: tl.constexpr, PAGES: tl.constexpr,
        NUM_STAGES: tl.constexpr, KV_TMA: tl.constexpr, IS_FP4: tl.constexpr, FP4_DOT_BF16: tl.constexpr,
        CTX_2D: tl.constexpr, CLEAN: tl.constexpr):
    """Program (b * row_groups + g, c): query rows [g * ROWS, (g + 1) * ROWS) of sequence b against its tokens
    [c * PAGES * BLOCK_KV, (c + 1) * PAGES * BLOCK_KV). The KV pages are read once for all ROWS rows; programs past
    the longest context of their rows compute nothing (and write -inf when CLEAN).

    Token t of row r is valid for t < ctx_r (ctx_r = context_lens[b, r], or with 1-D lengths
    context_lens[b] - next_n + r + 1) and t < max_blocks * BLOCK_KV (a page in the table)."""
    BN: tl.constexpr = ROWS * H
    VALUE_BYTES: tl.constexpr = D // 2 if IS_FP4 else D
    row_groups = tl.cdiv(next_n, ROWS)
    pid = tl.program_id(0)
    b = pid // row_groups
    r0 = (pid % row_groups) * ROWS
    t_begin = tl.program_id(1) * (PAGES * BLOCK_KV)
    t_stop = tl.minimum(t_begin + PAGES * BLOCK_KV, max_ctx)

    rows = r0 + tl.arange(0, ROWS)
    row_ok = rows < next_n
    if CTX_2D:
        ctx = tl.load(ctx_ptr + b * next_n + rows, mask=row_ok, other=0)
    else:
        ctx = tl.where(row_ok, tl.load(ctx_ptr + b) - next_n + rows + 1, 0)
    computed = tl.minimum(tl.max(ctx, axis=0), max_blocks * BLOCK_KV)
    p_begin = t_begin // BLOCK_KV
    p_end = tl.cdiv(tl.minimum(computed, t_stop), BLOCK_KV)
    out_rows = out_ptr + (b * next_n + rows).to(tl.int64) * stride_out

    if p_end > p_begin:
        cols = tl.arange(0, BN)
        col_row = r0 + cols // H
        col_ok = col_row < next_n
        q_t, weights = _load_q_columns(q_ptr, q_sf_ptr, w_ptr, b, next_n, cols, col_row, col_ok, stride_w, H, BN, D,
                                       IS_FP4, FP4_DOT_BF16, 1)
        tokens = tl.arange(0, BLOCK_KV)
        for p in tl.range(p_begin, p_end, num_stages=NUM_STAGES):
            page = tl.load(bt_ptr + b.to(tl.int64) * stride_bt + p)
            page = tl.minimum(tl.maximum(page, 0), num_blocks - 1)  # bad ids read a wrong page, never out of bounds
            page_bytes = page.to(tl.int64) * stride_page
            scale_at = (page_bytes + BLOCK_KV * VALUE_BYTES) // 4 + tokens
            kv = _load_kv_page(kv_desc, kv_ptr, kv_sf_ptr, page, page_bytes, scale_at, tokens, BLOCK_KV, D, IS_FP4,
                               FP4_DOT_BF16, KV_TMA)
            if IS_FP4:
                scores = tl.dot(kv, q_t)
            else:
                # The scale multiplies the key before the relu (the key is its FP8 value times its scale).
                scores = tl.dot(kv, q_t) * tl.load(kv_sf_ptr + scale_at)[:, None]
            logits = _head_weighted_sum(scores, weights, BLOCK_KV, ROWS, H)
            t = p * BLOCK_KV + tokens
            logits = tl.where(t[:, None] < ctx[None, :], logits, float("-inf"))
            tl.store(out_rows[None, :] + t[:, None], logits.to(out_ptr.dtype.element_ty),
                     mask=(t < max_ctx)[:, None] & row_ok[None, :])

    if CLEAN:
        # Tokens of this program's range that no page covered: -inf (their rows' contexts end before them).
        neg_inf = tl.full([BLOCK_KV, ROWS], float("-inf"), tl.float32).to(out_ptr.dtype.element_ty)
        for t0 in range(tl.maximum(p_end * BLOCK_KV, t_begin), t_stop, BLOCK_KV):
            t = t0 + tl.arange(0, BLOCK_KV)
            tl.store(out_rows[None, :] + t[:, None], neg_inf, mask=(t < t_stop)[:, None] & row_ok[None, :])


@triton.jit(do_not_specialize=["batch", "next_n", "num_sms", "atoms"],
            do_not_specialize_on_alignment=["ctx_ptr", "out_ptr"])
def _paged_schedule_kernel(ctx_ptr, out_ptr, batch, next_n, num_sms, atoms,
                           SMS_PAD: tl.constexpr, CHUNK: tl.constexpr):
    """DeepGEMM's per-SM split of the paged work list, in one program (no host sync).

    Work items are (atom, 256-token split) pairs, sequence by sequence; sequence b has
    ``atoms * ceil(ctx[b, -1] / 256)`` of them. With total = per * num_sms + extra items, SM s starts at item
    ``s * per + max(0, s - (num_sms - extra))``, inside the first sequence whose running item count exceeds it
    (clamped to the last sequence). Row s = (first atom, first split); the last row is (batch * atoms, 0)."""
    total = 0
    for c0 in range(0, batch, CHUNK):
        seq = c0 + tl.arange(0, CHUNK)
        length = tl.load(ctx_ptr + seq * next_n + next_n - 1, mask=seq < batch, other=0)
        total += tl.sum(tl.cdiv(tl.maximum(length, 0), SPLIT_KV), axis=0)
    total = total * atoms
    per = total // num_sms
    extra = total % num_sms
    sm = tl.arange(0, SMS_PAD)
    start = sm * per + tl.maximum(sm - (num_sms - extra), 0)

    count = tl.zeros([SMS_PAD], dtype=tl.int32)  # sequences whose items all lie before the SM's start
    before = tl.zeros([SMS_PAD], dtype=tl.int32)  # items before the start's sequence (excluding the last one)
    running = 0
    for c0 in range(0, batch, CHUNK):
        seq = c0 + tl.arange(0, CHUNK)
        in_batch = seq < batch
        length = tl.load(ctx_ptr + seq * next_n + next_n - 1, mask=in_batch, other=0)
        items = tl.cdiv(tl.maximum(length, 0), SPLIT_KV) * atoms
        ends = running + tl.cumsum(items, axis=0)
        running += tl.sum(items, axis=0)
        done = (ends[None, :] <= start[:, None]) & in_batch[None, :]
        count += tl.sum(done.to(tl.int32), axis=1)
        before = tl.maximum(before, tl.max(tl.where(done & (seq < batch - 1)[None, :], ends[None, :], 0), axis=1))
    seq = tl.maximum(tl.minimum(count, batch - 1), 0)
    length = tl.load(ctx_ptr + seq * next_n + next_n - 1, mask=seq < batch, other=0)
    splits = tl.cdiv(tl.maximum(length, 0), SPLIT_KV)
    offset = start - before
    divisor = tl.maximum(splits, 1)
    atom = tl.where(splits > 0, offset // divisor, 0)
    split = tl.where(splits > 0, offset % divisor, 0)
    on_sm = sm < num_sms
    tl.store(out_ptr + sm * 2, seq * atoms + atom, mask=on_sm)
    tl.store(out_ptr + sm * 2 + 1, split, mask=on_sm)
    last = sm == num_sms
    tl.store(out_ptr + sm * 2, tl.where(last, batch * atoms, 0), mask=last)
    tl.store(out_ptr + sm * 2 + 1, tl.zeros([SMS_PAD], dtype=tl.int32), mask=last)


@triton.jit
def _atom_splits(ctx_ptr, atom, ok, next_n, atoms, CTX_2D: tl.constexpr):
    """256-token splits of each atom's sequence (its last row's context), 0 where not ok."""
    seq = atom // atoms
    if CTX_2D:
        last = tl.load(ctx_ptr + seq * next_n + next_n - 1, mask=ok, other=0)
    else:
        last = tl.load(ctx_ptr + seq, mask=ok, other=0)
    return tl.where(ok, tl.cdiv(tl.maximum(last, 0), SPLIT_KV), 0)


@triton.jit
def _chunk_items(ctx_ptr, a0, a_stop, a_begin, c_begin, a_end, c_end, next_n, atoms, CTX_2D: tl.constexpr,
                 CHUNK: tl.constexpr):
    """(atoms, first split, items) of the CHUNK atoms from a0 of the schedule entry whose items run from (a_begin,
    c_begin) to (a_end, c_end): each atom's splits, less those before the entry's first split or from its end split
    on; 0 items past a_stop."""
    atom = a0 + tl.arange(0, CHUNK)
    ok = atom < a_stop
    splits = _atom_splits(ctx_ptr, atom, ok, next_n, atoms, CTX_2D)
    lo = tl.where(atom == a_begin, c_begin, 0)
    hi = tl.where(atom == a_end, c_end, splits)
    return atom, lo, tl.where(ok, tl.maximum(hi - lo, 0), 0)


@triton.jit
def _lane_of_entry(meta_ptr, ctx_ptr, sm, lane, per_sm, batch, next_n, atoms, CTX_2D: tl.constexpr,
                   CHUNK: tl.constexpr):
    """(first atom, first split, end atom, end split) of lane ``lane``'s part of schedule entry ``sm``: the entry's
    n items (atom, split) in order, lane j taking items [n * j // per_sm, n * (j + 1) // per_sm). The end is the
    next part's start (the entry's end for the last lane), in the schedule's own form, so consecutive lanes and
    entries tile the work list exactly. Two passes over the entry's atoms, CHUNK at a time."""
    a_begin = tl.load(meta_ptr + sm * 2)
    c_begin = tl.load(meta_ptr + sm * 2 + 1)
    a_end = tl.load(meta_ptr + sm * 2 + 2)
    c_end = tl.load(meta_ptr + sm * 2 + 3)
    a_stop = tl.minimum(tl.where(c_end > 0, a_end + 1, a_end), batch * atoms)
    items = 0
    for a0 in range(a_begin, a_stop, CHUNK):
        _, _, count = _chunk_items(ctx_ptr, a0, a_stop, a_begin, c_begin, a_end, c_end, next_n, atoms, CTX_2D, CHUNK)
        items += tl.sum(count, axis=0)
    first = items * lane // per_sm
    stop = items * (lane + 1) // per_sm
    la_begin, lc_begin, la_end, lc_end = a_end, c_end, a_end, c_end  # items past the end: the entry's end
    before = 0
    for a0 in range(a_begin, a_stop, CHUNK):
        atom, lo, count = _chunk_items(ctx_ptr, a0, a_stop, a_begin, c_begin, a_end, c_end, next_n, atoms, CTX_2D,
                                       CHUNK)
        ends = before + tl.cumsum(count, axis=0)
        starts = ends - count
        hit_first = (starts <= first) & (first < ends)
        hit_stop = (starts <= stop) & (stop < ends)
        la_begin = tl.where(tl.sum(hit_first.to(tl.int32), axis=0) > 0, tl.max(tl.where(hit_first, atom, -1), axis=0),
                            la_begin)
        lc_begin = tl.where(tl.sum(hit_first.to(tl.int32), axis=0) > 0,
                            tl.max(tl.where(hit_first, lo + first - starts, -1), axis=0), lc_begin)
        la_end = tl.where(tl.sum(hit_stop.to(tl.int32), axis=0) > 0, tl.max(tl.where(hit_stop, atom, -1), axis=0),
                          la_end)
        lc_end = tl.where(tl.sum(hit_stop.to(tl.int32), axis=0) > 0,
                          tl.max(tl.where(hit_stop, lo + stop - starts, -1), axis=0), lc_end)
        before += tl.sum(count, axis=0)
    return la_begin, lc_begin, la_end, lc_end


# ---- paged decode, persistent over the per-SM schedule -----------------------------------------------------------

@triton.jit(do_not_specialize=["batch", "next_n", "max_ctx", "max_blocks", "num_blocks", "stride_bt", "stride_page",
                               "stride_w", "stride_out", "per_sm"],
            do_not_specialize_on_alignment=["q_ptr", "q_sf_ptr", "kv_ptr", "kv_sf_ptr", "w_ptr", "ctx_ptr", "bt_ptr",
                                            "meta_ptr", "out_ptr"])
def _fp8_paged_mqa_logits_persistent_kernel(
        q_ptr, q_sf_ptr, kv_desc, kv_ptr, kv_sf_ptr,  # as in _fp8_paged_mqa_logits_kernel
        sf_desc,  # TMA descriptor over the pages' FP32 scales [num_blocks, BLOCK_KV] (LEAN_LOOP with KV_TMA only)
        w_ptr, ctx_ptr, bt_ptr,
        meta_ptr,  # the schedule of get_paged_mqa_logits_metadata: int32 [num_sms + 1, 2] (first atom, first split)
        out_ptr,
        batch, next_n, max_ctx, max_blocks, num_blocks, stride_bt, stride_page, stride_w, stride_out,
        per_sm,  # lanes per schedule entry (a runtime value: one binary whatever fits on an SM)
        H: tl.constexpr, D: tl.constexpr, ROWS: tl.constexpr, ATOM_ROWS: tl.constexpr, BLOCK_KV: tl.constexpr,
        NUM_STAGES: tl.constexpr, KV_TMA: tl.constexpr, IS_FP4: tl.constexpr,
        FP4_DOT_BF16: tl.constexpr, CTX_2D: tl.constexpr, CLEAN: tl.constexpr, TAIL_BLOCK: tl.constexpr,
        ATOM_CHUNK: tl.constexpr, Q_ALIGN: tl.constexpr, ROW_DOTS: tl.constexpr, LEAN_LOOP: tl.constexpr = False,
        REG_SCALES: tl.constexpr = False, PTX: tl.constexpr = False):
    """Program pid = s * per_sm + j: lane j of schedule entry s. Entry s covers the work items (atom, 256-token
    split) from row s of the schedule to row s + 1, which the metadata op made equal in number for every entry, so
    ragged contexts still give every program the same page count (+-1 per atom). An atom is ATOM_ROWS query rows of
    one sequence (DeepGEMM's: 2 when next_n >= 2, else 1), padded to ROWS for a 16-column dot. Lane j takes the
    j-th of per_sm equal contiguous parts of its entry's items (``_lane_of_entry``), so each lane switches atoms
    (reloading Q, draining its pipeline) a per_sm-th as often as if the lanes interleaved pages: one pipelined loop
    per atom part with the Q tile and weights of the atom in registers, page ids and pages prefetched
    NUM_STAGES - 1 iterations ahead.

    Pages per atom: those of its longest row's context (DeepGEMM counts the last row's; they agree when the last row
    is the longest, as lengths of consecutive draft tokens are; a sequence whose last row is empty gets no pages
    when the schedule skips it, as in DeepGEMM), at most max_blocks. With CLEAN, every token past
    those pages (up to max_ctx) is written -inf first, in a pass spread over all programs; tokens inside them past a
    row's context get -inf in the page loop. Each output element is written by one program: bitwise repeatable.

    ROW_DOTS (FP8, ROWS == 2): one [BLOCK_KV, H] dot per row of the atom instead of one [BLOCK_KV, 2 * H] dot, each
    reduced over its heads before the next is issued, so one row's FP32 scores are live at a time (sm_90a, H=64,
    BLOCK_KV=64, 4 warps: 32 accumulator registers per thread instead of 64). Q_ALIGN: see ``_load_fp8_rows``.

    LEAN_LOOP: fewer registers live across the page loop, the same bits out. With KV_TMA the page's scales come
    through their own TMA descriptor (one thread issues them; no per-thread scale addresses, predicates and
    cp.async); the page index reaches the block-table and output addresses zero-extended (it is >= 0), so LLVM does
    not widen the loop counter and the pipeline's stage bounds to 64 bits; the store's two bounds (max_ctx, row_ok)
    are one per-row limit. sm_90a, FP8 H=64 D=128 BLOCK_KV=64 two-row atoms, 7 stages, 128-register cap: no local
    memory at all instead of 2 loads and 2 stores per page per warp in the loop (the 128-column dot's 64 accumulators
    and 32 weights leave the rest of the loop ~30 registers).

    REG_SCALES (FP8; the prefill kernel's LEAN_INTERIOR ideas, ``_prefill_interior``): the next page's scales are
    loaded into registers during this page (its id read from the block table one page ahead, through
    ``_load_f32_nc``, loop-carried) instead of through a shared-memory ring (TMA or cp.async, its barrier or wait
    and the shared-memory reads); the scale address is the page times stride_page / 4 (the launcher takes this path
    only for a page stride that is a multiple of 4 bytes: no 64-bit divide); the block table is read two pages ahead
    the same way, so the scale load never waits on it; the store is LEAN_LOOP's (32-bit page index). The same
    products in the same order: the same bits. PTX: inline PTX allowed (not in the interpreter). With the row-pair
    default it takes fewer SASS instructions per page, at the cost of one local load per page under the 128-register
    cap."""
    BN: tl.constexpr = ROWS * H
    SF_TMA: tl.constexpr = LEAN_LOOP and KV_TMA and not IS_FP4 and not REG_SCALES
    tl.static_assert(not (REG_SCALES and IS_FP4), "REG_SCALES: FP8 pages (FP32 scales)")
    VALUE_BYTES: tl.constexpr = D // 2 if IS_FP4 else D
    SPLIT_PAGES: tl.constexpr = SPLIT_KV // BLOCK_KV
    atoms = tl.cdiv(next_n, ATOM_ROWS)
    pid = tl.program_id(0)
    sm = pid // per_sm
    lane = pid % per_sm
    row_offsets = tl.arange(0, ROWS)

    if CLEAN:
        # -inf past each atom's pages, atoms grid-strided over all programs (stores only: the page loop below, which
        # balances the work, starts right after).
        neg_inf = tl.full([TAIL_BLOCK, ROWS], float("-inf"), tl.float32).to(out_ptr.dtype.element_ty)
        for a in range(pid, batch * atoms, tl.num_programs(0)):
            b = a // atoms
            rows = (a % atoms) * ATOM_ROWS + row_offsets
            row_ok = (row_offsets < ATOM_ROWS) & (rows < next_n)
            if CTX_2D:
                ctx = tl.load(ctx_ptr + b * next_n + rows, mask=row_ok, other=0)
            else:
                ctx = tl.where(row_ok, tl.load(ctx_ptr + b) - next_n + rows + 1, 0)
            covered = tl.cdiv(tl.minimum(tl.maximum(tl.max(ctx, axis=0), 0), max_blocks * BLOCK_KV), BLOCK_KV)
            out_rows = out_ptr + (b * next_n + rows).to(tl.int64) * stride_out
            for t0 in range(covered * BLOCK_KV, max_ctx, TAIL_BLOCK):
                t = t0 + tl.arange(0, TAIL_BLOCK)
                tl.store(out_rows[None, :] + t[:, None], neg_inf, mask=(t < max_ctx)[:, None] & row_ok[None, :])

    a_begin, c_begin, a_end, c_end = _lane_of_entry(meta_ptr, ctx_ptr, sm, lane, per_sm, batch, next_n, atoms,
                                                    CTX_2D, ATOM_CHUNK)
    a_stop = tl.minimum(tl.where(c_end > 0, a_end + 1, a_end), batch * atoms)
    tokens = tl.arange(0, BLOCK_KV)
    cols = tl.arange(0, BN)
    for a in range(a_begin, a_stop):
        b = a // atoms
        r0 = (a % atoms) * ATOM_ROWS
        rows = r0 + row_offsets
        row_ok = (row_offsets < ATOM_ROWS) & (rows < next_n)
        if CTX_2D:
            ctx = tl.load(ctx_ptr + b * next_n + rows, mask=row_ok, other=0)
            last = tl.load(ctx_ptr + b * next_n + next_n - 1)
        else:
            last = tl.load(ctx_ptr + b)
            ctx = tl.where(row_ok, last - next_n + rows + 1, 0)
        splits = tl.cdiv(tl.maximum(last, 0), SPLIT_KV)
        computed = tl.minimum(tl.maximum(tl.max(ctx, axis=0), 0), max_blocks * BLOCK_KV)
        c_lo = tl.where(a == a_begin, c_begin, 0)
        c_hi = tl.where(a == a_end, c_end, splits)
        # The atom's last part also takes the pages of rows longer than the last row (see the docstring).
        t_hi = tl.where(c_hi >= splits, computed, tl.minimum(c_hi * SPLIT_KV, computed))
        p_lo = c_lo * SPLIT_PAGES
        p_hi = tl.cdiv(t_hi, BLOCK_KV)
        if p_hi > p_lo:
            if ROW_DOTS:
                tl.static_assert(ROWS == 2 and not IS_FP4, "ROW_DOTS: FP8 atoms of two rows")
                heads = tl.arange(0, H)
                row0 = (b * next_n + r0).to(tl.int64)
                second_ok = (heads < H) & (ATOM_ROWS > 1) & (r0 + 1 < next_n)
                q0_t = tl.trans(_load_fp8_rows(q_ptr, row0 * H + heads, heads < H, D, Q_ALIGN))
                q1_t = tl.trans(_load_fp8_rows(q_ptr, (row0 + 1) * H + heads, second_ok, D, Q_ALIGN))
                w0 = tl.load(w_ptr + row0 * stride_w + heads).to(tl.float32)
                w1 = tl.load(w_ptr + (row0 + 1) * stride_w + heads, mask=second_ok, other=0.0).to(tl.float32)
            else:
                col_row = r0 + cols // H
                col_ok = ((cols // H) < ATOM_ROWS) & (col_row < next_n)
                q_t, weights = _load_q_columns(q_ptr, q_sf_ptr, w_ptr, b, next_n, cols, col_row, col_ok, stride_w, H,
                                               BN, D, IS_FP4, FP4_DOT_BF16, Q_ALIGN)
            out_rows = out_ptr + (b * next_n + rows).to(tl.int64) * stride_out
            bt_row = bt_ptr + b.to(tl.int64) * stride_bt
            store_limit = tl.where(row_ok, max_ctx, 0)  # t < store_limit: t < max_ctx and the row exists (t >= 0)
            if REG_SCALES:
                # Page q's scales: the BLOCK_KV words after its values, at q * (stride_page / 4) + BLOCK_KV * D / 4.
                sf_page = stride_page // 4
                first = tl.minimum(tl.maximum(tl.load(bt_row + p_lo), 0), num_blocks - 1)
                sf_next = _load_f32_nc(kv_sf_ptr + (first.to(tl.int64) * sf_page + BLOCK_KV * D // 4) + tokens, PTX)
                # The block table read one page further ahead (loop-carried too), so the scale load does not wait
                # on it.
                id_next = _load_i32_nc(bt_row + tl.minimum(p_lo + 1, p_hi - 1), PTX)
            for p in tl.range(p_lo, p_hi, num_stages=NUM_STAGES):
                if REG_SCALES:
                    # The next page's scales (the last page reloads its own), issued before this page's dot.
                    sf = sf_next
                    page_next = tl.minimum(tl.maximum(id_next, 0), num_blocks - 1)
                    sf_at = page_next.to(tl.int64) * sf_page + BLOCK_KV * D // 4
                    sf_next = _load_f32_nc(kv_sf_ptr + sf_at + tokens, PTX)
                    p_ahead = tl.cast(tl.minimum(p + 2, p_hi - 1), tl.uint32).to(tl.int64)
                    id_next = _load_i32_nc(bt_row + p_ahead, PTX)
                if LEAN_LOOP:
                    page = tl.load(bt_row + tl.cast(p, tl.uint32).to(tl.int64))
                else:
                    page = tl.load(bt_row + p)
                page = tl.minimum(tl.maximum(page, 0), num_blocks - 1)  # bad ids read a wrong page, never OOB
                page_bytes = page.to(tl.int64) * stride_page
                scale_at = (page_bytes + BLOCK_KV * VALUE_BYTES) // 4 + tokens
                kv = _load_kv_page(kv_desc, kv_ptr, kv_sf_ptr, page, page_bytes, scale_at, tokens, BLOCK_KV, D,
                                   IS_FP4, FP4_DOT_BF16, KV_TMA)
                if IS_FP4:
                    logits = _head_weighted_sum(tl.dot(kv, q_t), weights, BLOCK_KV, ROWS, H)
                else:
                    # The key's (positive) scale commutes with the relu: applied once per token after the head
                    # sum, as DeepGEMM does, instead of once per (token, head).
                    if ROW_DOTS:
                        logits = tl.join(_row_logits(kv, q0_t, w0), _row_logits(kv, q1_t, w1))
                    else:
                        logits = _head_weighted_sum(tl.dot(kv, q_t), weights, BLOCK_KV, ROWS, H)
                    if REG_SCALES:
                        logits = logits * sf[:, None]
                    elif SF_TMA:
                        logits = logits * tl.reshape(sf_desc.load([page, 0]), [BLOCK_KV])[:, None]
                    else:
                        logits = logits * tl.load(kv_sf_ptr + scale_at)[:, None]
                t = p * BLOCK_KV + tokens
                logits = tl.where(t[:, None] < ctx[None, :], logits, float("-inf"))
                if LEAN_LOOP or REG_SCALES:
                    page_out = out_rows + tl.cast(p * BLOCK_KV, tl.uint32).to(tl.int64)
                    tl.store(page_out[None, :] + tokens[:, None], logits.to(out_ptr.dtype.element_ty),
                             mask=t[:, None] < store_limit[None, :])
                else:
                    tl.store(out_rows[None, :] + t[:, None], logits.to(out_ptr.dtype.element_ty),
                             mask=(t < max_ctx)[:, None] & row_ok[None, :])
