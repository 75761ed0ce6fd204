"""Compile deep_gemm.legacy's Triton kernels for sm_90a without a GPU and report shared memory, registers and
spills (run without TRITON_INTERPRET): ``python scripts/compile_check_legacy.py``."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

import triton  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from compile_check import FP_FUSION, SM90, resource_usage, spilled_bytes  # noqa: E402
from deep_gemm.legacy import api, kernels  # noqa: E402

SMEM_LIMIT = 227 * 1024


def compile_kernel(fn, pointers: dict, ints: list, constexprs: dict, num_warps: int = api.NUM_WARPS,
                   num_stages: int = api.NUM_STAGES, target=SM90):
    sig = dict(pointers)
    sig.update({name: "i32" for name in ints})
    sig.update({name: "constexpr" for name in constexprs})
    # What a launch sees for DeepGEMM-sized problems: Triton specialises pointers and ints divisible by 16 (tensor
    # starts, K, N, strides of [*, K] rows); without it the loads are not vectorised and the loop is not pipelined.
    aligned = [n for n in list(pointers) + ints if n != "M"]
    attrs = {(fn.arg_names.index(n),): [["tt.divisibility", 16]] for n in aligned}
    src = ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in constexprs.items()},
                    attrs=attrs)
    return triton.compile(src, target=target, options={"num_warps": num_warps, "num_stages": num_stages,
                                                     **FP_FUSION})


def shipped_cases() -> list:
    """(kernel, pointer signature, int arguments, constexprs) of every launch the legacy ops make."""
    tiles = dict(DOT_FP32=False, BLOCK_N=api.BLOCK_N, BLOCK_K=api.BLOCK_K)
    m_ints = ["M", "N", "K", "stride_am", "stride_bg", "stride_bn", "stride_bk", "stride_dm"]
    k_ints = ["M", "N", "stride_ak", "stride_bk", "stride_dg", "stride_dm"]
    cases = []
    for block_m in sorted({api.M_GROUPED_MAX_BLOCK_M, 64, 32, 16}, reverse=True):
        for unit in B_UNIT_STRIDES:  # NT and NN launches (B's unit stride is a constexpr 1 there)
            ints = [i for i in m_ints if i != unit]
            cases.append((kernels.m_grouped_bf16_gemm_contiguous_tl_impl,
                          dict(a_ptr="*bf16", b_ptr="*bf16", d_ptr="*bf16", m_indices_ptr="*i32"), ints,
                          dict(tiles, BLOCK_M=block_m, **{unit: 1})))
            cases.append((kernels.a_fused_m_grouped_bf16_gemm_contiguous_tl_impl,
                          dict(a_ptr="*bf16", b_ptr="*bf16", d_ptr="*bf16", m_indices_ptr="*i32",
                               row_indices_ptr="*i32"), ints, dict(tiles, BLOCK_M=block_m, **{unit: 1})))
    for fn in (kernels.a_fused_k_grouped_bf16_gemm_contiguous_tl_impl,
               kernels.b_fused_k_grouped_bf16_gemm_contiguous_tl_impl):
        for out in ("fp32", "bf16"):
            for acc in (False, True):
                cases.append((fn, dict(a_ptr="*bf16", b_ptr="*bf16", d_ptr=f"*{out}", k_indices_ptr="*i32",
                                       k_start_ptr="*i32", k_end_ptr="*i32"), k_ints,
                              dict(tiles, ACC=acc, BLOCK_M=api.K_GROUPED_BLOCK_M,
                                   BLOCK_N=api.K_GROUPED_BLOCK_N)))
    return cases


def main() -> int:
    bad = 0
    cases = shipped_cases()
    for fn, pointers, ints, constexprs in cases:
        ck = compile_kernel(fn, pointers, ints, constexprs)
        spills = spilled_bytes(ck.asm["cubin"])
        smem = ck.metadata.shared
        ok = spills == 0 and smem <= SMEM_LIMIT
        bad += not ok
        label = {k: v for k, v in constexprs.items() if k in ("BLOCK_M", "ACC", "stride_bk", "stride_bn")}
        print(f"{'ok ' if ok else 'BAD'} {fn.__name__} {label} d={pointers['d_ptr']} smem={smem} spills={spills} "
              f"{resource_usage(ck.asm['cubin'])}")
    return 1 if bad else 0


M_POINTERS = dict(a_ptr="*bf16", b_ptr="*bf16", d_ptr="*bf16", m_indices_ptr="*i32")
M_INTS = ["M", "N", "K", "stride_am", "stride_bg", "stride_bn", "stride_bk", "stride_dm"]
K_POINTERS = dict(a_ptr="*bf16", b_ptr="*bf16", d_ptr="*fp32", k_indices_ptr="*i32", k_start_ptr="*i32",
                  k_end_ptr="*i32")
K_INTS = ["M", "N", "stride_ak", "stride_bk", "stride_dg", "stride_dm"]
# A launch passes B's unit stride as the literal 1, which Triton 3.6 specialises into a constexpr: stride_bk for
# NT (B K-major), stride_bn for NN (B N-major). Compiled as a divisible-by-16 int instead, the B loads would not be
# vectorised along the contiguous dimension and the register counts would not be the launch's.
B_UNIT_STRIDES = ("stride_bk", "stride_bn")


if __name__ == "__main__":
    sys.exit(main())
