"""Compile the bf16_mega_gate routing kernel (deep_gemm/mega_gate/kernels.py) for sm_90a on any machine (no GPU
needed): every token / expert / slot block the plan picks over DeepSeek's router sizes and the extremes the checks
allow, each bare (no optional argument) and with every optional argument on, in each scoring function, with
registers and spills, the cheap first check before spending GPU time. (The gate GEMM is the BF16 GEMM's kernel,
compile-checked by compile_check.py --bf16.)

    python scripts/compile_check_mega_gate.py

Run without TRITON_INTERPRET. Fails when a variant does not compile or spills.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from compile_check import FP_FUSION, SM90, report_variants, thunk_builders  # noqa: E402
import triton  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

FLAGS = ("HAS_BIAS", "HAS_IMAGE", "HAS_MASK", "HAS_FIX", "HAS_UNMAPPED", "HAS_MAP", "HAS_RANDOM", "HAS_OUT")
SIGNATURE = {
    "logits_ptr": "*fp32", "bias_ptr": "*fp32", "image_bias_ptr": "*fp32", "image_mask_ptr": "*u8",
    "mask_ptr": "*u8", "fix_mask_ptr": "*u8", "unmapped_ptr": "*i64", "map_ptr": "*i32", "count_ptr": "*i32",
    "random_ptr": "*u8", "idx_ptr": "*i64", "w_ptr": "*fp32", "out_idx_ptr": "*i64", "out_w_ptr": "*fp32",
    **{n: "i32" for n in ("T", "E", "K", "S", "D", "ep_rank", "unmapped_stride")}, "scale": "fp32"}


def _compile(cfg, scoring: int, flags: tuple, target=SM90):
    from deep_gemm.mega_gate import kernels as k
    fn = k._gate_route_kernel
    constexprs = dict(BT=cfg.block_t, BE=cfg.block_e, BK=cfg.block_k, BC=cfg.block_c, SCORING=scoring,
                      **dict(zip(FLAGS, flags)))
    sig = dict(SIGNATURE)
    sig.update({n: "constexpr" for n in constexprs})
    src = ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(n),): v for n, v in constexprs.items()})
    return triton.compile(src, target=target, options={"num_warps": cfg.warps, "num_stages": 1, **FP_FUSION})


def _thunks(target):
    from deep_gemm.mega_gate import launch
    from deep_gemm.mega_gate import plan as gp
    for cfg, experts, topk, shared in gp.compile_configs():
        forms = [("identity", (False,) * len(FLAGS))]
        forms += [(name, (True,) * len(FLAGS)) for name in launch.SCORING_CODES]
        for scoring, flags in forms:
            name = (f"route e={experts} k={topk} s={shared} bt={cfg.block_t} {scoring} "
                    f"{'all-optional' if flags[0] else 'bare'}")
            yield name, lambda cfg=cfg, code=launch.SCORING_CODES[scoring], flags=flags: _compile(
                cfg, code, flags, target)


def builders(target=SM90) -> list:
    """(name, a function compiling it) for every kernel variant the launcher (deep_gemm/mega_gate/launch.py) picks."""
    return thunk_builders(_thunks(target))


def variants(target=SM90):
    """(name, compiled kernel), compiled one after another."""
    for name, build in builders(target):
        yield name, build()


if __name__ == "__main__":
    sys.exit(report_variants("mega_gate", builders(), needles=("LDL", "STL")))
