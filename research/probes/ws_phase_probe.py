"""When each consumer warpgroup's waves complete (session 31's question behind Fp8Overrides.stagger): do the two
warpgroups of a two-wave tile finish their waves together (the tensor core interleaving their wgmmas, so both
promote while it idles), and what phase do they keep with and without the stagger?

A patched copy of kernels/fp8_gemm_ws.py (research/probes/ws_variants.py) reads %clock (the SM's cycle counter,
shared by both warpgroups of a CTA) in `_mainloop_two_waves` after the stage's `ready` (and stagger) wait and after
each wave's promotion (wgmma wait + promotion: the promotion takes the same time in both warpgroups), and sums per
warpgroup, over every K block of the CTA: the clock after wave 0's promotion, after wave 1's (int32, wrapping: only
the difference of the two warpgroups' sums is read), the cycles from `ready` to wave 0's promotion done, and from
there to wave 1's; and the cycles spent in the `ready` (and stagger) wait, read by a clock before it (added after
call 6). Each CTA stores them at the end, int32 [CTAs, 2 warpgroups, 6 (the four sums, K blocks, the wait)], just
before D's first byte: D is a view starting PAD rows into a larger buffer, so no tile's store reaches them (the
split-K workspace argument, D when nothing splits, carries the pointer). Dense 128 x 256 tiles only (waves along N).

What ptxas makes of it (sm_90a): per-block stores in the K loop spilled ~300 bytes there, and so did clock reads
right after the wgmma waits (a 64-register partial and both accumulators live); read after the promotions, the
kernel keeps (224, 56) registers with no local memory in its K loops and ~25 more instructions per K block
(258-261 against 234), so its time is printed (with --shipped, next to the shipped kernel's).

Prints per configuration, over CTAs (median, and the 10th / 90th percentiles): warpgroup 1's mean time minus
warpgroup 0's after wave 0 and after wave 1 (near 0: they finish together; near a wave's length: one computes while
the other promotes), each warpgroup's mean cycles from `ready` to wave 0 promoted, from there to wave 1 promoted,
and in the `ready` wait (does the leading warpgroup wait for stages the trailing one still holds?), and the
instrumented kernel's time.

    python research/probes/ws_phase_probe.py [--shipped]
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "sweeps"))

import sweep_moe_schedule as moe  # noqa: E402  (puts the repository and benchmarks/ first on sys.path)
import torch  # noqa: E402
from ws_variants import patched_module, use_kernel  # noqa: E402

from deep_gemm._ops.library import run_launcher  # noqa: E402
from deep_gemm.gemm.fp8_plan import Fp8Overrides  # noqa: E402
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8  # noqa: E402

# per CTA and warpgroup: sums of the clock after wave 0's promotion, after wave 1's, ready -> wave 0 promoted,
# wave 0 -> wave 1 promoted; K blocks; cycles in the `ready` (and stagger) wait
SLOTS = 6
MAX_CTAS = 1024
PATCHES = [
    ('''@gluon.jit
def _swizzle(''',
     '''@gluon.jit
def _clock():
    return gl.inline_asm_elementwise("mov.u32 $0, %clock;", "=r,r", [gl.program_id(0)], dtype=gl.int32,
                                     is_pure=False, pack=1)


@gluon.jit
def _swizzle('''),
    ('''    acc0 = gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA)
    acc1 = gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA)
    if WAVE_N:
        sb1 = x1''',
     '''    acc0 = gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA)
    acc1 = gl.zeros([WG_ROWS, BN], gl.float32, layout=MMA)
    s_0 = it * 0
    s_1 = s_0
    s_w0 = s_0
    s_w1 = s_0
    s_wait = s_0
    if WAVE_N:
        sb1 = x1'''),
    ('''        mbarrier.wait(ready.index(stage), (it // STAGES) & 1)
        _stagger_wait(stagger, stage, (it // STAGES) & 1, kb, WG, STAGGER)
        part = warpgroup_mma(a_tile.slice(A_ROW0, WG_ROWS, dim=0), b_tile.slice(0, BN, dim=0)''',
     '''        t_w = _clock()
        mbarrier.wait(ready.index(stage), (it // STAGES) & 1)
        _stagger_wait(stagger, stage, (it // STAGES) & 1, kb, WG, STAGGER)
        t_r = _clock()
        s_wait += t_r - t_w
        part = warpgroup_mma(a_tile.slice(A_ROW0, WG_ROWS, dim=0), b_tile.slice(0, BN, dim=0)'''),
    ('''        part = warpgroup_mma_wait(num_outstanding=0, deps=(part,))
        _stagger_arrive(stagger, stage, WG, STAGGER)
        acc0 = acc0 + part * gl.expand_dims(sa0 * sb0, 1)''',
     '''        part = warpgroup_mma_wait(num_outstanding=0, deps=(part,))
        _stagger_arrive(stagger, stage, WG, STAGGER)
        acc0 = acc0 + part * gl.expand_dims(sa0 * sb0, 1)
        t_0 = _clock()
        s_0 += t_0
        s_w0 += t_0 - t_r'''),
    ('''        part = warpgroup_mma_wait(num_outstanding=0, deps=(part,))
        mbarrier.arrive(empty.index(stage), count=1)
        if WAVE_N:
            acc1 = acc1 + part * gl.expand_dims(sa0 * sb1, 1)
            sb1 = nb1''',
     '''        part = warpgroup_mma_wait(num_outstanding=0, deps=(part,))
        mbarrier.arrive(empty.index(stage), count=1)
        if WAVE_N:
            acc1 = acc1 + part * gl.expand_dims(sa0 * sb1, 1)
            t_1 = _clock()
            s_1 += t_1
            s_w1 += t_1 - t_0
            sb1 = nb1'''),
    ('''        sa0 = na0
        sb0 = nb0
        it += 1
    return acc0, acc1, it


@gluon.jit
def _first_block_scales(''',
     '''        sa0 = na0
        sb0 = nb0
        it += 1
    return acc0, acc1, it, s_0, s_1, s_w0, s_w1, s_wait


@gluon.jit
def _first_block_scales('''),
    ('''    it = 0
    tiles_done = 0  # parity of this warpgroup's C-load barriers (C_TMA: each wave's is used once per tile)''',
     '''    it = 0
    tiles_done = 0  # parity of this warpgroup's C-load barriers (C_TMA: each wave's is used once per tile)
    p_0 = it * 0
    p_1 = p_0
    p_w0 = p_0
    p_w1 = p_0
    p_wait = p_0
    p_n = p_0'''),
    ('''                    acc0, acc1, it = _mainloop_two_waves(
                        a_bufs, b_bufs, ready, empty, sfa_rows, sfa_rows1, sfb_cols, sfb_cols1, row_ok, row_ok1,
                        wave1_ok, num_kb, it, stride_sfa_k, stride_sfb_k, f_sa0, f_sb0, f_x1, A_ROW0, BN, STAGES,
                        WAVE_N, MMA, stagger, WG, STAGGER)''',
     '''                    acc0, acc1, it, q_0, q_1, q_w0, q_w1, q_wait = _mainloop_two_waves(
                        a_bufs, b_bufs, ready, empty, sfa_rows, sfa_rows1, sfb_cols, sfb_cols1, row_ok, row_ok1,
                        wave1_ok, num_kb, it, stride_sfa_k, stride_sfb_k, f_sa0, f_sb0, f_x1, A_ROW0, BN, STAGES,
                        WAVE_N, MMA, stagger, WG, STAGGER)
                    p_0 += q_0
                    p_1 += q_1
                    p_w0 += q_w0
                    p_w1 += q_w1
                    p_wait += q_wait
                    p_n += num_kb'''),
    ('''        tiles_done += 1
    if D_TMA:
        tma.store_wait(pendings=0)
''',
     '''        tiles_done += 1
    if D_TMA:
        tma.store_wait(pendings=0)
    if WAVES == 2 and not SPLIT and not SFB_SMEM:
        dbg = ws_ptr.to(gl.pointer_type(gl.int32)) + ((gl.program_id(0) * 2 + WG) * PHASE_SLOTS - PHASE_REGION)
        gl.store(dbg, p_0)
        gl.store(dbg + 1, p_1)
        gl.store(dbg + 2, p_w0)
        gl.store(dbg + 3, p_w1)
        gl.store(dbg + 4, p_n)
        gl.store(dbg + 5, p_wait)
'''),
]
REGION = MAX_CTAS * 2 * SLOTS  # int32 words before D
PAD = 8  # rows of the buffer before D (8 x N BF16 >= REGION words for N >= 2560)
REGS = (224, 56)  # the budget the plan picks for these builds, instrumented or not (one build per variant)


def patches():
    return [(old, new.replace("PHASE_SLOTS", str(SLOTS)).replace("PHASE_REGION", str(REGION)))
            for old, new in PATCHES]


def _padded(rows, n):
    """(buffer, D): D = buffer[PAD:], [rows, n] BF16."""
    assert PAD * n * 2 >= REGION * 4, "N too small for the stamps before D"
    buf = torch.empty(rows + PAD, n, device="cuda", dtype=torch.bfloat16)
    return buf, buf[PAD:]


def dense_case(m, n, k):
    a = per_token_cast_to_fp8(torch.randn(m, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
    b = per_block_cast_to_fp8(torch.randn(n, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
    buf, d = _padded(m, n)
    return buf, lambda ov: run_launcher("fp8_gemm_nt", a[0], a[1], b[0], b[1], d, launcher_kwargs=dict(overrides=ov))


def psum_case(g, per_group, n, k):
    """DeepGEMM's psum row (sweep_moe_schedule.psum_problem), without zero padding as on SM90."""
    _, _, _, a, b, psum, _, d0 = moe.psum_problem(128, g, per_group, n, k)
    buf, d = _padded(d0.size(0), n)
    return buf, lambda ov: run_launcher("m_grouped_fp8_gemm_nt_contiguous", a[0], a[1], b[0], b[1], d, psum,
                                        use_psum_layout=True, ensure_zero_padding=False,
                                        launcher_kwargs=dict(overrides=ov))


