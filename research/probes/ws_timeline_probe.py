"""Where a K block's time goes in the two-wave kernel (session 12): %clock counters around the consumers' `ready`
waits and the producer's `empty` waits, at the M=4096 dense shapes.

Prints, over all CTAs: the share of each consumer warpgroup's K loop spent waiting for its stage's data, cycles per
K block, and the share of the producer's loop spent waiting for a free stage; and the time of the instrumented and
the shipped kernel (the benchmark's timer), which should agree. The counters are stored over D's first rows, so
results are wrong on purpose. Counters read between a wgmma and its wait made ptxas spill hundreds of bytes, so
there are none there. The instrumented kernel is a patched copy of kernels/fp8_gemm_ws.py (research/probes/ws_variants.py);
it is dense 1D2D two-wave only.

    python research/probes/ws_timeline_probe.py
"""

import os
import sys

import torch

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import bench_fp8_gemm as bench  # noqa: E402
from deep_gemm.gemm import fp8_triton  # noqa: E402
from deep_gemm.gemm.kernels import fp8_gemm_ws  # noqa: E402
from deep_gemm.gemm.operands import resolve_recipe  # noqa: E402
from ws_variants import patched_module, use_kernel  # noqa: E402

# Counter layout: int32 [programs, 3 (consumer 0, consumer 1, producer), 4] from D's start; consumer slots: cycles
# waiting on `ready`, K-loop cycles, K blocks; producer slots: cycles waiting on `empty`, loop cycles.
PATCHES = [
    # helpers: a %clock read, and a store of one counter into D's first rows
    ('''@gluon.jit
def _swizzle(''',
     '''@gluon.jit
def _clock():
    return gl.inline_asm_elementwise("mov.u32 $0, %clock;", "=r,r", [gl.program_id(0)], dtype=gl.int32,
                                     is_pure=False, pack=1)


@gluon.jit
def _dbg_store(ws_ptr, slot, j, value):
    dbg = ws_ptr.to(gl.pointer_type(gl.int32))
    gl.store(dbg + (gl.program_id(0) * 3 + slot) * 4 + j, value)


@gluon.jit
def _swizzle('''),
    # the two-wave mainloop: clock reads around the `ready` wait
    ('''    for kb in range(num_kb):
        stage = it % STAGES
        a_tile = a_bufs.index(stage)
        b_tile = b_bufs.index(stage)
        mbarrier.wait(ready.index(stage), (it // STAGES) & 1)
        part = warpgroup_mma(a_tile.slice(A_ROW0, WG_ROWS, dim=0), b_tile.slice(0, BN, dim=0).permute((1, 0)),''',
     '''    w_ready = _clock() * 0
    t_loop = _clock()
    for kb in range(num_kb):
        stage = it % STAGES
        a_tile = a_bufs.index(stage)
        b_tile = b_bufs.index(stage)
        t0 = _clock()
        mbarrier.wait(ready.index(stage), (it // STAGES) & 1)
        t1 = _clock()
        part = warpgroup_mma(a_tile.slice(A_ROW0, WG_ROWS, dim=0), b_tile.slice(0, BN, dim=0).permute((1, 0)),'''),
    # (mainloop) the data wait is summed after the second wave's wgmma wait
    ('''        part = warpgroup_mma_wait(num_outstanding=0, deps=(part,))
        mbarrier.arrive(empty.index(stage), count=1)
        if WAVE_N:
            acc1 = acc1 + part * gl.expand_dims(sa0 * sb1, 1)''',
     '''        part = warpgroup_mma_wait(num_outstanding=0, deps=(part,))
        w_ready += t1 - t0
        mbarrier.arrive(empty.index(stage), count=1)
        if WAVE_N:
            acc1 = acc1 + part * gl.expand_dims(sa0 * sb1, 1)'''),
    # (mainloop) the counters and the loop's cycles are returned
    ('''        sa0 = na0
        sb0 = nb0
        it += 1
    return acc0, acc1, it


@gluon.jit
def _first_block_scales(''',
     '''        sa0 = na0
        sb0 = nb0
        it += 1
    return acc0, acc1, it, w_ready, _clock() - t_loop


@gluon.jit
def _first_block_scales('''),
    # consumer: per-warpgroup sums
    ('''    it = 0
    tiles_done = 0  # parity of this warpgroup's C-load barriers (C_TMA: each wave's is used once per tile)''',
     '''    it = 0
    tiles_done = 0  # parity of this warpgroup's C-load barriers (C_TMA: each wave's is used once per tile)
    s_ready = _clock() * 0
    s_loop = s_ready
    s_kb = s_ready'''),
    # consumer: the mainloop's counters added per tile
    ('''                    acc0, acc1, it = _mainloop_two_waves(
                        a_bufs, b_bufs, ready, empty, sfa_rows, sfa_rows1, sfb_cols, sfb_cols1, row_ok, row_ok1,
                        wave1_ok, num_kb, it, stride_sfa_k, stride_sfb_k, f_sa0, f_sb0, f_x1, A_ROW0, BN, STAGES,
                        WAVE_N, MMA)''',
     '''                    acc0, acc1, it, waited, looped = _mainloop_two_waves(
                        a_bufs, b_bufs, ready, empty, sfa_rows, sfa_rows1, sfb_cols, sfb_cols1, row_ok, row_ok1,
                        wave1_ok, num_kb, it, stride_sfa_k, stride_sfb_k, f_sa0, f_sb0, f_x1, A_ROW0, BN, STAGES,
                        WAVE_N, MMA)
                    s_ready += waited
                    s_loop += looped
                    s_kb += num_kb'''),
    # consumer: the sums stored at the end
    ('''        tiles_done += 1
    if D_TMA:
        tma.store_wait(pendings=0)
''',
     '''        tiles_done += 1
    if D_TMA:
        tma.store_wait(pendings=0)
    _dbg_store(ws_ptr, WG, 0, s_ready)
    _dbg_store(ws_ptr, WG, 1, s_loop)
    _dbg_store(ws_ptr, WG, 2, s_kb)
'''),
    # producer: its start and the `empty` waits
    ('''              SCALES_SMEM: gl.constexpr, SPLIT_K: gl.constexpr):
    VEC: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])''',
     '''              SCALES_SMEM: gl.constexpr, SPLIT_K: gl.constexpr, ws_ptr):
    VEC: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
    p_wait = _clock() * 0
    p_start = _clock()'''),
    # (producer) clock reads around the `empty` wait
    ('''                mbarrier.wait(empty.index(stage), ((it // STAGES) & 1) ^ 1)
                bar = ready.index(stage)''',
     '''                tw = _clock()
                mbarrier.wait(empty.index(stage), ((it // STAGES) & 1) ^ 1)
                p_wait += _clock() - tw
                bar = ready.index(stage)'''),
    # (producer) the sums stored at the end
    ('''                    tma.async_copy_global_to_shared(b2_desc, [b2_row, kb * BK], bar, b2_bufs.index(stage))
                it += 1
''',
     '''                    tma.async_copy_global_to_shared(b2_desc, [b2_row, kb * BK], bar, b2_bufs.index(stage))
                it += 1
    _dbg_store(ws_ptr, 2, 0, p_wait)
    _dbg_store(ws_ptr, 2, 1, _clock() - p_start)
'''),
    # the producer gets D's pointer (the split-K workspace argument, which is D when nothing splits)
    ('''                     GROUPING, G_PAD, PSUM_ALIGN, SPLIT, SFB_SMEM, SCALES_SMEM, SPLIT_K)),''',
     '''                     GROUPING, G_PAD, PSUM_ALIGN, SPLIT, SFB_SMEM, SCALES_SMEM, SPLIT_K, ws_ptr)),'''),
]


