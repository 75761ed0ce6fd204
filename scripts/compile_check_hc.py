"""Compile the HyperConnection and layout kernels for sm_90a on any machine (no GPU needed): registers, spills,
shared memory and SASS counts per config, the cheap first check before spending GPU time.

    python scripts/compile_check_hc.py          # every config the launchers pick (fails on a spill)
    python scripts/compile_check_hc.py --ptx    # also print the TF32 MMA instructions found in the PTX
    python scripts/compile_check_hc.py --fallback   # also the pointer-B fallback variants (Triton != 3.6)
    python scripts/compile_check_hc.py --layout-only

Run without TRITON_INTERPRET. Reuses scripts/compile_check.py's helpers (resource_usage, sass_counts).
"""

from __future__ import annotations

import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import triton  # noqa: E402
from compile_check import FP_FUSION, SM90, resource_usage, sass_counts, stack_allowance  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402


def _compile(fn, sig: dict, constexprs: dict, warps: int, stages: int = 1, target=SM90):
    sig = dict(sig)
    sig.update({k: "constexpr" for k in constexprs})
    src = ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in constexprs.items()})
    return triton.compile(src, target=target, options={"num_warps": warps, "num_stages": stages, **FP_FUSION})


def compile_hc(bm, bn, stages, b_tma, reduce, red_chunk, warps=4, target=SM90):
    from deep_gemm.hyperconnection.kernels import _hc_prenorm_kernel
    sig = {"a_desc": f"tensordesc<bf16{[bm, 64]}>",
           "b_desc": f"tensordesc<fp32{[bn, 64]}>" if b_tma else f"tensordesc<bf16{[bm, 64]}>",
           "b_ptr": "*fp32", "d_ptr": "*fp32", "sq_ptr": "*fp32", "ws_ptr": "*fp32", "counter_ptr": "*i32"}
    sig.update({n: "i32" for n in ("M", "N", "K", "NUM_SPLITS", "SUB", "stride_bn", "stride_dm", "stride_ds")})
    return _compile(_hc_prenorm_kernel, sig, dict(BM=bm, BN=bn, BK=64, NUM_STAGES=stages, B_TMA=b_tma,
                                                  REDUCE=reduce, RED_CHUNK=red_chunk), warps, stages, target)


def hc_configs():
    from deep_gemm.hyperconnection import plan as hc_plan
    return hc_plan.compile_configs()


def compile_layout(target=SM90):
    """The layout kernels at the tiles layout/plan.py gives their launches, built for ``target``."""
    from deep_gemm.layout import kernels as k
    from deep_gemm.layout import plan as lt
    ints = lambda *names: {n: "i32" for n in names}  # noqa: E731
    for cols, c_unit in ((lt.BLOCK_COLS, True), (lt.BLOCK_COLS, False), (1, False), (4, True)):
        br, bc = lt.tile(cols)
        yield f"mn_major_copy {br}x{bc} c_unit={c_unit}", _compile(k._mn_major_copy_kernel, {
            "sf_ptr": "*i32", "out_ptr": "*i32",
            **ints("R", "C", "stride_g", "stride_r", "stride_c", "out_stride_g", "out_stride_c")},
            dict(BR=br, BC=bc, C_UNIT=c_unit, R_UNIT=not c_unit), lt.NUM_WARPS, target=target)
        yield f"pack_ue8m0 {br}x{bc} c_unit={c_unit}", _compile(k._pack_ue8m0_kernel, {
            "sf_ptr": "*fp32", "out_ptr": "*i32",
            **ints("R", "SFK", "PACKED", "stride_g", "stride_r", "stride_c", "out_stride_g", "out_stride_c")},
            dict(BR=br, BI=bc, C_UNIT=c_unit, R_UNIT=not c_unit), lt.NUM_WARPS, target=target)
    for psum in (False, True):
        yield f"k_grouped_pack psum={psum}", _compile(k._k_grouped_pack_kernel, {
            "sf_ptr": "*fp32", "layout_ptr": "*i32", "out_ptr": "*i32",
            **ints("ROWS", "MN", "NUM_SF_ROWS", "NUM_GROUPS", "GRAN_K", "K_ALIGNMENT")},
            dict(USE_PSUM=psum, G_PAD=128, BP=lt.BLOCK_PACKED_ROWS, BC=lt.BLOCK_K_GROUPED_MN), lt.NUM_WARPS,
            target=target)


def spills(usage: str) -> int:
    m = re.search(r"STACK:(\d+)", usage)
    return int(m.group(1)) if m else 0


if __name__ == "__main__":
    bad = 0
    configs = [] if "--layout-only" in sys.argv else hc_configs()
    if "--fallback" not in sys.argv:
        configs = [c for c in configs if c["b_tma"]]
    for cfg in configs:
        ck = compile_hc(**cfg)
        cubin = ck.asm["cubin"]
        usage = resource_usage(cubin)
        counts = sass_counts(cubin, ("HMMA", "HGMMA", "UTMALDG", "LDGSTS", "LDL", "STL"))
        print("hc", cfg, "smem", ck.metadata.shared, usage, counts, flush=True)
        # The pointer fallback (Triton versions without the direct launch path) may spill a few words: reported only.
        # (stack_allowance: the slot Triton 3.8 / 3.9 leave outside the main loop.)
        if (cfg["b_tma"] and spills(usage) > stack_allowance()) or ck.metadata.shared > 227 * 1024:
            bad += 1
        if "--ptx" in sys.argv:
            print("  ", sorted(set(re.findall(r"(wgmma\.\S+|mma\.sync\.\S+)", ck.asm["ptx"]))))
    for name, ck in compile_layout():
        cubin = ck.asm["cubin"]
        counts = sass_counts(cubin, ("LDL", "STL"))
        print("layout", name, "smem", ck.metadata.shared, resource_usage(cubin), counts, flush=True)
        if counts["LDL"] or counts["STL"]:
            bad += 1
    print("FAIL" if bad else "OK", f"({bad} configs spill or overflow shared memory)")
    sys.exit(1 if bad else 0)
