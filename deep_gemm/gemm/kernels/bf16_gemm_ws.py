"""Warp-specialised BF16 GEMM (Gluon, SM90), dense only, opt-in (``DG_BF16_WS=1`` or ``Bf16Overrides(ws=True)``):
DeepGEMM's producer/consumer structure for the case the ``tl.*`` kernel (bf16_gemm.py) runs with its loads and MMAs
in the same warps.

Structure (one persistent CTA per SM, tiles t = pid, pid + NUM_SMS, ... in grouped order):
  producer   1 warp: for every (tile, K block) waits for a free stage, then TMA-loads the A tile ([BM, BK] K-major
             or [BK, BM] MN-major) and the B tile ([BN, BK] or [BK, BN]) into it (arrival on the stage's `ready`).
  consumer 0, consumer 1
             4 warps each (one warpgroup): the lower and upper 64 rows of the 128 x BN tile. Per K block: wait
             `ready`, issue an asynchronous wgmma into the FP32 accumulator, wait until at most one wgmma is in
             flight (the previous block's), release the previous block's stage. BF16 wgmma accumulates in FP32, so
             the accumulator is never read inside the loop (no promotion: ptxas keeps the wgmmas back to back).
             After the last block, the 64 x BN slab goes registers -> shared memory -> one TMA store, which
             completes while the next tile's K loop runs (the buffer is waited for only at the next epilogue).
MN-major operands are read as they are in memory: the wgmma takes the transposed shared-memory view.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)

# Rows each consumer warpgroup owns (wgmma's M per warpgroup).
WG_ROWS = gl.constexpr(64)


@gluon.jit
def _swizzle(tile, num_m_blocks, num_n_blocks, GROUP_M: gl.constexpr):
    """Grouped order: GROUP_M M-blocks share the N sweep, so B tiles are reused from L2."""
    per_group = GROUP_M * num_n_blocks
    first_m = (tile // per_group) * GROUP_M
    rows = gl.minimum(num_m_blocks - first_m, GROUP_M)
    pid_m = first_m + (tile % per_group) % rows
    pid_n = (tile % per_group) // rows
    return pid_m, pid_n


@gluon.jit
def _producer(a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, BM: gl.constexpr, BN: gl.constexpr,
              BK: gl.constexpr, STAGES: gl.constexpr, GROUP_M: gl.constexpr, NUM_SMS: gl.constexpr,
              A_K_MAJOR: gl.constexpr, B_K_MAJOR: gl.constexpr):
    STAGE_BYTES: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes
    num_m_blocks = gl.cdiv(M, BM)
    num_n_blocks = gl.cdiv(N, BN)
    num_kb = gl.cdiv(K, BK)
    it = 0
    for tile in range(gl.program_id(0), num_m_blocks * num_n_blocks, NUM_SMS):
        pid_m, pid_n = _swizzle(tile, num_m_blocks, num_n_blocks, GROUP_M)
        off_m = pid_m * BM
        off_n = pid_n * BN
        for kb in range(num_kb):
            stage = it % STAGES
            # A fresh barrier counts as having completed the phase before phase 0: the first pass is free.
            mbarrier.wait(empty.index(stage), ((it // STAGES) & 1) ^ 1)
            bar = ready.index(stage)
            mbarrier.expect(bar, STAGE_BYTES)
            if A_K_MAJOR:
                tma.async_copy_global_to_shared(a_desc, [off_m, kb * BK], bar, a_bufs.index(stage))
            else:
                tma.async_copy_global_to_shared(a_desc, [kb * BK, off_m], bar, a_bufs.index(stage))
            if B_K_MAJOR:
                tma.async_copy_global_to_shared(b_desc, [off_n, kb * BK], bar, b_bufs.index(stage))
            else:
                tma.async_copy_global_to_shared(b_desc, [kb * BK, off_n], bar, b_bufs.index(stage))
            it += 1


@gluon.jit
def _consumer(a_bufs, b_bufs, ready, empty, d_desc, c_smem, M, N, K, BM: gl.constexpr, BN: gl.constexpr,
              BK: gl.constexpr, STAGES: gl.constexpr, GROUP_M: gl.constexpr, NUM_SMS: gl.constexpr,
              A_K_MAJOR: gl.constexpr, B_K_MAJOR: gl.constexpr, WG: gl.constexpr):
    MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 16])
    A_ROW0: gl.constexpr = WG * WG_ROWS
    num_m_blocks = gl.cdiv(M, BM)
    num_n_blocks = gl.cdiv(N, BN)
    num_kb = gl.cdiv(K, BK)
    it = 0
    for tile in range(gl.program_id(0), num_m_blocks * num_n_blocks, NUM_SMS):
        pid_m, pid_n = _swizzle(tile, num_m_blocks, num_n_blocks, GROUP_M)
        off_m = pid_m * BM
        off_n = pid_n * BN
        acc = gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA)
        for kb in range(num_kb):
            stage = it % STAGES
            mbarrier.wait(ready.index(stage), (it // STAGES) & 1)
            if A_K_MAJOR:
                a = a_bufs.index(stage).slice(A_ROW0, WG_ROWS, dim=0)
            else:
                a = a_bufs.index(stage).slice(A_ROW0, WG_ROWS, dim=1).permute((1, 0))
            if B_K_MAJOR:
                b = b_bufs.index(stage).permute((1, 0))
            else:
                b = b_bufs.index(stage)
            acc = warpgroup_mma(a, b, acc, is_async=True)
            # The previous block's wgmma has retired: its stage is free.
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
            mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=kb > 0)
            it += 1
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=num_kb > 0)
        tma.store_wait(pendings=0)  # the staging buffer's previous store has been read out
        c_smem.store(acc.to(d_desc.dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(d_desc, [off_m + A_ROW0, off_n], c_smem)
    tma.store_wait(pendings=0)


@gluon.jit(do_not_specialize=["M", "N", "K"])
def _bf16_gemm_ws_kernel(
        a_desc, b_desc,  # BF16 operands as in memory: A [M, K] or [K, M], B [N, K] or [K, N]
        d_desc,  # D [M, N] (BF16), block [64, BN]
        M, N, K,
        BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr, GROUP_M: gl.constexpr,
        NUM_SMS: gl.constexpr, A_K_MAJOR: gl.constexpr, B_K_MAJOR: gl.constexpr, CONSUMER_REGS: gl.constexpr,
        PRODUCER_REGS: gl.constexpr):
    gl.static_assert(BM == 2 * WG_ROWS, "two consumer warpgroups of 64 rows")
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=2)  # one arrival per consumer warpgroup
    c_bufs = gl.allocate_shared_memory(d_desc.dtype, [2, WG_ROWS, BN], d_desc.layout)
    fence_async_shared()
    gl.warp_specialize([
        (_consumer, (a_bufs, b_bufs, ready, empty, d_desc, c_bufs.index(0), M, N, K, BM, BN, BK, STAGES, GROUP_M,
                     NUM_SMS, A_K_MAJOR, B_K_MAJOR, 0)),
        (_consumer, (a_bufs, b_bufs, ready, empty, d_desc, c_bufs.index(1), M, N, K, BM, BN, BK, STAGES, GROUP_M,
                     NUM_SMS, A_K_MAJOR, B_K_MAJOR, 1)),
        (_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, BM, BN, BK, STAGES, GROUP_M, NUM_SMS,
                     A_K_MAJOR, B_K_MAJOR)),
    ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])
