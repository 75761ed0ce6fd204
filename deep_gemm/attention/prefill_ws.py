"""Warp-specialised prefill indexer kernel (Gluon, SM90): ``fp8_mqa_logits`` for FP8 Q/KV behind TMA descriptors,
chosen by ``PrefillConfig(ws=True)`` (attention/triton_launch.py). Same grid, windows, KV splits and arithmetic as
the ``tl.*`` kernel (kernels.py::_fp8_mqa_logits_kernel); what changes is who waits for what.

Why: the ``tl.*`` kernel issues a block's wgmma, waits for it, then runs the head reduction in the same warps, so a
program's tensor core idles during its epilogue and overlap only comes from the ~3 programs sharing an SM. Here the
loads and the MMAs/epilogues live in different warps (DeepGEMM's structure for this op, written afresh):

  producer    1 warp: TMA-loads the program's Q tile [BQ * H, D] once (its own barrier), then the KV blocks
              [BLOCK_KV, D] of the program's range, in order, into a ring of STAGES buffers (``ready``/``empty``
              mbarriers per stage). Rows past SK (or past S * H for Q) arrive as zeros.
  consumers   CONSUMERS warpgroups (the default partition is consumer 0); consumer c takes blocks j = c, c + C, ...
              of the range: wait ``ready``, async wgmma KV [64, D] x Q^T [D, 128] into an FP32 [64, 128] tile,
              load the block's 64 key scales while it runs, wait, release the stage, then relu * weights, sum over
              each query's H heads, times the key scale, window mask, store. While one consumer reduces, another's
              wgmma runs: the tensor core sees back-to-back MMAs from alternating warpgroups.

Blocks are dealt round-robin, so each output element is still written by exactly one warpgroup with the ``tl.*``
kernel's ops in its order (same MMA layout, same reshape/sum, same scale and cast): bitwise the ``tl.*`` kernel's
output, and bitwise repeatable. The KV key scales are read by the consumers from global memory (64 floats per
block, issued before the wgmma wait so their latency hides behind the MMA) rather than staged by TMA: a 1-D
descriptor would add an alignment requirement on kv_sf for 256 bytes per block.

Ring phases: the consumer of use j of a stage waits for parity (j // STAGES) & 1. That is sound only if the stage's
previous use (j - STAGES) was waited for already, so STAGES must be a multiple of CONSUMERS (the previous use is then
the same consumer's); the launcher guarantees it.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)

# Key rows of one wgmma (M per warpgroup): the block each consumer takes.
WG_ROWS = gl.constexpr(64)


@gluon.jit
def _kv_range(ks_ptr, ke_ptr, S, SK, num_q_blocks, BQ: gl.constexpr, BLOCK_KV: gl.constexpr, VEC: gl.constexpr):
    """(first query, lo, number of BLOCK_KV blocks from lo) of this program: the tl.* kernel's range, computed the
    same way in every partition (a handful of scalar loads)."""
    q0 = (num_q_blocks - 1 - gl.program_id(0)) * BQ  # reverse order: causal windows grow with the query
    queries = q0 + gl.arange(0, BQ, layout=VEC)
    query_ok = queries < S
    ks = gl.maximum(gl.load(ks_ptr + queries, mask=query_ok, other=0), 0)
    ke = gl.minimum(gl.load(ke_ptr + queries, mask=query_ok, other=0), SK)
    nonempty = query_ok & (ks < ke)
    lo = gl.min(gl.where(nonempty, ks, SK), axis=0)
    hi = gl.max(gl.where(nonempty, ke, 0), axis=0)
    lo = lo // 16 * 16  # 16-element aligned stores for the first block
    part = gl.cdiv(gl.cdiv(hi - lo, BLOCK_KV), gl.num_programs(1)) * BLOCK_KV
    lo = lo + gl.program_id(1) * part
    hi = gl.minimum(hi, lo + part)
    blocks = gl.where(hi > lo, gl.cdiv(hi - lo, BLOCK_KV), 0)
    return q0, lo, blocks


@gluon.jit
def _producer(q_desc, kv_desc, q_smem, kv_bufs, q_bar, ready, empty, ks_ptr, ke_ptr, S, SK, num_q_blocks,
              H: gl.constexpr, BQ: gl.constexpr, BLOCK_KV: gl.constexpr, STAGES: gl.constexpr):
    VEC: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
    q0, lo, blocks = _kv_range(ks_ptr, ke_ptr, S, SK, num_q_blocks, BQ, BLOCK_KV, VEC)
    if blocks > 0:
        # (TMA counts a box's full bytes on the barrier, also where it reads past the tensor and zero-fills)
        mbarrier.expect(q_bar, q_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [q0 * H, 0], q_bar, q_smem)
    for j in range(blocks):
        stage = j % STAGES
        # A fresh barrier counts as having completed the phase before phase 0: the first pass is free.
        mbarrier.wait(empty.index(stage), ((j // STAGES) & 1) ^ 1)
        bar = ready.index(stage)
        mbarrier.expect(bar, kv_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(kv_desc, [lo + j * BLOCK_KV, 0], bar, kv_bufs.index(stage))


@gluon.jit
def _consumer(q_smem, kv_bufs, q_bar, ready, empty, kv_sf_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr, S, SK, stride_w,
              stride_out, max_k, num_q_blocks,
              H: gl.constexpr, BQ: gl.constexpr, BLOCK_KV: gl.constexpr, STAGES: gl.constexpr,
              CONSUMERS: gl.constexpr, COMPRESSED: gl.constexpr, FMA_RELU: gl.constexpr, WG: gl.constexpr):
    BN: gl.constexpr = BQ * H
    # The tl.* kernel's accumulator layout at 4 warps (TTGIR: instrShape [16, 128, 32], warps [4, 1]), so the
    # reshape below infers the same linear layout and the head sum adds in the same order.
    MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 32])
    VEC: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    q0, lo, blocks = _kv_range(ks_ptr, ke_ptr, S, SK, num_q_blocks, BQ, BLOCK_KV, VEC)
    if blocks > WG:  # (else this warpgroup has no block: it waits for nothing)
        cols = gl.arange(0, BN, layout=gl.SliceLayout(0, MMA))
        col_query = q0 + cols // H
        weights = gl.load(w_ptr + col_query.to(gl.int64) * stride_w + cols % H, mask=col_query < S,
                          other=0.0).to(gl.float32)
        if FMA_RELU:  # (s + |s|) * w / 2 == max(s, 0) * w exactly, on the FMA pipe
            weights = weights * 0.5
        # The reduced [BLOCK_KV, BQ] tile's layout (keys on dim 0, queries on dim 1) is whatever the reshape infers;
        # one dummy reduction outside the loop names it for the key and query vectors.
        probe = gl.sum(gl.reshape(gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA), [WG_ROWS, BQ, H]), axis=2)
        OUT: gl.constexpr = probe.type.layout
        KEYS: gl.constexpr = gl.SliceLayout(1, OUT)
        QUERIES: gl.constexpr = gl.SliceLayout(0, OUT)
        queries = q0 + gl.arange(0, BQ, layout=QUERIES)
        query_ok = queries < S
        ks_raw = gl.load(ks_ptr + queries, mask=query_ok, other=0)  # compressed column 0 is key ks (even if < 0)
        ks = gl.maximum(ks_raw, 0)
        ke = gl.minimum(gl.load(ke_ptr + queries, mask=query_ok, other=0), SK)
        # Blocks wholly inside every query's window (and inside SK and, compressed, max_k columns) are stored
        # without per-element tests (the tl.* kernel's INTERIOR range, here a uniform branch per block).
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
        rows = gl.arange(0, WG_ROWS, layout=KEYS)
        zero = gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA)
        mbarrier.wait(q_bar, 0)
        q_t = q_smem.permute((1, 0))  # [D, BQ * H], K-major: wgmma's B
        for j in range(WG, blocks, CONSUMERS):
            stage = j % STAGES
            k0 = lo + j * BLOCK_KV
            mbarrier.wait(ready.index(stage), (j // STAGES) & 1)
            scores = warpgroup_mma(kv_bufs.index(stage), q_t, zero, use_acc=False, is_async=True)
            keys = k0 + rows
            key_ok = keys < SK
            kv_sf = gl.load(kv_sf_ptr + keys, mask=key_ok, other=0.0)  # in flight while the wgmma runs
            scores = warpgroup_mma_wait(num_outstanding=0, deps=(scores,))
            mbarrier.arrive(empty.index(stage), count=1)  # the stage is read: the producer may refill it
            if FMA_RELU:
                weighted = (scores + gl.abs(scores)) * gl.expand_dims(weights, 0)
            else:
                weighted = gl.maximum(scores, 0.0) * gl.expand_dims(weights, 0)
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


@gluon.jit(do_not_specialize=["S", "SK", "stride_w", "stride_out", "max_k", "num_q_blocks"],
           do_not_specialize_on_alignment=["kv_sf_ptr", "w_ptr", "ks_ptr", "ke_ptr", "out_ptr"])
def _fp8_mqa_logits_ws_kernel(
        q_desc,  # Q [S * H, D] FP8, block [BQ * H, D]
        kv_desc,  # KV [SK, D] FP8, block [BLOCK_KV, D]
        kv_sf_ptr, w_ptr, ks_ptr, ke_ptr,  # FP32 key scales [SK], weights [S, H] (row stride stride_w), windows [S]
        out_ptr,  # logits [*, stride_out] (FP32 or BF16)
        S, SK, stride_w, stride_out, max_k, num_q_blocks,
        H: gl.constexpr, BQ: gl.constexpr, BLOCK_KV: gl.constexpr, STAGES: gl.constexpr, CONSUMERS: gl.constexpr,
        COMPRESSED: gl.constexpr, FMA_RELU: gl.constexpr, CONSUMER_REGS: gl.constexpr,
        PRODUCER_REGS: gl.constexpr):
    """Program (p, c): query block num_q_blocks - 1 - p against part c of its KV range (as the tl.* kernel)."""
    gl.static_assert(BLOCK_KV == WG_ROWS, "one 64-row wgmma per consumer and block")
    gl.static_assert(BQ * H == 128, "128 (query, head) columns")
    gl.static_assert(STAGES % CONSUMERS == 0, "ring phases: a stage's previous use is the same consumer's")
    gl.static_assert(CONSUMERS >= 2 and CONSUMERS <= 4, "2 to 4 consumer warpgroups")
    q_smem = gl.allocate_shared_memory(q_desc.dtype, q_desc.block_type.shape, q_desc.layout)
    kv_bufs = gl.allocate_shared_memory(kv_desc.dtype, [STAGES] + kv_desc.block_type.shape, kv_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)  # one consumer per use of a stage
    fence_async_shared()
    # (The partition lists are written out per consumer count: a JIT function cannot be bound to a name here.)
    if CONSUMERS == 2:
        gl.warp_specialize([
            (_consumer, (q_smem, kv_bufs, q_bar, ready, empty, kv_sf_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr, S, SK,
                         stride_w, stride_out, max_k, num_q_blocks, H, BQ, BLOCK_KV, STAGES, CONSUMERS, COMPRESSED,
                         FMA_RELU, 0)),
            (_consumer, (q_smem, kv_bufs, q_bar, ready, empty, kv_sf_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr, S, SK,
                         stride_w, stride_out, max_k, num_q_blocks, H, BQ, BLOCK_KV, STAGES, CONSUMERS, COMPRESSED,
                         FMA_RELU, 1)),
            (_producer, (q_desc, kv_desc, q_smem, kv_bufs, q_bar, ready, empty, ks_ptr, ke_ptr, S, SK, num_q_blocks,
                         H, BQ, BLOCK_KV, STAGES)),
        ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])
    elif CONSUMERS == 3:
        gl.warp_specialize([
            (_consumer, (q_smem, kv_bufs, q_bar, ready, empty, kv_sf_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr, S, SK,
                         stride_w, stride_out, max_k, num_q_blocks, H, BQ, BLOCK_KV, STAGES, CONSUMERS, COMPRESSED,
                         FMA_RELU, 0)),
            (_consumer, (q_smem, kv_bufs, q_bar, ready, empty, kv_sf_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr, S, SK,
                         stride_w, stride_out, max_k, num_q_blocks, H, BQ, BLOCK_KV, STAGES, CONSUMERS, COMPRESSED,
                         FMA_RELU, 1)),
            (_consumer, (q_smem, kv_bufs, q_bar, ready, empty, kv_sf_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr, S, SK,
                         stride_w, stride_out, max_k, num_q_blocks, H, BQ, BLOCK_KV, STAGES, CONSUMERS, COMPRESSED,
                         FMA_RELU, 2)),
            (_producer, (q_desc, kv_desc, q_smem, kv_bufs, q_bar, ready, empty, ks_ptr, ke_ptr, S, SK, num_q_blocks,
                         H, BQ, BLOCK_KV, STAGES)),
        ], [4, 4, 1], [CONSUMER_REGS, CONSUMER_REGS, PRODUCER_REGS])
    else:
        gl.warp_specialize([
            (_consumer, (q_smem, kv_bufs, q_bar, ready, empty, kv_sf_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr, S, SK,
                         stride_w, stride_out, max_k, num_q_blocks, H, BQ, BLOCK_KV, STAGES, CONSUMERS, COMPRESSED,
                         FMA_RELU, 0)),
            (_consumer, (q_smem, kv_bufs, q_bar, ready, empty, kv_sf_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr, S, SK,
                         stride_w, stride_out, max_k, num_q_blocks, H, BQ, BLOCK_KV, STAGES, CONSUMERS, COMPRESSED,
                         FMA_RELU, 1)),
            (_consumer, (q_smem, kv_bufs, q_bar, ready, empty, kv_sf_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr, S, SK,
                         stride_w, stride_out, max_k, num_q_blocks, H, BQ, BLOCK_KV, STAGES, CONSUMERS, COMPRESSED,
                         FMA_RELU, 2)),
            (_consumer, (q_smem, kv_bufs, q_bar, ready, empty, kv_sf_ptr, w_ptr, ks_ptr, ke_ptr, out_ptr, S, SK,
                         stride_w, stride_out, max_k, num_q_blocks, H, BQ, BLOCK_KV, STAGES, CONSUMERS, COMPRESSED,
                         FMA_RELU, 3)),
            (_producer, (q_desc, kv_desc, q_smem, kv_bufs, q_bar, ready, empty, ks_ptr, ke_ptr, S, SK, num_q_blocks,
                         H, BQ, BLOCK_KV, STAGES)),
        ], [4, 4, 4, 1], [CONSUMER_REGS, CONSUMER_REGS, CONSUMER_REGS, PRODUCER_REGS])
