"""What the consumers' warpgroup barriers cost the two-wave kernel (session 13).

Triton 3.6 lowers `mbarrier.arrive(bar, count=1)` to an arrival by thread 0 of the partition, and puts a named
barrier over the warpgroup's 128 threads before it (every warp must be done with the stage before one thread
releases it); it also puts one before each `mbarrier.wait` on `ready`. So every K block of the two-wave mainloop
holds each consumer warpgroup at two `bar.sync`s on its critical path, between one wave's promotion and the next
wgmma. DeepGEMM has none there: lane 0 of each math warp arrives on the `empty` barrier by itself (the barrier
counts one arrival per warp), right after its own wgmma wait.

This probe removes them from a patched copy of the kernel (research/probes/ws_variants.py), by rewriting its PTX:

    base     the kernel as shipped
    warp     each warp's lane 0 arrives on `empty` (initialised to 8 arrivals: 2 warpgroups x 4 warps), no
             warpgroup barrier before the arrival
    wait     no warpgroup barrier before the `ready` wait (arrivals as shipped)
    both     warp + wait

The kernel marks the instructions with PTX comments (markers); a `ptx`-stage hook deletes the first `bar.sync`
after each marker and, for `warp`, re-predicates the arrival on %laneid == 0. Only `_mainloop_two_waves` (1D2D
two-wave tiles) is marked, so only the M=4096 shapes on 128 x 256 tiles are timed. Every variant is checked against
the dequantised reference before it is timed (benchmark timer, L2 flushed, best of 2 x 30 reps), in one process.

    python research/probes/ws_barrier_probe.py [--compile-only] [variant ...]

--compile-only compiles each variant for sm_90a (no GPU needed) and prints the consumer loop's barriers and arrivals
from the SASS, so the rewrite can be checked before device time is spent.
"""

import os
import re
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(__file__))
from triton import knobs  # noqa: E402

from ws_variants import patched_module  # noqa: E402

# The version of the rewrite goes into the markers, hence into the kernel source and Triton's cache key (stage
# hooks are not part of it).
VERSION = "v1"
ARRIVE_MARK = f"// dg-probe {VERSION}: per-warp arrival"
WAIT_MARK = f"// dg-probe {VERSION}: no barrier before the wait"

MARKER_FN = ('''@gluon.jit
def _swizzle(''', '''@gluon.jit
def _probe_mark(PTX: gl.constexpr):
    gl.inline_asm_elementwise(PTX + "\\n\\tmov.u32 $0, 0;", "=r,r", [gl.program_id(0)], dtype=gl.int32,
                              is_pure=False, pack=1)


@gluon.jit
def _swizzle(''')
# The two-wave mainloop's `ready` wait and `empty` arrival (each appears once in _mainloop_two_waves).
WAIT_SITE = '''        b_tile = b_bufs.index(stage)
        mbarrier.wait(ready.index(stage), (it // STAGES) & 1)
        _stagger_wait(stagger, stage, (it // STAGES) & 1, kb, WG, STAGGER)
        part = warpgroup_mma(a_tile.slice(A_ROW0, WG_ROWS, dim=0), b_tile.slice(0, BN, dim=0).permute((1, 0)),'''
ARRIVE_SITE = '''        part = warpgroup_mma_wait(num_outstanding=0, deps=(part,))
        mbarrier.arrive(empty.index(stage), count=1)
        if WAVE_N:
            acc1 = acc1 + part * gl.expand_dims(sa0 * sb1, 1)'''
EMPTY_INIT = "mbarrier.init(empty.index(i), count=2)"


def _mark(site: str, line: str, mark: str) -> tuple[str, str]:
    indent = line[:len(line) - len(line.lstrip())]
    return site, site.replace(line, f'{indent}_probe_mark("{mark}")\n{line}')


WAIT_PATCH = _mark(WAIT_SITE, "        mbarrier.wait(ready.index(stage), (it // STAGES) & 1)", WAIT_MARK)
ARRIVE_PATCH = _mark(ARRIVE_SITE, "        mbarrier.arrive(empty.index(stage), count=1)", ARRIVE_MARK)
PATCHES = {
    "warp": [MARKER_FN, ARRIVE_PATCH, (EMPTY_INIT, EMPTY_INIT.replace("count=2", "count=8"))],
    "wait": [MARKER_FN, WAIT_PATCH],
    "both": [MARKER_FN, ARRIVE_PATCH, WAIT_PATCH, (EMPTY_INIT, EMPTY_INIT.replace("count=2", "count=8"))],
}

_BAR = re.compile(r"^\s*bar\.sync\s+\d+,\s*128;\s*$")
_ARRIVE = re.compile(r"^(\s*)@%p\d+\s+mbarrier\.arrive\.shared::cta\.b64\s+_,\s*\[(%r\d+)\];\s*$")
_TRY_WAIT = re.compile(r"^\s*mbarrier\.try_wait\.parity")
_CONTROL_FLOW = re.compile(r"^\s*((@!?%p\d+\s+)?bra(\.uni)?\s|\$L__BB\w*:)")
SEARCH_LINES = 60


