"""Probe patch: per-warpgroup cycle counters in the two-wave kernel (dense 1D2D; results become garbage: the
counters are stored over the first rows of D). `restore` undoes it.

Per consumer warpgroup, summed over its K blocks: cycles waiting for a stage's data (`ready`), two unused slots
(clock reads between a wgmma and its wait made ptxas spill hundreds of bytes), the whole K loop, and the number of
K blocks. Per producer: cycles waiting for a free stage (`empty`) and
its whole loop. Layout: int32 [NUM_SMS, 3 (consumer 0, consumer 1, producer), 8] at D's start (32-bit %clock)."""
import os
import shutil
import sys

P = "deep_gemm/gemm/kernels/fp8_gemm_ws.py"
if sys.argv[1] == "restore":
    shutil.copy(P + ".orig", P)
    sys.exit()
if os.path.exists(P + ".orig"):
    sys.exit(f"{P}.orig exists: restore first (a second patch would make the patched file the original)")
shutil.copy(P, P + ".orig")
s = open(P).read()


def rep(old, new):
    global s
    assert s.count(old) == 1, old
    s = s.replace(old, new)


rep('''@gluon.jit
def _swizzle(''', '''@gluon.jit
def _clock():
    return gl.inline_asm_elementwise("mov.u32 $0, %clock;", "=r,r", [gl.program_id(0)], dtype=gl.int32,
                                     is_pure=False, pack=1)


@gluon.jit
def _dbg_store(ws_ptr, slot, j, value):
    dbg = ws_ptr.to(gl.pointer_type(gl.int32))
    gl.store(dbg + (gl.program_id(0) * 3 + slot) * 8 + j, value)


@gluon.jit
def _swizzle(''')
# mainloop: counters
rep('''    for kb in range(num_kb):
        stage = it % STAGES
        a_tile = a_bufs.index(stage)
        b_tile = b_bufs.index(stage)
        mbarrier.wait(ready.index(stage), (it // STAGES) & 1)
        part = warpgroup_mma(a_tile.slice(A_ROW0, WG_ROWS, dim=0), b_tile.slice(0, BN, dim=0).permute((1, 0)),''',
    '''    w_ready = _clock() * 0
    w_mma0 = w_ready
    w_mma1 = w_ready
    t_loop = _clock()
    for kb in range(num_kb):
        stage = it % STAGES
        a_tile = a_bufs.index(stage)
        b_tile = b_bufs.index(stage)
        t0 = _clock()
        mbarrier.wait(ready.index(stage), (it // STAGES) & 1)
        t1 = _clock()
        part = warpgroup_mma(a_tile.slice(A_ROW0, WG_ROWS, dim=0), b_tile.slice(0, BN, dim=0).permute((1, 0)),''')
rep('''        part = warpgroup_mma_wait(num_outstanding=0, deps=(part,))
        mbarrier.arrive(empty.index(stage), count=1)
        if WAVE_N:
            acc1 = acc1 + part * gl.expand_dims(sa0 * sb1, 1)''', '''        part = warpgroup_mma_wait(num_outstanding=0, deps=(part,))
        w_ready += t1 - t0
        mbarrier.arrive(empty.index(stage), count=1)
        if WAVE_N:
            acc1 = acc1 + part * gl.expand_dims(sa0 * sb1, 1)''')
rep('''        sa0 = na0
        sb0 = nb0
        it += 1
    return acc0, acc1, it


@gluon.jit
def _mainloop_two_waves_1d1d(''', '''        sa0 = na0
        sb0 = nb0
        it += 1
    return acc0, acc1, it, w_ready, w_mma0, w_mma1, _clock() - t_loop


@gluon.jit
def _mainloop_two_waves_1d1d(''')
# consumer: accumulate and store
rep('''    it = 0
    tiles_done = 0  # parity of this warpgroup's C-load barriers (C_TMA: each wave's is used once per tile)''',
    '''    it = 0
    tiles_done = 0  # parity of this warpgroup's C-load barriers (C_TMA: each wave's is used once per tile)
    s_ready = _clock() * 0
    s_mma0 = s_ready
    s_mma1 = s_ready
    s_loop = s_ready
    s_kb = s_ready''')
rep('''                    acc0, acc1, it = _mainloop_two_waves(
                        a_bufs, b_bufs, ready, empty, sfa_rows, sfa_rows1, sfb_cols, sfb_cols1, row_ok, row_ok1,
                        wave1_ok, num_kb, it, stride_sfa_k, stride_sfb_k, A_ROW0, BN, STAGES, WAVE_N, MMA)''',
    '''                    acc0, acc1, it, c0, c1, c2, c3 = _mainloop_two_waves(
                        a_bufs, b_bufs, ready, empty, sfa_rows, sfa_rows1, sfb_cols, sfb_cols1, row_ok, row_ok1,
                        wave1_ok, num_kb, it, stride_sfa_k, stride_sfb_k, A_ROW0, BN, STAGES, WAVE_N, MMA)
                    s_ready += c0
                    s_mma0 += c1
                    s_mma1 += c2
                    s_loop += c3
                    s_kb += num_kb''')
rep('''        tiles_done += 1
    if D_TMA:
        tma.store_wait(pendings=0)
''', '''        tiles_done += 1
    if D_TMA:
        tma.store_wait(pendings=0)
    _dbg_store(ws_ptr, WG, 0, s_ready)
    _dbg_store(ws_ptr, WG, 1, s_mma0)
    _dbg_store(ws_ptr, WG, 2, s_mma1)
    _dbg_store(ws_ptr, WG, 3, s_loop)
    _dbg_store(ws_ptr, WG, 4, s_kb)
''')
# producer
rep('''              SCALES_SMEM: gl.constexpr, SPLIT_K: gl.constexpr):
    VEC: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])''',
    '''              SCALES_SMEM: gl.constexpr, SPLIT_K: gl.constexpr, ws_ptr):
    VEC: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
    p_wait = _clock() * 0
    p_start = _clock()''')
rep('''                mbarrier.wait(empty.index(stage), ((it // STAGES) & 1) ^ 1)
                bar = ready.index(stage)''', '''                tw = _clock()
                mbarrier.wait(empty.index(stage), ((it // STAGES) & 1) ^ 1)
                p_wait += _clock() - tw
                bar = ready.index(stage)''')
rep('''                    tma.async_copy_global_to_shared(b2_desc, [b2_row, kb * BK], bar, b2_bufs.index(stage))
                it += 1
''', '''                    tma.async_copy_global_to_shared(b2_desc, [b2_row, kb * BK], bar, b2_bufs.index(stage))
                it += 1
    _dbg_store(ws_ptr, 2, 0, p_wait)
    _dbg_store(ws_ptr, 2, 3, _clock() - p_start)
''')
rep('''                     GROUPING, G_PAD, PSUM_ALIGN, SPLIT, SFB_SMEM, SCALES_SMEM, SPLIT_K)),''',
    '''                     GROUPING, G_PAD, PSUM_ALIGN, SPLIT, SFB_SMEM, SCALES_SMEM, SPLIT_K, ws_ptr)),''')
open(P, "w").write(s)
