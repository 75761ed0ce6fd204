"""Compile the FP4 GEMM kernel (deep_gemm/gemm/fp4/kernels.py) for sm_90a on any machine (no GPU needed): every
variant the launchers (deep_gemm/gemm/fp4/launch.py) pick (both plan tiles x the K-grouped, psum, NVFP4 and FP8 x FP4
forms and the M-grouped ones: expert ids, psum, masked; BF16 and FP32 outputs, with and without C), with registers,
spills, shared memory and BF16 wgmma (HGMMA) counts.

    python scripts/compile_check_fp4.py

Run without TRITON_INTERPRET. Fails when a variant does not compile, spills, or overflows shared memory.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from compile_check import SM90, report_variants  # noqa: E402
from compile_check_hc import _compile  # noqa: E402

_INTS = ("M", "N", "K", "G", "stride_ag", "stride_am", "stride_ak", "stride_bg", "stride_bn", "stride_bk",
         "stride_sfag", "stride_sfam", "stride_sfak", "stride_sfbg", "stride_sfbn", "stride_sfbk", "sfa_col_tiles",
         "sfb_col_tiles", "stride_dg", "stride_dm", "stride_cg", "stride_cm")
_SF_TYPE = {0: "*fp32", 1: "*i32", 2: "*u8"}


def forms():
    """(name, form keyword arguments) of every launcher form (deep_gemm/gemm/fp4/launch.py)."""
    from deep_gemm.gemm.fp4 import launch as fl
    kg = dict(a_fp4=True, b_fp4=True, sf_kind=fl.SF_FP32, gran_k_a=32, gran_k_b=32, d="fp32", layout="*i32")
    yield "k_grouped c", dict(kg, grouping=fl.K_GROUPED, has_c=True)
    yield "k_grouped psum", dict(kg, grouping=fl.K_GROUPED_PSUM, psum_align=128, has_c=False)
    for d in ("bf16", "fp32"):
        yield f"nvfp4 d={d}", dict(a_fp4=True, b_fp4=True, sf_kind=fl.SF_UE4M3_TILED, gran_k_a=16, gran_k_b=16, d=d,
                                   has_c=d == "fp32")
    for a_fp4, b_fp4 in ((False, True), (True, True), (False, False)):
        yield f"fp8_fp4 a_fp4={a_fp4} b_fp4={b_fp4}", dict(a_fp4=a_fp4, b_fp4=b_fp4, sf_kind=fl.SF_UE8M0_INT,
                                                          gran_k_a=128 if not a_fp4 else 32, gran_k_b=32, d="bf16",
                                                          has_c=False)
    for d in ("bf16", "fp32"):
        yield f"fp8_fp4 fp32 scales d={d}", dict(a_fp4=False, b_fp4=True, sf_kind=fl.SF_FP32, gran_k_a=128,
                                                  gran_k_b=32, d=d, has_c=d == "fp32", scale_after=True)
    yield "fp8_fp4 fp32 scales 1d2d", dict(a_fp4=True, b_fp4=False, sf_kind=fl.SF_FP32, gran_k_a=32, gran_k_b=128,
                                           gran_n_b=128, d="bf16", has_c=False, scale_after=True)
    m_grouped = dict(a_fp4=False, b_fp4=True, sf_kind=fl.SF_UE8M0_INT, gran_k_a=32, gran_k_b=32, d="bf16",
                     has_c=False, layout="*i32")
    yield "m_grouped ids", dict(m_grouped, grouping=fl.M_IDS)
    yield "m_grouped psum", dict(m_grouped, grouping=fl.M_PSUM, psum_align=128, zero_gaps=False)
    yield "m_grouped masked", dict(m_grouped, grouping=fl.MASKED)


def compile_fp4(cfg, a_fp4, b_fp4, sf_kind, gran_k_a, gran_k_b, d, has_c, grouping=0, psum_align=1, zero_gaps=True,
                scale_after=False, gran_n_b=1, layout=None, target=SM90):
    from deep_gemm.gemm.fp4.kernels import _fp4_gemm_kernel
    sf = _SF_TYPE[sf_kind]
    sig = {"a_ptr": "*u8", "b_ptr": "*u8", "sfa_ptr": sf, "sfb_ptr": sf, "d_ptr": f"*{d}", "c_ptr": f"*{d}",
           "layout_ptr": layout or f"*{d}", **{n: "i32" for n in _INTS}}
    constexprs = dict(BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m,
                      A_FP4=a_fp4, B_FP4=b_fp4, SF_KIND=sf_kind, GRAN_K_A=gran_k_a, GRAN_K_B=gran_k_b,
                      GRAN_N_B=gran_n_b,
                      GROUPING=grouping, G_POW2=256 if grouping == 4 else 8, PSUM_ALIGN=psum_align,
                      ZERO_GAPS=zero_gaps, SCALE_AFTER=scale_after, HAS_C=has_c)
    return _compile(_fp4_gemm_kernel, sig, constexprs, cfg.num_warps, cfg.num_stages, target=target)


def configured_forms():
    """(config, name, form) of every variant: each form at the tiles the plan gives its scale mode."""
    from deep_gemm.gemm.fp4 import plan as fp
    for scale_after in (False, True):
        for cfg in fp.compile_configs(scale_after):
            for name, form in forms():
                if form.get("scale_after", False) == scale_after:
                    yield cfg, name, form


def builders(target=SM90) -> list:
    """(name, a function compiling it) for every variant."""
    out = []
    for cfg, name, form in configured_forms():
        label = f"{name} {cfg.block_m}x{cfg.block_n}x{cfg.block_k} w{cfg.num_warps} s{cfg.num_stages}"
        out.append((label, lambda c=cfg, f=form: compile_fp4(c, target=target, **f)))
    return out


if __name__ == "__main__":
    sys.exit(report_variants("fp4", builders(), ("HGMMA", "HMMA", "LDL", "STL")))
