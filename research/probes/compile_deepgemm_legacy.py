"""Compile DeepGEMM's own legacy Triton kernels (read from .dg/DeepGEMM at run time, never copied here) for sm_90a
at the tiles of research/sweeps/sweep_legacy_tiles.py, to compare their registers / spills / shared memory with
ours (scripts/compile_check_legacy.py --candidates). No GPU; run without TRITON_INTERPRET:

    python research/probes/compile_deepgemm_legacy.py [--dg .dg/DeepGEMM]

DeepGEMM's kernels take N and K (M-grouped) or M and N (K-grouped) as constexprs; the probe uses test_legacy's
first row sizes. Result on Triton 3.6 (2026-12-02): its M-grouped kernel uses 112 / 102 registers (B K-/N-major)
at 128x128x64/w8/s3 against our 124 / 106, 194 / 186 at 128x256x64 against our 207, no spills; its K-grouped
kernel with the B gather uses 182 at 128x128x64 (ours 190) and spills 176 bytes at 128x256x64, as ours does.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import triton  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from compile_check import SM90, resource_usage, spilled_bytes  # noqa: E402

LEGACY = os.path.join(ROOT, ".dg", "DeepGEMM", "deep_gemm", "legacy")  # --dg replaces it


def load_kernel(file: str, name: str, next_def: str):
    """The @triton.jit function of a DeepGEMM file without its autotune decorator and imports (which need its
    compiled extension), written to a temporary module (Triton reads the function's source from its file)."""
    text = open(os.path.join(LEGACY, file)).read()
    body = text[text.index("@triton.jit"):text.index("\ndef " + next_def)]
    tmp = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False)
    tmp.write("import triton\nimport triton.language as tl\n" + body)
    tmp.close()
    spec = importlib.util.spec_from_file_location(name, tmp.name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def compile_one(fn, pointers: dict, ints: list, constexprs: dict, warps: int, stages: int):
    sig = dict(pointers, **{n: "i32" for n in ints}, **{n: "constexpr" for n in constexprs})
    aligned = list(pointers) + [i for i in ints if i != "M"]
    attrs = {(fn.arg_names.index(n),): [["tt.divisibility", 16]] for n in aligned}
    src = ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in constexprs.items()},
                    attrs=attrs)
    ck = triton.compile(src, target=SM90, options={"num_warps": warps, "num_stages": stages})
    return ck.metadata.shared, spilled_bytes(ck.asm["cubin"]), resource_usage(ck.asm["cubin"]).split()[0]


def main() -> int:
    global LEGACY
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dg", default="", help="DeepGEMM's source tree (default: .dg/DeepGEMM)")
    args = parser.parse_args()
    if args.dg:
        LEGACY = os.path.join(args.dg, "deep_gemm", "legacy")
    if not os.path.isdir(LEGACY):
        print(f"no {LEGACY}: DeepGEMM's source is not here")
        return 1
    tiles = [(128, 128, 64, 8, 3), (128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (128, 128, 128, 8, 3),
             (64, 64, 128, 4, 2), (32, 64, 128, 4, 3)]
    m_fn = load_kernel("m_grouped_gemm.py", "m_grouped_bf16_gemm_contiguous_tl_impl",
                       "m_grouped_bf16_gemm_nt_contiguous_tl")
    k_fn = load_kernel("b_fused_k_grouped_gemm.py", "b_fused_k_grouped_bf16_gemm_contiguous_tl_impl",
                       "b_fused_k_grouped_bf16_gemm_tn_contiguous_tl")
    for bm, bn, bk, warps, stages in tiles:
        tile = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8)
        label = f"{bm}x{bn}x{bk}/w{warps}/s{stages}"
        for k_major in (True, False):
            smem, spills, regs = compile_one(
                m_fn, dict(a_ptr="*bf16", b_ptr="*bf16", d_ptr="*bf16", m_indices_ptr="*i32"), ["M"],
                dict(N=6144, K=7168, IS_B_K_MAJOR=k_major, **tile), warps, stages)
            print(f"m-grouped {'nt' if k_major else 'nn'} {label:22s} smem={smem} spills={spills} {regs}", flush=True)
        smem, spills, regs = compile_one(
            k_fn, dict(a_ptr="*bf16", b_ptr="*bf16", d_ptr="*fp32", k_indices_ptr="*i32", k_start_ptr="*i32",
                       k_end_ptr="*i32"), ["K"], dict(M=4096, N=7168, ACC=True, **tile), warps, stages)
        print(f"k-grouped b  {label:22s} smem={smem} spills={spills} {regs}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
