"""Probe patches of the warp-specialised producer's TMA loads (results become garbage: timing only):

* noA / noB: drop the A (16 KB per stage of a 128 x 256 tile) or the B load (32 KB);
* hot: keep both loads, but of the first 4 K blocks only, over and over (K block kb % 4): the same bytes into
  shared memory from the same rows, but a working set of 4 K blocks of A and B (4 MB at 4096 x 4096), resident in
  L2: no DRAM traffic after the first touch;
* halfB: A and the first half of B's rows (two loads, 32 KB: noA's bytes with the unpatched kernel's load count);
* splitB: A and B's rows as two 128-row loads (three loads, the unpatched kernel's 48 KB);
* restore: put the original back.

halfB and splitB load through the split-tile descriptor (b2_desc), which the patched launcher gives a 128-row box.

    python benchmarks/probes/patch_loads.py noA && python benchmarks/probes/time_dense4096.py noA
    python benchmarks/probes/patch_loads.py restore
"""
import os
import shutil
import sys

P = "deep_gemm/gemm/kernels/fp8_gemm_ws.py"
L = "deep_gemm/gemm/fp8_triton.py"
B2_DESC = "b2_gluon = _gluon_operand_desc(b_desc, narrow) if split else b_gluon"
A_LOAD = "                tma.async_copy_global_to_shared(a_desc, [a_row, kb * BK], bar, a_bufs.index(stage))\n"
B_LOAD = "                tma.async_copy_global_to_shared(b_desc, [b_row, kb * BK], bar, b_bufs.index(stage))\n"
HEAD = "STAGE_BYTES: gl.constexpr = (a_desc.block_type.nbytes + b_desc.block_type.nbytes"

mode = sys.argv[1]
if mode == "restore":
    shutil.copy(P + ".orig", P)
    shutil.copy(L + ".orig", L)
    sys.exit()
if os.path.exists(P + ".orig"):
    sys.exit(f"{P}.orig exists: restore first (a second patch would make the patched file the original)")
shutil.copy(P, P + ".orig")
shutil.copy(L, L + ".orig")
s = open(P).read()
assert HEAD in s and A_LOAD in s and B_LOAD in s
if mode in ("noA", "noB"):
    keep, drop = ("b_desc", A_LOAD) if mode == "noA" else ("a_desc", B_LOAD)
    s = s.replace(HEAD, f"STAGE_BYTES: gl.constexpr = ({keep}.block_type.nbytes", 1).replace(drop, "", 1)
elif mode == "hot":
    s = s.replace(A_LOAD, A_LOAD.replace("kb * BK", "(kb % 4) * BK"), 1)
    s = s.replace(B_LOAD, B_LOAD.replace("kb * BK", "(kb % 4) * BK"), 1)
elif mode in ("halfB", "splitB"):
    half = ("                tma.async_copy_global_to_shared(b2_desc, [b_row + {0}, kb * BK], bar, "
            "b_bufs.index(stage).slice({0}, TILE_N // 2))\n")
    loads = half.format(0) if mode == "halfB" else half.format(0) + half.format("TILE_N // 2")
    s = s.replace(B_LOAD, loads, 1)
    if mode == "halfB":
        s = s.replace(HEAD, "STAGE_BYTES: gl.constexpr = (a_desc.block_type.nbytes + b_desc.block_type.nbytes // 2", 1)
    launcher = open(L).read()
    assert B2_DESC in launcher
    open(L, "w").write(launcher.replace(B2_DESC, B2_DESC.replace("else b_gluon",
                                                                 "else _gluon_operand_desc(b_desc, tile_n // 2)")))
else:
    raise SystemExit(f"unknown mode {mode}")
open(P, "w").write(s)