def rewrite(ptx: str) -> str:
    """Delete the first warpgroup `bar.sync` after each marker; re-predicate the arrival after an arrival marker on
    lane 0 of each warp. Fails unless each marker finds both in straight-line code before its instruction."""
    if "// dg-probe" not in ptx:
        return ptx
    lines = ptx.split("\n")
    drop = set()
    found = 0
    for i, line in enumerate(lines):
        mark = ARRIVE_MARK if ARRIVE_MARK in line else WAIT_MARK if WAIT_MARK in line else None
        if mark is None:
            continue
        bar = None
        for j in range(i + 1, min(i + SEARCH_LINES, len(lines))):
            if _CONTROL_FLOW.match(lines[j]):
                raise RuntimeError(f"{mark!r}: control flow before its instruction")
            if bar is None and _BAR.match(lines[j]):
                bar = j
            elif mark == WAIT_MARK and _TRY_WAIT.match(lines[j]):
                break
            elif mark == ARRIVE_MARK and _ARRIVE.match(lines[j]):
                indent, addr = _ARRIVE.match(lines[j]).groups()
                lines[j] = (f"{indent}{{\n{indent}.reg .b32 dg_lane;\n{indent}.reg .pred dg_lead;\n"
                            f"{indent}mov.u32 dg_lane, %laneid;\n{indent}setp.eq.u32 dg_lead, dg_lane, 0;\n"
                            f"{indent}@dg_lead mbarrier.arrive.shared::cta.b64 _, [{addr}];\n{indent}}}")
                break
        else:
            raise RuntimeError(f"{mark!r}: instruction not found")
        if bar is None:
            raise RuntimeError(f"{mark!r}: no warpgroup barrier before its instruction")
        drop.add(bar)
        found += 1
    return "\n".join(line for i, line in enumerate(lines) if i not in drop)


def _hook(backend, stages, options, language, capability):
    make_ptx = stages.get("ptx")
    if make_ptx is None or getattr(make_ptx, "_dg_probe", False):
        return

    def ptx_stage(src, metadata):
        return rewrite(make_ptx(src, metadata))
    ptx_stage._dg_probe = True
    stages["ptx"] = ptx_stage


def compile_only(variants):
    import compile_check as cc
    from deep_gemm.gemm.kernels import fp8_gemm_ws
    original = fp8_gemm_ws._fp8_gemm_ws_kernel
    for name in variants:
        fp8_gemm_ws._fp8_gemm_ws_kernel = (original if name == "base"
                                           else patched_module(name, PATCHES[name])._fp8_gemm_ws_kernel)
        ck = cc.compile_fp8_gemm_ws(waves=2, wave_n=True, stages=4, consumer_regs=224, producer_regs=56)
        # (the consumers' named barriers over 128 threads: ids 0 and 2)
        sass = cc.sass_counts(ck.asm["cubin"], ("BAR.SYNC.DEFER_BLOCKING 0x0, 0x80", "BAR.SYNC.DEFER_BLOCKING 0x2, 0x80",
                                                "QGMMA"))
        ptx = ck.asm["ptx"]
        print(f"{name:5s} {cc.resource_usage(ck.asm['cubin'])}  PTX: bar.sync x128 "
              f"{len(re.findall(r'bar.sync.*128;', ptx))}, lane arrivals {ptx.count('dg_lead mbarrier')}; SASS: named "
              f"128-thread BAR.SYNC {sass['BAR.SYNC.DEFER_BLOCKING 0x0, 0x80'] + sass['BAR.SYNC.DEFER_BLOCKING 0x2, 0x80']}"
              f", QGMMA {sass['QGMMA']}", flush=True)
    fp8_gemm_ws._fp8_gemm_ws_kernel = original


def time_variants(variants):
    import torch
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import bench_fp8_gemm as bench
    from deep_gemm.gemm import fp8_triton
    from deep_gemm.gemm.kernels import fp8_gemm_ws
    from deep_gemm.gemm.operands import resolve_recipe
    from deep_gemm.testing import calc_diff
    from ws_variants import use_kernel
    timer = bench.KernelTimer(reps=30)
    original = fp8_gemm_ws._fp8_gemm_ws_kernel
    kernels = {name: original if name == "base" else patched_module(name, PATCHES[name])._fp8_gemm_ws_kernel
               for name in variants}
    for n, k in [(4096, 7168), (7168, 16384), (24576, 1536), (7168, 2048), (32768, 512)]:
        m = 4096
        a, b = bench.fp8_operands(m, n, k)
        ref = bench.reference(a, b, (128, 128))
        r = resolve_recipe(None, None, None, b[1])
        for name in variants:
            use_kernel(kernels[name])
            d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)

            def run():
                fp8_triton._launch_dense(a[0], a[1], b[0], b[1], d, None, r.b[0] == 1)
            run()
            diff = calc_diff(d.float(), ref)
            assert diff < bench.CORRECTNESS_LIMIT, (name, m, n, k, diff)
            times = [timer(run) for _ in range(2)]
            us = min(times)
            print(f"{name:5s} {m}x{n}x{k}: {us:8.1f} us {2 * m * n * k / us / 1e6:7.0f} TFLOPS "
                  f"(runs {times[0]:.1f} / {times[1]:.1f}) diff {diff:.1e}", flush=True)
    use_kernel(original)


if __name__ == "__main__":
    knobs.runtime.add_stages_inspection_hook = _hook
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    chosen = args or ["base", "warp", "wait", "both"]
    if "--compile-only" in sys.argv:
        compile_only(chosen)
    else:
        time_variants(chosen)