def main():
    sms = fp8_triton._num_sms()
    timer = bench.KernelTimer(reps=30)
    original = fp8_gemm_ws._fp8_gemm_ws_kernel
    instrumented = patched_module("timeline", PATCHES)._fp8_gemm_ws_kernel
    for n, k in [(4096, 7168), (7168, 16384), (24576, 1536), (7168, 2048)]:
        m = 4096
        a, b = bench.fp8_operands(m, n, k)
        d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        r = resolve_recipe(None, None, None, b[1])

        def run():
            fp8_triton._launch_dense(a[0], a[1], b[0], b[1], d, None, r.b[0] == 1)
        use_kernel(original)
        shipped_us = timer(run)
        use_kernel(instrumented)
        us = timer(run)
        run()
        torch.cuda.synchronize()
        c = d.view(-1).view(torch.int32)[:sms * 3 * 4].view(sms, 3, 4).to(torch.int64).cpu()
        ready, loop, blocks = (c[:, :2, j].sum().item() for j in range(3))
        per_cta = c[:, :2, 0].sum(1).float() / c[:, :2, 1].sum(1).float()
        print(f"4096x{n}x{k}: {us:7.1f} us instrumented, {shipped_us:7.1f} us shipped | consumers wait for data "
              f"{ready / loop:5.1%} of their K loops (CTAs {per_cta.min():.1%}-{per_cta.max():.1%}), "
              f"{loop / blocks:6.0f} cycles per K block | producer waits for a free stage "
              f"{c[:, 2, 0].sum().item() / c[:, 2, 1].sum().item():5.1%} of its loop", flush=True)
    use_kernel(original)


if __name__ == "__main__":
    main()
