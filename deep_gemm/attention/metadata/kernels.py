"""Device code of ``get_mqa_logits_metadata``: the per-SM split-K schedule of the contiguous-KV indexer logits
(layout and algorithm in ``reference.py``). No allocation and no config logic here (``launch.py``).

Maths. Q block b (rows b * BQ .. b * BQ + BQ - 1, the last row repeated past the end) spans KV tokens
[base_b, end_b): base_b = min of its rows' clipped ks rounded down to 4, end_b = max of their clipped ke, in
splits_b = ceil((end_b - base_b) / SPLIT_KV) splits; it costs SPLIT_COST per split plus SEGMENT_COST if it has any.
SM s starts at the cost target t_s = s * (C // S) + min(s, C % S) (C: the total cost), i.e. in the first block whose
inclusive cost prefix exceeds t_s. Because the prefixes of cost and work (splits) are non-decreasing, the block, the
prefixes before it and its work prefix come from order-free reductions over all blocks (a count and maxima over
the blocks whose cost prefix is <= t_s, a minimum over the others), so no search is needed.

Tiling. One program per SM s (grid S), each walking every Q block in chunks of CHUNK blocks, twice: once for the
totals C and W, once for its own two targets t_s and t_(s+1) (scalars, folded chunk by chunk). Program s also
writes the spans of the chunks c = s (mod S), and program 0 the padding word. Every word is written by exactly one
program (no atomics). The maths is 32-bit: the launcher runs the kernel only where the total cost is bounded below
2^31 (plan.kernel_fits), so it agrees with the reference's 64-bit maths, and no 64-bit division (a called
subroutine with a stack) is needed.
"""

import triton
import triton.language as tl

# Work prefix of "no block past the target": above any real prefix (the launcher bounds the total cost, and so the
# total work, by plan.MAX_TOTAL_COST < 2^31 - 1).
NO_BLOCK = tl.constexpr(2**31 - 1)


@triton.jit
def _block_spans(ks_ptr, ke_ptr, blocks, num_q, num_kv, BQ: tl.constexpr, SPLIT_KV: tl.constexpr):
    """(base, splits, valid) of Q blocks ``blocks`` (int32 [CHUNK]); splits 0 past the last block."""
    valid = blocks < tl.cdiv(num_q, BQ)
    rows = tl.minimum(blocks[:, None] * BQ + tl.arange(0, BQ)[None, :], num_q - 1)
    ks = tl.load(ks_ptr + rows, mask=valid[:, None], other=0)
    ke = tl.load(ke_ptr + rows, mask=valid[:, None], other=0)
    start = tl.min(tl.minimum(tl.maximum(ks, 0), num_kv), axis=1)
    end = tl.max(tl.minimum(tl.maximum(ke, 0), num_kv), axis=1)
    base = start // 4 * 4
    span = tl.maximum(end - base, 0)
    splits = span // SPLIT_KV + (span % SPLIT_KV > 0).to(tl.int32)  # (no overflow near 2^31 tokens)
    return base, tl.where(valid, splits, 0), valid


@triton.jit
def _fold(target, cost, work, valid, count, cost_before, work_before, work_after):
    """One chunk's blocks (inclusive prefixes ``cost``, ``work``) folded into a target's running reductions: the
    count of blocks whose cost prefix is <= target, the largest such prefixes, the smallest work prefix past it."""
    le = valid & (cost <= target)
    gt = valid & (cost > target)
    return (count + tl.sum(le.to(tl.int32), axis=0),
            tl.maximum(cost_before, tl.max(tl.where(le, cost, 0), axis=0)),
            tl.maximum(work_before, tl.max(tl.where(le, work, 0), axis=0)),
            tl.minimum(work_after, tl.min(tl.where(gt, work, NO_BLOCK), axis=0)))