def _wrap(x):
    """int64 tensor of int32 differences, wrapped into [-2^31, 2^31)."""
    return (x + (1 << 31)) % (1 << 32) - (1 << 31)


def summary(words, ctas):
    """Per-CTA statistics from the [ctas, 2, SLOTS] sums (CTAs without blocks dropped)."""
    w = words[:ctas].to(torch.int64)
    n = w[:, :, 4]
    live = (n[:, 0] > 0) & (n[:, 0] == n[:, 1])
    w, n = w[live], n[live, 0].double()
    if w.numel() == 0:
        return "no CTA ran two-wave tiles"
    off0 = _wrap(w[:, 1, 0] - w[:, 0, 0]).double() / n
    off1 = _wrap(w[:, 1, 1] - w[:, 0, 1]).double() / n
    stats = []
    def mean(wg, slot):
        return _wrap(w[:, wg, slot]).double() / n
    for name, x in (("wave-0 offset", off0), ("wave-1 offset", off1), ("WG0 ready->w0", mean(0, 2)),
                    ("WG1 ready->w0", mean(1, 2)), ("WG0 w0->w1", mean(0, 3)), ("WG1 w0->w1", mean(1, 3)),
                    ("WG0 ready wait", mean(0, 5)), ("WG1 ready wait", mean(1, 5))):
        q = torch.quantile(x, torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64))
        stats.append(f"{name} {q[1]:6.0f} ({q[0]:6.0f}..{q[2]:6.0f})")
    return f"{int(live.sum())} CTAs | " + " | ".join(stats)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shipped", action="store_true", help="also time the uninstrumented kernel (4 more builds)")
    ap.add_argument("--levels", default="0,1", help="stagger levels to build, comma-separated (0-3)")
    args = ap.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",")]
    torch.manual_seed(0)
    timer = moe.KernelTimer(reps=10)
    from deep_gemm.gemm.kernels import fp8_gemm_ws
    original = fp8_gemm_ws._fp8_gemm_ws_kernel
    instrumented = patched_module("phase", patches())._fp8_gemm_ws_kernel
    cases = []
    for m, n, k in [(4096, 4096, 7168), (4096, 7168, 16384), (4096, 24576, 1536)]:
        buf, call = dense_case(m, n, k)
        cases += [(f"dense {m}x{n}x{k} stagger {lv}", buf, call, Fp8Overrides(stagger=lv, regs=REGS)) for lv in levels]
    buf, call = psum_case(4, 8192, 6144, 7168)
    cases += [(f"psum G=4 N=6144 K=7168 stagger {lv}", buf, call, Fp8Overrides(stagger=lv, regs=REGS))
              for lv in levels]
    use_kernel(instrumented)
    try:
        for label, buf, call, ov in cases:
            shipped = None
            if args.shipped:
                use_kernel(original)
                shipped = timer(lambda: call(ov))
                use_kernel(instrumented)
            us = timer(lambda: call(ov))
            buf[:PAD].zero_()
            call(ov)
            torch.cuda.synchronize()
            words = buf[:PAD].reshape(-1).view(torch.int32)
            words = words[words.numel() - REGION:].view(MAX_CTAS, 2, SLOTS).cpu()
            ref = f" ({shipped:7.1f} shipped)" if shipped is not None else ""
            print(f"{label:34s} {us:7.1f} us{ref} | {summary(words, MAX_CTAS)}", flush=True)
    finally:
        use_kernel(original)
    return 0


if __name__ == "__main__":
    sys.exit(main())
