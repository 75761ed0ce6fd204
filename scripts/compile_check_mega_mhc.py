"""Compile the mega_mhc kernels (deep_gemm/mega_mhc/kernels.py) for sm_90a on any machine (no GPU needed): every
variant the launcher picks (kernel 1 at both token blocks; kernel 2 at each hidden row width the plan holds, normal
and shifted, every output form), with registers, spills, shared memory and the MMA counts, the cheap first check
before spending GPU time.

    python scripts/compile_check_mega_mhc.py

Run without TRITON_INTERPRET. Fails when a variant does not compile, spills, or overflows shared memory.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from compile_check import SM90, int_args, report_variants, thunk_builders  # noqa: E402
import triton  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from compile_check import FP_FUSION  # noqa: E402

# (HAS_BF16, HAS_FP8, HAS_SHARED): the output forms the op's check admits.
OUTPUT_FORMS = ((True, False, False), (True, True, False), (True, True, True), (False, True, False),
                (False, True, True))


# Row tensors: the launcher passes 16-byte aligned ones only, and Triton specialises on it.
POST_ALIGNED = ("x_ptr", "res_ptr", "fn_ptr", "nr_ptr", "u_ptr")
NORM_ALIGNED = ("nr_ptr", "u_ptr", "weight_ptr", "y_ptr", "y_fp8_ptr")


def _compile_aligned(fn, sig: dict, constexprs: dict, warps: int, aligned=POST_ALIGNED, max_registers=None,
                     target=SM90):
    sig = dict(sig)
    sig.update({k: "constexpr" for k in constexprs})
    attrs = {(fn.arg_names.index(n),): [["tt.divisibility", 16]] for n in aligned}
    src = ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in constexprs.items()},
                    attrs=attrs)
    cap = {} if max_registers is None else {"maxnreg": max_registers}
    return triton.compile(src, target=target, options={"num_warps": warps, "num_stages": 1, **cap, **FP_FUSION})



def builders(target=SM90) -> list:
    """(name, a function compiling it) for every kernel variant the launcher (deep_gemm/mega_mhc/launch.py) picks."""
    return thunk_builders(_thunks(target))



def _thunks(target):
    from deep_gemm.mega_mhc import kernels as k
    from deep_gemm.mega_mhc import plan as mp
    from deep_gemm.utils.numeric import next_pow2
    n_out = mp.NUM_ROUTES * (mp.NUM_ROUTES + 2)
    for bt in mp.SUPPORTED_BLOCK_T:
        for shifted in (False, True):
            yield f"post bt={bt} shifted={shifted}", lambda bt=bt, shifted=shifted: _compile_aligned(
                k._mhc_post_kernel, {
                    "x_ptr": "*bf16", "res_ptr": "*bf16", "post_ptr": "*fp32", "comb_ptr": "*fp32",
                    "shifted_ptr": "*fp32", "fn_ptr": "*fp32", "nr_ptr": "*bf16", "u_ptr": "*bf16",
                    "ws_ptr": "*fp32", **int_args("T", "CHUNKS", "SPLITS")},
                dict(BT=bt, BH=mp.BLOCK_H, N=mp.PROJ_N, MMA_M=mp.PROJ_MMA_M, NUM_OUT=n_out, SQ_COL=mp.PROJ_SQ_COL,
                     SHIFTED=shifted), mp.POST_WARPS, target=target)
    for cfg, hidden in mp.compile_configs():
        w_pow2 = cfg.norm_block // (mp.SF_GROUP * mp.SF_PER_WORD)
        for shifted in (False, True):
            for bf16, fp8, shared in OUTPUT_FORMS:
                name = f"norm h={hidden} warps={cfg.norm_warps} shifted={shifted} bf16={bf16} fp8={fp8} " \
                       f"shared={shared}"
                yield name, lambda cfg=cfg, w_pow2=w_pow2, flags=(shifted, bf16, fp8, shared): _compile_aligned(
                    k._mhc_norm_kernel, {
                        "nr_ptr": "*bf16", "u_ptr": "*bf16", "ws_ptr": "*fp32", "mix_scales_ptr": "*fp32",
                        "mix_bases_ptr": "*fp32", "weight_ptr": "*bf16", "post_out_ptr": "*fp32",
                        "comb_out_ptr": "*fp32", "prev_out_ptr": "*fp32", "y_ptr": "*bf16",
                        "y_fp8_ptr": "*fp8e4nv" if flags[2] else "*bf16",
                        "sf_ptr": "*i32" if flags[2] else "*bf16", "shared_ptr": "*i32" if flags[3] else "*bf16",
                        **int_args("T", "WORDS", "SPLITS", "num_sinkhorn_iters"),
                        **{f: "fp32" for f in ("hc_norm_eps", "hc_pre_eps", "hc_post_scale", "sinkhorn_eps",
                                               "rmsnorm_eps", "rmsnorm_scale")},
                        **int_args("stride_sf_t", "stride_sf_w", "stride_shared_w", "shared_block_m",
                                "shared_block_rows")},
                    dict(S_POW2=next_pow2(mp.MAX_SPLITS), N=mp.PROJ_N, SQ_COL=mp.PROJ_SQ_COL, W_POW2=w_pow2,
                         GROUP=mp.SF_GROUP, SHIFTED=flags[0], HAS_BF16=flags[1], HAS_FP8=flags[2],
                         HAS_SHARED=flags[3]), cfg.norm_warps, NORM_ALIGNED, cfg.norm_max_registers,
                    target=target)


if __name__ == "__main__":
    sys.exit(report_variants("mega_mhc", builders(), ("HGMMA", "HMMA", "LDL", "STL")))