@triton.jit
def _locate(target, total_cost, total_work, blocks, count_le, cost_before, work_before, work_after,
            SEGMENT: tl.constexpr, SPLIT: tl.constexpr):
    """(block, split offset, work coordinate) of a cost target: ``count_le`` blocks have a cost prefix <= target,
    the last of them with prefixes ``cost_before`` / ``work_before`` (0 if none), the next with work prefix
    ``work_after``; a target at the total cost is one past the end."""
    offset = tl.minimum((tl.maximum(target - cost_before, SEGMENT) - SEGMENT) // SPLIT, work_after - work_before - 1)
    tail = target == total_cost
    return (tl.where(tail, blocks, count_le), tl.where(tail, 0, offset),
            tl.where(tail, total_work, work_before + offset))


@triton.jit(do_not_specialize=["num_q", "num_kv", "num_sms"],
            do_not_specialize_on_alignment=["ks_ptr", "ke_ptr", "out_ptr"])
def _mqa_logits_metadata_kernel(
        ks_ptr, ke_ptr,  # int32 [num_q]: each query row's KV range
        out_ptr,  # int32 [span_word_offset(num_sms) + 2 * blocks]: the schedule's words
        num_q, num_kv, num_sms,
        BQ: tl.constexpr, SPLIT_KV: tl.constexpr, SEGMENT_COST: tl.constexpr, SPLIT_COST: tl.constexpr,
        SPAN_OFFSET_PAD: tl.constexpr, CHUNK: tl.constexpr):
    """Program s: SM s's start (q block, split offset) and split count, and the spans of the chunks c = s mod S.
    SPAN_OFFSET_PAD: whether 3 * num_sms is odd (the spans then start one padding word later)."""
    s = tl.program_id(0)
    num_blocks = tl.cdiv(num_q, BQ)
    span_at = 3 * num_sms.to(tl.int64) + (1 if SPAN_OFFSET_PAD else 0)
    lanes = tl.arange(0, CHUNK)

    total_cost = num_q * 0
    total_work = num_q * 0
    owner = num_sms * 0  # the program that writes this chunk's spans: chunk index mod num_sms, counted up
    for c0 in range(0, num_blocks, CHUNK):
        blocks = c0 + lanes
        base, splits, valid = _block_spans(ks_ptr, ke_ptr, blocks, num_q, num_kv, BQ, SPLIT_KV)
        total_work += tl.sum(splits, axis=0)
        total_cost += tl.sum(splits * SPLIT_COST + tl.where(splits > 0, SEGMENT_COST, 0), axis=0)
        mine = valid & (owner == s)
        tl.store(out_ptr + span_at + 2 * blocks.to(tl.int64), base, mask=mine)
        tl.store(out_ptr + span_at + 2 * blocks.to(tl.int64) + 1, splits, mask=mine)
        owner = tl.where(owner + 1 == num_sms, 0, owner + 1)

    # This SM's start target and the next one's (the end of this SM's share).
    target0 = s * (total_cost // num_sms) + tl.minimum(s, total_cost % num_sms)
    target1 = (s + 1) * (total_cost // num_sms) + tl.minimum(s + 1, total_cost % num_sms)
    zero = num_q * 0
    count0, cost_before0, work_before0, work_after0 = zero, zero, zero, zero + NO_BLOCK
    count1, cost_before1, work_before1, work_after1 = zero, zero, zero, zero + NO_BLOCK
    cost_prefix, work_prefix = zero, zero
    for c0 in range(0, num_blocks, CHUNK):
        blocks = c0 + lanes
        _, splits, valid = _block_spans(ks_ptr, ke_ptr, blocks, num_q, num_kv, BQ, SPLIT_KV)
        cost = cost_prefix + tl.cumsum(splits * SPLIT_COST + tl.where(splits > 0, SEGMENT_COST, 0), axis=0)
        work = work_prefix + tl.cumsum(splits, axis=0)
        count0, cost_before0, work_before0, work_after0 = _fold(target0, cost, work, valid, count0, cost_before0,
                                                                work_before0, work_after0)
        count1, cost_before1, work_before1, work_after1 = _fold(target1, cost, work, valid, count1, cost_before1,
                                                                work_before1, work_after1)
        cost_prefix = tl.max(tl.where(valid, cost, cost_prefix), axis=0)
        work_prefix = tl.max(tl.where(valid, work, work_prefix), axis=0)

    block, offset, coord = _locate(target0, total_cost, total_work, num_blocks, count0, cost_before0, work_before0,
                                   work_after0, SEGMENT_COST, SPLIT_COST)
    _, _, end_coord = _locate(target1, total_cost, total_work, num_blocks, count1, cost_before1, work_before1,
                              work_after1, SEGMENT_COST, SPLIT_COST)
    tl.store(out_ptr + 2 * s, block)
    tl.store(out_ptr + 2 * s + 1, offset)
    tl.store(out_ptr + 2 * num_sms + s, end_coord - coord)
    if SPAN_OFFSET_PAD:
        if s == 0:
            tl.store(out_ptr + 3 * num_sms, 0)
