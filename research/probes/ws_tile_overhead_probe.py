"""What a tile's start and end cost the two-wave kernel (session 13).

Timing the M=4096 shapes at different K gives a fixed cost per 128 x 256 tile of ~1.5 us (about 1.75 K blocks) on
top of ~0.86 us per K block: 30 % of the time at K=512, ~13 % at K=1536-2048. Two suspects, each removed in a
patched copy of the kernel (research/probes/ws_variants.py; results wrong on purpose except `base`):

    base      the kernel as shipped (checked against the reference)
    noscale0  the scales of each tile's first K block are constants instead of global loads
              (_first_block_scales; since the shipped change they are loaded before the previous tile's epilogue,
              for 2-D layouts; the session-13 numbers were taken when they were loaded at the tile's start)
    l2pf      the producer prefetches each K block's scales into L2 when it reaches the block (a few blocks
              before the consumers load them)
    nottma    the epilogue writes its shared-memory staging buffer but issues no TMA store and waits for none
              (the second slab's wait for the first slab's store to be read out is exposed once per tile)
    nowait    the TMA stores as shipped without the waits (the staging buffer is overwritten while being read)

    python research/probes/ws_tile_overhead_probe.py [variant ...]
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
from deep_gemm.testing import calc_diff  # noqa: E402
from ws_variants import patched_module, use_kernel  # noqa: E402

FIRST_SCALES = ("""    sa0 = gl.load(sfa_rows0, mask=ok & row_ok0, other=0.0)
    sb0 = gl.load(sfb_cols0, mask=ok, other=0.0)
    if WAVE_N:
        x1 = gl.load(sfb_cols1, mask=ok & wave1_ok, other=0.0)
    else:
        x1 = gl.load(sfa_rows1, mask=ok & row_ok1, other=0.0)
""", """    sa0 = row_ok0.to(gl.float32) * 0.0 + 1.0
    sb0 = ok.to(gl.float32) * 0.0 + 1.0
    if WAVE_N:
        x1 = sb0
    else:
        x1 = sa0
""")
TMA_STORE = ('''    tma.store_wait(pendings=0)
    c_smem.store(acc.to(d_desc.dtype))
    fence_async_shared()
    tma.async_copy_shared_to_global(d_desc, [row0, off_n], c_smem)
''', '''    c_smem.store(acc.to(d_desc.dtype))
    fence_async_shared()
''')
# l2pf: the producer prefetches each K block's 1D2D scales into L2 when it reaches the block (lanes 0-3: the lines of
# the tile's 128 A scales, M-major; lanes 4-5: the two waves' B scales), a few blocks before the consumers load them.
PREFETCH_FN = ("""@gluon.jit
def _swizzle(""", """@gluon.jit
def _prefetch_l2(ptrs):
    gl.inline_asm_elementwise("prefetch.global.L2 [$1];\\n\\tmov.u32 $0, 0;", "=r,l", [ptrs], dtype=gl.int32,
                              is_pure=False, pack=1)


@gluon.jit
def _swizzle(""")
PREFETCH_SETUP = ("""            for kb in range(kb0, kb0 + num_kb):
                stage = it % STAGES""", """            pf_lane = gl.arange(0, 32, layout=VEC)
            pf_a = sfa_ptr + group * stride_sfa_g + (off_m + gl.minimum(pf_lane, 3) * 32) * stride_sfa_m
            pf_b = sfb_ptr + expert * stride_sfb_g + (off_n // 128 + gl.minimum(gl.maximum(pf_lane - 4, 0), 1)) * stride_sfb_n
            for kb in range(kb0, kb0 + num_kb):
                _prefetch_l2(gl.where(pf_lane < 4, pf_a + kb * stride_sfa_k, pf_b + kb * stride_sfb_k))
                stage = it % STAGES""")
# nowait: the TMA stores as shipped but no wait for the staging buffer's previous store (a race: timing only)
NO_WAIT = ("""    tma.store_wait(pendings=0)
    c_smem.store(acc.to(d_desc.dtype))
""", """    c_smem.store(acc.to(d_desc.dtype))
""")
PATCHES = {"noscale0": [FIRST_SCALES], "nottma": [TMA_STORE], "l2pf": [PREFETCH_FN, PREFETCH_SETUP],
           "nowait": [NO_WAIT]}

variants = sys.argv[1:] or ["base", "noscale0", "l2pf", "nottma", "nowait"]
timer = bench.KernelTimer(reps=30)
original = fp8_gemm_ws._fp8_gemm_ws_kernel
kernels = {name: original if name == "base" else patched_module(name, PATCHES[name])._fp8_gemm_ws_kernel
           for name in variants}
for n, k in [(32768, 512), (24576, 1536), (7168, 2048), (4096, 7168)]:
    m = 4096
    a, b = bench.fp8_operands(m, n, k)
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    r = resolve_recipe(None, None, None, b[1])
    for name in variants:
        use_kernel(kernels[name])

        def run():
            fp8_triton._launch_dense(a[0], a[1], b[0], b[1], d, None, r.b[0] == 1)
        if name == "base":
            run()
            diff = calc_diff(d.float(), bench.reference(a, b, (128, 128)))
            assert diff < bench.CORRECTNESS_LIMIT, (name, m, n, k, diff)
        times = [timer(run) for _ in range(2)]
        print(f"{name:8s} {m}x{n}x{k}: {min(times):8.1f} us {2 * m * n * k / min(times) / 1e6:7.0f} TFLOPS "
              f"(runs {times[0]:.1f} / {times[1]:.1f})", flush=True)
use_kernel(original)
