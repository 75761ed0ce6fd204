"""Compile the einsum family's Triton kernels for sm_90a without a GPU and report registers, spills, shared memory
and the SASS that matters (HGMMA / QGMMA count, TMA loads, local memory traffic) for every config the launchers pick
(``deep_gemm.einsum.launch.CONFIGS``). Exits non-zero when a config spills or needs more than 227 KB of
shared memory.

    python scripts/compile_check_einsum.py      (without TRITON_INTERPRET)
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import triton  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from compile_check import FP_FUSION, SM90, resource_usage, sass_counts  # noqa: E402

SMEM_LIMIT = 227 * 1024
_TYPES = {"bf16": "bf16", "fp32": "fp32", "fp8": "fp8e4nv"}


def _compile(fn, sig: dict, constexprs: dict, num_warps: int, num_stages: int, target=SM90):
    sig = dict(sig)
    sig.update({k: "constexpr" for k in constexprs})
    src = ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in constexprs.items()})
    return triton.compile(src, target=target, options={"num_warps": num_warps, "num_stages": num_stages,
                                                     **FP_FUSION})


def compile_bh(cfg, b_k_major=True, has_c=False, out="bf16", d_tma=True, c_tma=False, target=SM90):
    from deep_gemm.einsum.kernels import _bh_einsum_gemm_kernel as fn
    bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
    b_block = [1, bn, bk] if b_k_major else [1, bk, bn]
    halves = cfg.d_halves and d_tma
    d_block = [1, bm, bn // 2 if halves else bn]
    sig = {"a_desc": f"tensordesc<bf16{[1, bm, bk]}>", "b_desc": f"tensordesc<bf16{b_block}>",
           "d_desc": f"tensordesc<{out}{d_block}>", "c_desc": f"tensordesc<{out}{d_block}>",
           "d_ptr": f"*{out}", "c_ptr": f"*{out}"}
    sig.update({n: "i32" for n in ("G", "M", "N", "K", "stride_dg", "stride_dm", "stride_cg", "stride_cm")})
    constexprs = dict(BM=bm, BN=bn, BK=bk, GROUP_M=8, NUM_PROGRAMS=132, NUM_STAGES=cfg.num_stages,
                      B_K_MAJOR=b_k_major, HAS_C=has_c, D_TMA=d_tma, C_TMA=c_tma, FLATTEN=cfg.flatten,
                      D_HALVES=halves)
    return _compile(fn, sig, constexprs, cfg.num_warps, cfg.num_stages, target)


def compile_bmk(cfg, has_c=False, out="fp32", d_tma=True, c_tma=False, reduce=0, target=SM90):
    from deep_gemm.einsum.kernels import _bmn_bnk_mn_gemm_impl as fn
    bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
    sig = {"a_desc": f"tensordesc<bf16{[1, bm, bk]}>", "b_desc": f"tensordesc<bf16{[1, bn, bk]}>",
           "d_desc": f"tensordesc<{out}{[1, bm, bn]}>", "c_desc": f"tensordesc<{out}{[1, bm, bn]}>",
           "d_ptr": f"*{out}", "c_ptr": f"*{out}", "ws_ptr": "*fp32", "counter_ptr": "*i32"}
    sig.update({n: "i32" for n in ("S", "M", "N", "K", "SPLITS", "stride_dm", "stride_cm")})
    constexprs = dict(BM=bm, BN=bn, BK=bk, NUM_STAGES=cfg.num_stages, HAS_C=has_c, D_TMA=d_tma, C_TMA=c_tma,
                      REDUCE=reduce)
    return _compile(fn, sig, constexprs, cfg.num_warps, cfg.num_stages, target)


def compile_bmk_reduce(cfg, rm, has_c=False, out="fp32", loads=64, aligned=True, target=SM90):
    from deep_gemm.einsum.kernels import _bmk_reduce_partials
    sig = {"ws_ptr": "*fp32", "d_ptr": f"*{out}", "c_ptr": f"*{out}"}
    sig.update({n: "i32" for n in ("M", "N", "SPLITS", "stride_dm", "stride_cm")})
    constexprs = dict(BM=cfg.block_m, BN=cfg.block_n, RM=rm, LOADS=loads, HAS_C=has_c, ALIGNED=aligned)
    return _compile(_bmk_reduce_partials, sig, constexprs, max(1, rm * cfg.block_n // 128), 1, target)


def compile_fp8(cfg, b_per_row=False, has_c=False, out="bf16", d_tma=True, c_tma=False, bk=None, target=SM90):
    from deep_gemm.einsum.kernels import _fp8_einsum_gemm_kernel as fn
    bm, bn, bk = cfg.block_m, cfg.block_n, bk or cfg.block_k
    sig = {"a_desc": f"tensordesc<fp8e4nv{[1, bm, bk]}>", "b_desc": f"tensordesc<fp8e4nv{[1, bn, bk]}>",
           "sfa_ptr": "*fp32", "sfb_ptr": "*fp32", "d_desc": f"tensordesc<{out}{[1, bm, bn]}>",
           "c_desc": f"tensordesc<{out}{[1, bm, bn]}>", "d_ptr": f"*{out}", "c_ptr": f"*{out}"}
    sig.update({n: "i32" for n in ("G", "M", "N", "K", "stride_sfa_g", "stride_sfa_m", "stride_sfa_k",
                                   "stride_sfb_g", "stride_sfb_n", "stride_sfb_k", "stride_dg", "stride_dm",
                                   "stride_cg", "stride_cm")})
    constexprs = dict(BM=bm, BN=bn, BK=bk, GROUP_M=8, NUM_PROGRAMS=132, NUM_STAGES=cfg.num_stages,
                      B_PER_ROW=b_per_row, HAS_C=has_c, D_TMA=d_tma, C_TMA=c_tma, FLATTEN=cfg.flatten)
    return _compile(fn, sig, constexprs, cfg.num_warps, cfg.num_stages, target)


def _sass(cubin: bytes) -> str:
    import subprocess
    import tempfile
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([tool, "--dump-sass", f.name], capture_output=True, text=True).stdout


def report_reduce(label: str, ck, loads: int) -> bool:
    """report(), plus the reduction's memory instructions by width and how many loads are issued before the first
    add: all the unrolled ranges' (and C's) must be, else the sum waits on L2 round trips one after another."""
    import re
    ops = [re.sub(r"^@!?U?P\w+\s+", "", x).split()[0] for x in re.findall(r"/\*[0-9a-f]{4}\*/\s+(.*?);",
                                                                    _sass(ck.asm["cubin"]))]
    first_add = next((i for i, op in enumerate(ops) if op.startswith("FADD")), len(ops))
    ahead = sum(op.startswith("LDG") for op in ops[:first_add])
    widths = {op: ops.count(op) for op in sorted(set(ops)) if op.startswith(("LDG", "STG"))}
    ok = report(f"{label}: {widths}, {ahead} loads before the first add", ck)
    if ahead < loads:
        print(f"FAIL {label}: only {ahead} of {loads} loads issued before the first add", flush=True)
    return ok and ahead >= loads


def report(label: str, ck) -> bool:
    usage = resource_usage(ck.asm["cubin"])
    counts = sass_counts(ck.asm["cubin"])
    spills = int(usage.split("STACK:")[1].split()[0]) if "STACK:" in usage else 0
    ok = spills == 0 and ck.metadata.shared <= SMEM_LIMIT and counts["LDL"] == 0
    print(f"{'ok  ' if ok else 'FAIL'} {label}: smem {ck.metadata.shared} {usage} {counts}", flush=True)
    return ok


def main() -> int:
    from deep_gemm.einsum.plan import BH_CONFIGS, BH_WIDE, BMK_CONFIGS, BMK_REDUCE_LOADS, FP8_CONFIGS
    ok = True
    for cfg in BH_CONFIGS:
        for b_k_major in (True, False):
            ok &= report(f"bh {cfg} b_k_major={b_k_major}", compile_bh(cfg, b_k_major))
        if cfg in BH_WIDE:
            continue  # plain BF16 outputs only (einsum_plan.bh_config)
        ok &= report(f"bh {cfg} fp32 out + C by TMA", compile_bh(cfg, has_c=True, out="fp32", c_tma=True))
        ok &= report(f"bh {cfg} fp32 out + C, pointers", compile_bh(cfg, has_c=True, out="fp32", d_tma=False))
        ok &= report(f"bh {cfg} fp32 out by TMA + C by pointers", compile_bh(cfg, has_c=True, out="fp32"))
    for cfg in BMK_CONFIGS:
        for reduce, name in ((1, "serial"), (2, "parallel"), (3, "grid")):
            ok &= report(f"bmk {cfg} split, {name} reduction, fp32 + C",
                         compile_bmk(cfg, has_c=True, d_tma=reduce == 1, reduce=reduce))
            ok &= report(f"bmk {cfg} split, {name} reduction, bf16", compile_bmk(cfg, out="bf16", reduce=reduce,
                                                                                 d_tma=reduce == 1))
        for rm in (1, 2, 8):
            for loads in BMK_REDUCE_LOADS:
                ok &= report_reduce(f"bmk reduction {cfg} rows {rm} loads {loads} fp32 + C",
                                    compile_bmk_reduce(cfg, rm, has_c=True, loads=loads), loads)
        ok &= report_reduce(f"bmk reduction {cfg} rows 2 loads 64 bf16", compile_bmk_reduce(cfg, 2, out="bf16"), 64)
        ok &= report_reduce(f"bmk reduction {cfg} rows 2 loads 64 fp32 + C, unaligned",
                            compile_bmk_reduce(cfg, 2, has_c=True, aligned=False), 64)
        ok &= report(f"bmk {cfg} fp32 + C by TMA", compile_bmk(cfg, has_c=True, c_tma=True))
        ok &= report(f"bmk {cfg} fp32 + C, pointers", compile_bmk(cfg, has_c=True, d_tma=False))
        ok &= report(f"bmk {cfg} bf16", compile_bmk(cfg, out="bf16"))
        ok &= report(f"bmk {cfg} fp32 by TMA + C by pointers", compile_bmk(cfg, has_c=True))
    for cfg in FP8_CONFIGS:
        ok &= report(f"fp8 {cfg}", compile_fp8(cfg))
        ok &= report(f"fp8 {cfg} per-row B, fp32 + C by TMA", compile_fp8(cfg, b_per_row=True, has_c=True,
                                                                            out="fp32", c_tma=True))
        ok &= report(f"fp8 {cfg} per-row B, fp32 + C, pointers", compile_fp8(cfg, b_per_row=True, has_c=True,
                                                                              out="fp32", d_tma=False))
        ok &= report(f"fp8 {cfg} gran_k 32", compile_fp8(cfg, bk=32))
        ok &= report(f"fp8 {cfg} per-row B, fp32 by TMA + C by pointers", compile_fp8(cfg, b_per_row=True,
                                                                                     has_c=True, out="fp32"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
