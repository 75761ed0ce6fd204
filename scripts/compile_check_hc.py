"""Compile the HyperConnection and layout kernels for sm_90a on any machine (no GPU needed): registers, spills,
shared memory and SASS counts per config, the cheap first check before spending GPU time.

    python scripts/compile_check_hc.py          # every config the launchers pick (fails on a spill)
    python scripts/compile_check_hc.py --ptx    # also print the TF32 MMA instructions found in the PTX
    python scripts/compile_check_hc.py --fallback   # also the pointer-B fallback variants (Triton != 3.6)
    python scripts/compile_check_hc.py --layout-only
    python scripts/compile_check_hc.py --ws-only    # only the warp-specialised variant (kernels_ws.py, Gluon)

Run without TRITON_INTERPRET. Reuses scripts/compile_check.py's helpers (resource_usage, sass_counts).
"""

from __future__ import annotations

import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import triton  # noqa: E402
from compile_check import (SM90, gluon_desc_sig, partition_registers, ptxas_info, resource_usage,  # noqa: E402
                           sass_counts)
from triton.compiler import ASTSource  # noqa: E402


def _compile(fn, sig: dict, constexprs: dict, warps: int, stages: int = 1):
    sig = dict(sig)
    sig.update({k: "constexpr" for k in constexprs})
    src = ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in constexprs.items()})
    return triton.compile(src, target=SM90, options={"num_warps": warps, "num_stages": stages})


def compile_hc(bm, bn, stages, b_tma, reduce, red_chunk, warps=4):
    from deep_gemm.hyperconnection.kernels import _hc_prenorm_kernel
    sig = {"a_desc": f"tensordesc<bf16{[bm, 64]}>",
           "b_desc": f"tensordesc<fp32{[bn, 64]}>" if b_tma else f"tensordesc<bf16{[bm, 64]}>",
           "b_ptr": "*fp32", "d_ptr": "*fp32", "sq_ptr": "*fp32", "ws_ptr": "*fp32", "counter_ptr": "*i32"}
    sig.update({n: "i32" for n in ("M", "N", "K", "NUM_SPLITS", "SUB", "stride_bn", "stride_dm", "stride_ds")})
    return _compile(_hc_prenorm_kernel, sig, dict(BM=bm, BN=bn, BK=64, NUM_STAGES=stages, B_TMA=b_tma,
                                                  REDUCE=reduce, RED_CHUNK=red_chunk), warps, stages)


def compile_hc_ws(bm, bn, stages, consumers, tail=0):
    """The warp-specialised kernel (kernels_ws.py) with the descriptors hc_triton._execute_ws passes."""
    from triton.experimental.gluon._runtime import GluonASTSource

    from deep_gemm.hyperconnection import hc_plan
    from deep_gemm.hyperconnection.kernels_ws import _hc_prenorm_ws_kernel as fn
    b_rows = hc_plan.next_pow2(bn + tail)
    sig = {"a_desc": gluon_desc_sig([bm, 64], "bfloat16"), "b_desc": gluon_desc_sig([b_rows, 32], "float32"),
           "d_ptr": "*fp32", "sq_ptr": "*fp32", "ws_ptr": "*fp32", "counter_ptr": "*i32"}
    sig.update({n: "i32" for n in ("M", "N", "K", "stride_dm")})
    consumer_regs, producer_regs = hc_plan.WS_REGISTERS
    constexprs = dict(BM=bm, BN=bn, TAIL=tail, STAGES=stages, CONSUMERS=consumers, CONSUMER_REGS=consumer_regs,
                      PRODUCER_REGS=producer_regs)
    sig.update({k: "constexpr" for k in constexprs})
    src = GluonASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in constexprs.items()})
    return triton.compile(src, target=SM90, options={"num_warps": 4, "num_stages": 1})


def check_ws() -> int:
    """Compile every WS config; a spill, a serialised wgmma (ptxas C7514) or more than 227 KB of shared memory
    fails it. Prints the per-partition (setmaxnreg budget, registers used) estimate."""
    from deep_gemm.hyperconnection import hc_plan
    bad = 0
    for cfg in hc_plan.ws_compile_configs():
        ck = compile_hc_ws(**cfg)
        cubin = ck.asm["cubin"]
        usage = resource_usage(cubin)
        counts = sass_counts(cubin, ("HGMMA", "LDS.U16", "UTMALDG", "LDL", "STL"))
        serialised = "C7514" in ptxas_info(ck.asm["ptx"])
        ok = not (counts["LDL"] or counts["STL"] or spills(usage) or serialised or ck.metadata.shared > 227 * 1024)
        print("hc-ws", cfg, "smem", ck.metadata.shared, usage, counts, "SERIALISED" if serialised else "",
              "partitions (budget, used):", partition_registers(cubin), "" if ok else "<-- BAD", flush=True)
        bad += not ok
    return bad


def hc_configs():
    from deep_gemm.hyperconnection import hc_plan
    return hc_plan.compile_configs()


def compile_layout():
    """The layout kernels at the tiles layout_triton.py launches them with."""
    from deep_gemm.layout import kernels as k
    from deep_gemm.layout import layout_triton as lt
    ints = lambda *names: {n: "i32" for n in names}  # noqa: E731
    for cols, c_unit in ((lt.BLOCK_COLS, True), (lt.BLOCK_COLS, False), (1, False), (4, True)):
        br, bc = lt._tile(cols)
        yield f"mn_major_copy {br}x{bc} c_unit={c_unit}", _compile(k._mn_major_copy_kernel, {
            "sf_ptr": "*i32", "out_ptr": "*i32",
            **ints("R", "C", "stride_g", "stride_r", "stride_c", "out_stride_g", "out_stride_c")},
            dict(BR=br, BC=bc, C_UNIT=c_unit, R_UNIT=not c_unit), lt.NUM_WARPS)
        yield f"pack_ue8m0 {br}x{bc} c_unit={c_unit}", _compile(k._pack_ue8m0_kernel, {
            "sf_ptr": "*fp32", "out_ptr": "*i32",
            **ints("R", "SFK", "PACKED", "stride_g", "stride_r", "stride_c", "out_stride_g", "out_stride_c")},
            dict(BR=br, BI=bc, C_UNIT=c_unit, R_UNIT=not c_unit), lt.NUM_WARPS)
    for psum in (False, True):
        yield f"k_grouped_pack psum={psum}", _compile(k._k_grouped_pack_kernel, {
            "sf_ptr": "*fp32", "layout_ptr": "*i32", "out_ptr": "*i32",
            **ints("ROWS", "MN", "NUM_SF_ROWS", "NUM_GROUPS", "GRAN_K", "K_ALIGNMENT")},
            dict(USE_PSUM=psum, G_PAD=128, BP=lt.BLOCK_PACKED_ROWS, BC=lt.BLOCK_K_GROUPED_MN), lt.NUM_WARPS)


def spills(usage: str) -> int:
    m = re.search(r"STACK:(\d+)", usage)
    return int(m.group(1)) if m else 0


if __name__ == "__main__":
    bad = 0 if "--layout-only" in sys.argv else check_ws()
    if "--ws-only" in sys.argv:
        print("FAIL" if bad else "OK", f"({bad} WS configs spill, serialise or overflow shared memory)")
        sys.exit(1 if bad else 0)
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
        if (cfg["b_tma"] and (counts["LDL"] or counts["STL"])) or ck.metadata.shared > 227 * 1024:
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
