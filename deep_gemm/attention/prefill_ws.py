"""Warp-specialised prefill indexer kernel (Gluon, SM90): ``fp8_mqa_logits`` for FP8 Q/KV behind TMA descriptors,
chosen by ``PrefillConfig(ws=True)`` (attention/triton_launch.py). Same work items (query block x KV part), windows
and arithmetic as the ``tl.*`` kernel (kernels.py::_fp8_mqa_logits_kernel); what changes is who waits for what.

Status (H200, session 26; benchmarks/results/2026-12-03-h200-session26.md): correct on the GPU tests, not the
default: at its best (3 consumer warpgroups, fma_relu, 6 stages) it ran 1.8 % faster to 7 % slower than the tl.*
kernel's old default and slower than the current one (interior loop + 128-register cap). The register file holds one
CTA of it per SM, so its consumers get 168 registers and a fourth consumer spills; staging the weights in shared
memory (~32 registers) is the next lever.

Why: the ``tl.*`` kernel issues a block's wgmma, waits for it, then runs the head reduction in the same warps, so a
program's tensor core idles during its epilogue and overlap only comes from the ~3 programs sharing an SM. Here the
loads and the MMAs/epilogues live in different warps (DeepGEMM's structure for this op, written afresh):

  producer    1 warp: per work item, TMA-loads the item's Q tile [BQ * H, D] into one of two Q buffers, then the KV
              blocks [BLOCK_KV, D] of the item's range, in order, into a ring of STAGES buffers (``ready``/``empty``
              mbarriers per buffer). Rows past SK (or past S * H for Q) arrive as zeros.
  consumers   CONSUMERS warpgroups (the default partition is consumer 0). KV blocks are dealt round-robin over the
              whole walk (block g of the CTA to consumer g % CONSUMERS, across item boundaries): wait ``ready``,
              async wgmma KV [64, D] x Q^T [D, 128] into an FP32 [64, 128] tile, load the block's 64 key scales while
              it runs, wait, release the stage, then relu * weights, sum over each query's H heads, times the key
              scale, window mask, store. While one consumer reduces, another's wgmma runs.

Persistent: the register file holds one CTA per SM (Triton gives a warp-specialised kernel the whole file), so a
CTA per work item would expose every item's start (Q load, first KV load) and end; instead CTA p walks items p, then
2G - 1 - p, 2G + p, ... (G CTAs; a snake over the items in order, which puts the longest items, the last query
blocks of a causal prefill, first, and evens out the rounds' cost), and the producer runs ahead into the next item
while the consumers finish the current one (Q is double-buffered). Items whose windows are empty are skipped by
every partition alike (no Q load, no barrier use).

Each output element is written by exactly one warpgroup with the ``tl.*`` kernel's ops in its order (same MMA
layout, same reshape/sum, same scale and cast): the ``tl.*`` kernel's bits, and bitwise repeatable. The key scales
are read by the consumers from global memory (64 floats per block, issued before the wgmma wait so their latency
hides behind the MMA) rather than staged by TMA: a 1-D descriptor would add an alignment requirement on kv_sf for
256 bytes per block.

Ring phases: the consumer of use u of a buffer waits for parity (u // depth) & 1. That is sound only if the
buffer's previous use was waited for by the same waiter already (else a barrier two phases behind passes the wait),
so STAGES must be a multiple of CONSUMERS (the previous use of a KV stage is then the same consumer's; the launcher
guarantees it); every consumer waits for every Q buffer use.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, warpgroup_mma,
                                                              warpgroup_mma_wait)

from .._internals.gluon import tma_load

# Key rows of one wgmma (M per warpgroup): the block each consumer takes.
WG_ROWS = gl.constexpr(64)
# Q buffers: the producer loads the next item's Q tile while the consumers finish the current item.
Q_BUFFERS = gl.constexpr(2)


@gluon.jit
def _walk_item(r, pid, G):
    """Work item of round r of CTA pid (G CTAs): a snake over the items, forwards on even rounds, backwards on odd
    ones, so the CTAs that took the longest items of one round take the shortest of the next."""
    return r * G + gl.where(r % 2 == 0, pid, G - 1 - pid)


@gluon.jit
def _kv_range(item, ks_ptr, ke_ptr, S, SK, num_q_blocks, splits, BQ: gl.constexpr, BLOCK_KV: gl.constexpr,
              VEC: gl.constexpr):
    """(first query, lo, number of BLOCK_KV blocks from lo) of work item ``item`` = (query block, KV part): the
    tl.* kernel's program (num_q_blocks - 1 - item // splits, item % splits), computed the same way in every
    partition (a handful of scalar loads)."""
    q0 = (num_q_blocks - 1 - item // splits) * BQ  # reverse order: causal windows grow with the query
    queries = q0 + gl.arange(0, BQ, layout=VEC)
    query_ok = queries < S
    ks = gl.maximum(gl.load(ks_ptr + queries, mask=query_ok, other=0), 0)
    ke = gl.minimum(gl.load(ke_ptr + queries, mask=query_ok, other=0), SK)
    nonempty = query_ok & (ks < ke)
    lo = gl.min(gl.where(nonempty, ks, SK), axis=0)
    hi = gl.max(gl.where(nonempty, ke, 0), axis=0)
    lo = lo // 16 * 16  # 16-element aligned stores for the first block
    part = gl.cdiv(gl.cdiv(hi - lo, BLOCK_KV), splits) * BLOCK_KV
    lo = lo + (item % splits) * part
    hi = gl.minimum(hi, lo + part)
    blocks = gl.where(hi > lo, gl.cdiv(hi - lo, BLOCK_KV), 0)
    return q0, lo, blocks


@gluon.jit
def _producer(q_desc, kv_desc, q_bufs, kv_bufs, q_ready, q_empty, ready, empty, ks_ptr, ke_ptr, S, SK, num_q_blocks,
              splits, H: gl.constexpr, BQ: gl.constexpr, BLOCK_KV: gl.constexpr, STAGES: gl.constexpr):
    VEC: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
    pid = gl.program_id(0)
    G = gl.num_programs(0)
    num_items = num_q_blocks * splits
    base = 0  # KV blocks loaded so far (over the walk: their ring positions)
    uses = 0  # Q tiles loaded so far
    for r in range(gl.cdiv(num_items, G)):
        item = _walk_item(r, pid, G)
        if item < num_items:
            q0, lo, blocks = _kv_range(item, ks_ptr, ke_ptr, S, SK, num_q_blocks, splits, BQ, BLOCK_KV, VEC)
            if blocks > 0:
                qb = uses % Q_BUFFERS
                # A fresh barrier counts as having completed the phase before phase 0: the first pass is free.
                mbarrier.wait(q_empty.index(qb), ((uses // Q_BUFFERS) & 1) ^ 1)
                # (TMA counts a box's full bytes on the barrier, also where it reads past the tensor and zero-fills)
                mbarrier.expect(q_ready.index(qb), q_desc.block_type.nbytes)
                tma_load(q_desc, [q0 * H, 0], q_ready.index(qb), q_bufs.index(qb))
                for j in range(blocks):
                    g = base + j
                    stage = g % STAGES
                    mbarrier.wait(empty.index(stage), ((g // STAGES) & 1) ^ 1)
                    bar = ready.index(stage)
                    mbarrier.expect(bar, kv_desc.block_type.nbytes)
                    tma_load(kv_desc, [lo + j * BLOCK_KV, 0], bar, kv_bufs.index(stage))
                base += blocks
                uses += 1


@gluon.jit
def _consumer(q_bufs, kv_bufs, q_ready, q_empty, ready, empty, kv_sf_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr, S, SK,
              stride_w, stride_out, max_k, num_q_blocks, splits,
              H: gl.constexpr, BQ: gl.constexpr, BLOCK_KV: gl.constexpr, STAGES: gl.constexpr,
              CONSUMERS: gl.constexpr, COMPRESSED: gl.constexpr, FMA_RELU: gl.constexpr, WG: gl.constexpr):
    BN: gl.constexpr = BQ * H
    # The tl.* kernel's accumulator layout at 4 warps (TTGIR: instrShape [16, 128, 32], warps [4, 1]), so the
    # reshape below infers the same linear layout and the head sum adds in the same order.
    MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 32])
    VEC: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    # The reduced [BLOCK_KV, BQ] tile's layout (keys on dim 0, queries on dim 1) is whatever the reshape infers;
    # one reduction of zeros outside the loops names it for the key and query vectors.
    probe = gl.sum(gl.reshape(gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA), [WG_ROWS, BQ, H]), axis=2)
    OUT: gl.constexpr = probe.type.layout
    KEYS: gl.constexpr = gl.SliceLayout(1, OUT)
    QUERIES: gl.constexpr = gl.SliceLayout(0, OUT)
    cols = gl.arange(0, BN, layout=gl.SliceLayout(0, MMA))
    rows = gl.arange(0, WG_ROWS, layout=KEYS)
    zero = gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA)
    pid = gl.program_id(0)
    G = gl.num_programs(0)
    num_items = num_q_blocks * splits
    base = 0  # KV blocks of the CTA's walk before this item (block g goes to consumer g % CONSUMERS)
    uses = 0  # Q tiles used so far
    for r in range(gl.cdiv(num_items, G)):
        item = _walk_item(r, pid, G)
        if item < num_items:
            q0, lo, blocks = _kv_range(item, ks_ptr, ke_ptr, S, SK, num_q_blocks, splits, BQ, BLOCK_KV, VEC)
            if blocks > 0:
                col_query = q0 + cols // H
                weights = gl.load(w_ptr + col_query.to(gl.int64) * stride_w + cols % H, mask=col_query < S,
                                  other=0.0).to(gl.float32)
                if FMA_RELU:  # (s + |s|) * w / 2 == max(s, 0) * w exactly, on the FMA pipe
                    weights = weights * 0.5
                w_2d = gl.expand_dims(weights, 0)
                queries = q0 + gl.arange(0, BQ, layout=QUERIES)
                query_ok = queries < S
                ks_raw = gl.load(ks_ptr + queries, mask=query_ok, other=0)  # compressed column 0 is key ks (< 0 too)
                ks = gl.maximum(ks_raw, 0)
                ke = gl.minimum(gl.load(ke_ptr + queries, mask=query_ok, other=0), SK)
                # Blocks wholly inside every query's window (and inside SK and, compressed, max_k columns) are
                # stored without per-element tests (the tl.* kernel's INTERIOR range, here a uniform branch).
                first = gl.max(gl.where(query_ok, ks, SK), axis=0)
                last = gl.min(gl.where(query_ok, ke, 0), axis=0)
                if COMPRESSED:
                    last = gl.minimum(last, gl.min(ks_raw, axis=0) + max_k)
                all_queries = q0 + BQ <= S
                out_rows = gl.expand_dims(out_ptr + queries.to(gl.int64) * stride_out, 0)
                ks_2d = gl.expand_dims(ks, 0)
                ke_2d = gl.expand_dims(ke, 0)
                ks_raw_2d = gl.expand_dims(ks_raw, 0)
                query_ok_2d = gl.expand_dims(query_ok, 0)
                qb = uses % Q_BUFFERS
                mbarrier.wait(q_ready.index(qb), (uses // Q_BUFFERS) & 1)
                q_t = q_bufs.index(qb).permute((1, 0))  # [D, BQ * H], K-major: wgmma's B
                for j in range((WG + CONSUMERS - base % CONSUMERS) % CONSUMERS, blocks, CONSUMERS):
                    g = base + j
                    stage = g % STAGES
                    k0 = lo + j * BLOCK_KV
                    mbarrier.wait(ready.index(stage), (g // STAGES) & 1)
                    scores = warpgroup_mma(kv_bufs.index(stage), q_t, zero, use_acc=False, is_async=True)
                    keys = k0 + rows
                    key_ok = keys < SK
                    kv_sf = gl.load(kv_sf_ptr + keys, mask=key_ok, other=0.0)  # in flight while the wgmma runs
                    scores = warpgroup_mma_wait(num_outstanding=0, deps=(scores,))
                    mbarrier.arrive(empty.index(stage), count=1)  # the stage is read: the producer may refill it
                    if FMA_RELU:
                        weighted = (scores + gl.abs(scores)) * w_2d
                    else:
                        weighted = gl.maximum(scores, 0.0) * w_2d
                    logits = gl.sum(gl.reshape(weighted, [WG_ROWS, BQ, H]), axis=2)
                    logits = logits * gl.expand_dims(kv_sf, 1)
                    keys_2d = gl.expand_dims(keys, 1)
                    if COMPRESSED:
                        column = keys_2d - ks_raw_2d
                    else:
                        column = keys_2d + 0 * ks_2d
                    ptrs = out_rows + column
                    if (k0 >= first) & (k0 + BLOCK_KV <= last) & all_queries:
                        gl.store(ptrs, logits.to(out_ptr.dtype.element_ty))
                    else:
                        inside = (keys_2d >= ks_2d) & (keys_2d < ke_2d)
                        logits = gl.where(inside, logits, float("-inf"))
                        if COMPRESSED:
                            mask = inside & (column < max_k)
                        else:
                            mask = gl.expand_dims(key_ok, 1) & query_ok_2d
                        gl.store(ptrs, logits.to(out_ptr.dtype.element_ty), mask=mask)
                # Every consumer releases every Q tile (q_empty counts CONSUMERS arrivals) after its last wgmma.
                mbarrier.arrive(q_empty.index(qb), count=1)
                base += blocks
                uses += 1


@gluon.jit(do_not_specialize=["S", "SK", "stride_w", "stride_out", "max_k", "num_q_blocks", "splits"],
           do_not_specialize_on_alignment=["kv_sf_ptr", "w_ptr", "ks_ptr", "ke_ptr", "out_ptr"])
def _fp8_mqa_logits_ws_kernel(
        q_desc,  # Q [S * H, D] FP8, block [BQ * H, D]
        kv_desc,  # KV [SK, D] FP8, block [BLOCK_KV, D]
        kv_sf_ptr, w_ptr, ks_ptr, ke_ptr,  # FP32 key scales [SK], weights [S, H] (row stride stride_w), windows [S]
        out_ptr,  # logits [*, stride_out] (FP32 or BF16)
        S, SK, stride_w, stride_out, max_k, num_q_blocks,
        splits,  # KV parts per query block (the tl.* kernel's grid axis 1): work items = num_q_blocks * splits
        H: gl.constexpr, BQ: gl.constexpr, BLOCK_KV: gl.constexpr, STAGES: gl.constexpr, CONSUMERS: gl.constexpr,
        COMPRESSED: gl.constexpr, FMA_RELU: gl.constexpr, CONSUMER_REGS: gl.constexpr,
        PRODUCER_REGS: gl.constexpr):
    """CTA p of G walks the work items as ``_walk_item`` orders them (see the module docstring)."""
    gl.static_assert(BLOCK_KV == WG_ROWS, "one 64-row wgmma per consumer and block")
    gl.static_assert(BQ * H == 128, "128 (query, head) columns")
    gl.static_assert(STAGES % CONSUMERS == 0, "ring phases: a stage's previous use is the same consumer's")
    gl.static_assert(CONSUMERS >= 2 and CONSUMERS <= 4, "2 to 4 consumer warpgroups")
    q_bufs = gl.allocate_shared_memory(q_desc.dtype, [Q_BUFFERS] + q_desc.block_type.shape, q_desc.layout)
    kv_bufs = gl.allocate_shared_memory(kv_desc.dtype, [STAGES] + kv_desc.block_type.shape, kv_desc.layout)
    q_ready = gl.allocate_shared_memory(gl.int64, [Q_BUFFERS, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [Q_BUFFERS, 1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(Q_BUFFERS):
        mbarrier.init(q_ready.index(i), count=1)
        mbarrier.init(q_empty.index(i), count=CONSUMERS)
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)  # one consumer per use of a stage
    fence_async_shared()
    # (The partition lists are written out per consumer count: a JIT function cannot be bound to a name here, and
    # Gluon 3.6 rejects argument tuples built from a shared one, e.g. `shared + (0,)`: tried in session 26.)
    if CONSUMERS == 2:
        gl.warp_specialize([
            (_consumer, (q_bufs, kv_bufs, q_ready, q_empty, ready, empty, kv_sf_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr,
                         S, SK, stride_w, stride_out, max_k, num_q_blocks, splits, H, BQ, BLOCK_KV, STAGES, CONSUMERS,
                         COMPRESSED, FMA_RELU, 0)),
            (_consumer, (q_bufs, kv_bufs, q_ready, q_empty, ready, empty, kv_sf_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr,
                         S, SK, stride_w, stride_out, max_k, num_q_blocks, splits, H, BQ, BLOCK_KV, STAGES, CONSUMERS,
                         COMPRESSED, FMA_RELU, 1)),
            (_producer, (q_desc, kv_desc, q_bufs, kv_bufs, q_ready, q_empty, ready, empty, ks_ptr, ke_ptr, S, SK,
                         num_q_blocks, splits, H, BQ, BLOCK_KV, STAGES)),
        ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])
    elif CONSUMERS == 3:
        gl.warp_specialize([
            (_consumer, (q_bufs, kv_bufs, q_ready, q_empty, ready, empty, kv_sf_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr,
                         S, SK, stride_w, stride_out, max_k, num_q_blocks, splits, H, BQ, BLOCK_KV, STAGES, CONSUMERS,
                         COMPRESSED, FMA_RELU, 0)),
            (_consumer, (q_bufs, kv_bufs, q_ready, q_empty, ready, empty, kv_sf_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr,
                         S, SK, stride_w, stride_out, max_k, num_q_blocks, splits, H, BQ, BLOCK_KV, STAGES, CONSUMERS,
                         COMPRESSED, FMA_RELU, 1)),
            (_consumer, (q_bufs, kv_bufs, q_ready, q_empty, ready, empty, kv_sf_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr,
                         S, SK, stride_w, stride_out, max_k, num_q_blocks, splits, H, BQ, BLOCK_KV, STAGES, CONSUMERS,
                         COMPRESSED, FMA_RELU, 2)),
            (_producer, (q_desc, kv_desc, q_bufs, kv_bufs, q_ready, q_empty, ready, empty, ks_ptr, ke_ptr, S, SK,
                         num_q_blocks, splits, H, BQ, BLOCK_KV, STAGES)),
        ], [4, 4, 1], [CONSUMER_REGS, CONSUMER_REGS, PRODUCER_REGS])
    else:
        gl.warp_specialize([
            (_consumer, (q_bufs, kv_bufs, q_ready, q_empty, ready, empty, kv_sf_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr,
                         S, SK, stride_w, stride_out, max_k, num_q_blocks, splits, H, BQ, BLOCK_KV, STAGES, CONSUMERS,
                         COMPRESSED, FMA_RELU, 0)),
            (_consumer, (q_bufs, kv_bufs, q_ready, q_empty, ready, empty, kv_sf_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr,
                         S, SK, stride_w, stride_out, max_k, num_q_blocks, splits, H, BQ, BLOCK_KV, STAGES, CONSUMERS,
                         COMPRESSED, FMA_RELU, 1)),
            (_consumer, (q_bufs, kv_bufs, q_ready, q_empty, ready, empty, kv_sf_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr,
                         S, SK, stride_w, stride_out, max_k, num_q_blocks, splits, H, BQ, BLOCK_KV, STAGES, CONSUMERS,
                         COMPRESSED, FMA_RELU, 2)),
            (_consumer, (q_bufs, kv_bufs, q_ready, q_empty, ready, empty, kv_sf_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr,
                         S, SK, stride_w, stride_out, max_k, num_q_blocks, splits, H, BQ, BLOCK_KV, STAGES, CONSUMERS,
                         COMPRESSED, FMA_RELU, 3)),
            (_producer, (q_desc, kv_desc, q_bufs, kv_bufs, q_ready, q_empty, ready, empty, ks_ptr, ke_ptr, S, SK,
                         num_q_blocks, splits, H, BQ, BLOCK_KV, STAGES)),
        ], [4, 4, 4, 1], [CONSUMER_REGS, CONSUMER_REGS, CONSUMER_REGS, PRODUCER_REGS])
