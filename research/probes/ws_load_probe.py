"""What of the two-wave kernel's loads costs time (session 12): the M=4096 dense shapes with the producer's TMA
loads changed, next to the kernel as shipped. Results are wrong on purpose except for `full` and `splitB`, which
are checked against the reference first.

    full     the kernel as shipped
    noA      no A load (16 of the stage's 48 KB; the stage expects B's bytes only)
    noB      no B load (32 KB)
    hot      both loads, of K blocks kb % 4 only: the same bytes into shared memory from an L2-resident working
             set (4 MB at 4096 x 4096), no DRAM traffic after the first touch
    halfB    A and the first half of B's rows: two loads, 32 KB (noA's bytes, the shipped kernel's load count)
    splitB   A and B as two 128-row boxes: three loads, the shipped kernel's 48 KB
halfB and splitB load through the split-tile descriptor (b2_desc), to which a patched copy of the launcher gives a
128-row box; they cannot slice the rings of 128 x 192 split tiles, so N = 2112 runs only the others.

Each variant is a patched copy of kernels/fp8_gemm_ws.py (and for halfB / splitB of gemm/fp8_triton.py:
research/probes/ws_variants.py), timed in one process with the benchmark's timer (L2 flushed, best of 2 x 30 reps).

    python research/probes/ws_load_probe.py [variant ...]
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
from ws_variants import LAUNCHER, patched_module, use_kernel  # noqa: E402

A_LOAD = "                tma.async_copy_global_to_shared(a_desc, [a_row, kb * BK], bar, a_bufs.index(stage))\n"
B_LOAD = "                tma.async_copy_global_to_shared(b_desc, [b_row, kb * BK], bar, b_bufs.index(stage))\n"
BYTES = "STAGE_BYTES: gl.constexpr = (a_desc.block_type.nbytes + b_desc.block_type.nbytes"
HALF_B = ("                tma.async_copy_global_to_shared(b2_desc, [b_row + {0}, kb * BK], bar, "
          "b_bufs.index(stage).slice({0}, TILE_N // 2))\n")
PATCHES = {
    "noA": [(A_LOAD, ""), (BYTES, "STAGE_BYTES: gl.constexpr = (b_desc.block_type.nbytes")],
    "noB": [(B_LOAD, ""), (BYTES, "STAGE_BYTES: gl.constexpr = (a_desc.block_type.nbytes")],
    "hot": [(A_LOAD, A_LOAD.replace("kb * BK", "(kb % 4) * BK")), (B_LOAD, B_LOAD.replace("kb * BK", "(kb % 4) * BK"))],
    "halfB": [(B_LOAD, HALF_B.format(0)), (BYTES, BYTES + " // 2")],
    "splitB": [(B_LOAD, HALF_B.format(0) + HALF_B.format("TILE_N // 2"))],
}
CHECKED = ("full", "splitB")
# The launcher copy for halfB / splitB: b2_desc (the narrow wave's B of split tiles, else B again) gets a box of half
# the tile's B rows.
B2_DESC = "b2_gluon = _gluon_operand_desc(b_desc, narrow) if split else b_gluon"
HALF_B2 = [(B2_DESC, B2_DESC.replace("else b_gluon", "else _gluon_operand_desc(b_desc, tile_n // 2)"))]

variants = sys.argv[1:] or ["full", "noA", "noB", "hot", "halfB", "splitB"]
timer = bench.KernelTimer(reps=30)
original = fp8_gemm_ws._fp8_gemm_ws_kernel
kernels = {name: original if name == "full" else patched_module(name, PATCHES[name])._fp8_gemm_ws_kernel
           for name in variants}
half_b2_launcher = patched_module("half_b2", HALF_B2, LAUNCHER) if {"halfB", "splitB"} & set(variants) else None
for n, k in [(4096, 7168), (7168, 16384), (24576, 1536), (7168, 2048), (2112, 7168)]:
    m = 4096
    a, b = bench.fp8_operands(m, n, k)
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    r = resolve_recipe(None, None, None, b[1])
    for name in variants:
        if name in ("halfB", "splitB") and n == 2112:
            continue
        launcher = half_b2_launcher if name in ("halfB", "splitB") else fp8_triton
        use_kernel(kernels[name])

        def run():
            launcher._launch_dense(a[0], a[1], b[0], b[1], d, None, r.b[0] == 1)
        if name in CHECKED:
            run()
            diff = calc_diff(d.float(), bench.reference(a, b, (128, 128)))
            assert diff < bench.CORRECTNESS_LIMIT, (name, m, n, k, diff)
        us = min(timer(run) for _ in range(2))
        print(f"{name:6s} {m}x{n}x{k}: {us:8.1f} us {2 * m * n * k / us / 1e6:7.0f} TFLOPS", flush=True)
use_kernel(original)
