"""Compile deep_gemm's Triton kernels for sm_90a on any machine (no GPU needed) and report registers, spills and
shared memory per config: the cheap first check before spending GPU time.

    python scripts/compile_check.py            # the FP8 GEMM kernel over its main configs
    python scripts/compile_check.py --ws       # the warp-specialised Gluon kernel's variants
    python scripts/compile_check.py --serialisation   # JSON: does ptxas serialise the Gluon variants' wgmmas?
    python scripts/compile_check.py --budgets  # spilled bytes of the Gluon variants at each register budget, and the
                                               # budget the launcher's rule (fp8_plan.ws_register_budget) keeps

Run without TRITON_INTERPRET (the interpreter cannot compile warp-specialised kernels).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from deep_gemm._internals import COMPILE_OPTIONS  # noqa: E402

SM90 = GPUTarget("cuda", 90, 32)
# Multiply-adds fused into FMAs, as every launch compiles them (deep_gemm._internals.COMPILE_OPTIONS): the kernels'
# numerics are those of fused multiply-adds (the FP8 kernels' per-128-K promotion is one FFMA per element).
FP_FUSION = dict(COMPILE_OPTIONS)


def resource_usage(cubin: bytes) -> str:
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([tool, "--dump-resource-usage", f.name], capture_output=True, text=True).stdout
    return " ".join(line.strip() for line in out.splitlines() if "REG:" in line)


# Local-memory instructions: the SASS counts the checks' pass / fail reads (spills, local arrays).
LOCAL_NEEDLES = ("LDL", "STL")


def _uses_local_memory(cubin: bytes) -> bool:
    """Whether any kernel of the cubin has a stack frame or local memory (resource usage STACK / LOCAL)."""
    usage = resource_usage(cubin).split()
    return any(field.split(":")[0] in ("STACK", "LOCAL") and field.split(":")[1] != "0" for field in usage)


def sass_counts(cubin: bytes, needles=("QGMMA", "HGMMA", "UTMALDG", "LDL", "STL")) -> dict:
    """How often each needle occurs in the cubin's SASS. With COMPILE_CHECK_SASS=0 (the support matrix's compile
    jobs: a SASS dump costs ~0.35 s of CPU per variant, a resource-usage read ~2 ms) only LDL / STL are counted,
    from a dump only where the cubin uses local memory at all (else 0: nothing for them to address); the other
    needles read None."""
    if os.environ.get("COMPILE_CHECK_SASS", "1") == "0":
        counted = [n for n in needles if n in LOCAL_NEEDLES]
        if not counted or not _uses_local_memory(cubin):
            return {n: 0 if n in LOCAL_NEEDLES else None for n in needles}
        return {**{n: None for n in needles}, **_count_sass(cubin, counted)}
    return _count_sass(cubin, needles)


def _count_sass(cubin: bytes, needles) -> dict:
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        sass = subprocess.run([tool, "--dump-sass", f.name], capture_output=True, text=True).stdout
    return {n: sass.count(n) for n in needles}


def compile_fp8_gemm(bm, bn, warps, stages, split=1, grouping=0, b_per_row=False, has_c=False, out="bf16",
                     d_tma=None, target=SM90):
    """The tl.* FP8 GEMM kernel for one config, built for ``target`` (sm_90a unless given)."""
    d_tma = grouping in (0, 1, 2) if d_tma is None else d_tma
    from deep_gemm.gemm.fp8.kernels.gemm import _fp8_gemm_kernel
    fn = _fp8_gemm_kernel
    sig = {"a_desc": f"tensordesc<fp8e4nv{[bm, 128]}>", "b_desc": f"tensordesc<fp8e4nv{[bn, 128]}>",
           "sfa_ptr": "*fp32", "sfb_ptr": "*fp32", "d_ptr": f"*{out}", "c_ptr": f"*{out}",
           "d_desc": f"tensordesc<{out}{[bm, bn]}>", "layout_ptr": "*i32", "ws_ptr": "*fp32", "counter_ptr": "*i32"}
    ints = ["M", "N", "K", "NUM_GROUPS", "stride_sfa_g", "stride_sfa_m", "stride_sfa_k", "stride_sfb_g",
            "stride_sfb_n", "stride_sfb_k", "stride_dg", "stride_dm", "stride_cg", "stride_cm"]
    sig.update({n: "i32" for n in ints})
    constexprs = dict(BM=bm, BN=bn, BK=128, GROUP_M=8, NUM_PROGRAMS=132, NUM_STAGES=stages, SPLIT_K=split,
                      GROUPING=grouping, G_PAD=8, PSUM_ALIGN=128, ZERO_GAPS=True, B_PER_ROW=b_per_row, HAS_C=has_c,
                      D_TMA=d_tma, HEAD_LEFT=0, HEAD_MID=0, HEAD_RIGHT=0)
    sig.update({k: "constexpr" for k in constexprs})
    src = ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in constexprs.items()})
    return triton.compile(src, target=target, options={"num_warps": warps, "num_stages": stages, **FP_FUSION})


MODES = ("--ws", "--serialisation", "--budgets", "--bf16", "--bf16-ws")

# The tl.* FP8 kernel's main configs (dense, 1D1D, M-grouped, masked, K-grouped).
FP8_CONFIGS = [dict(bm=128, bn=128, warps=8, stages=3), dict(bm=128, bn=128, warps=8, stages=4),
               dict(bm=128, bn=64, warps=8, stages=4), dict(bm=64, bn=128, warps=4, stages=4),
               dict(bm=16, bn=128, warps=4, stages=4, split=4),
               dict(bm=128, bn=128, warps=8, stages=3, b_per_row=True, has_c=True, out="fp32"),
               dict(bm=128, bn=128, warps=8, stages=3, grouping=1), dict(bm=64, bn=128, warps=4, stages=4, grouping=3),
               dict(bm=128, bn=128, warps=8, stages=4, grouping=4, b_per_row=True, has_c=True, out="fp32"),
               # (deterministic mode's tile, configs.DETERMINISTIC_TILE, on a 1D1D call with C)
               dict(bm=64, bn=128, warps=4, stages=4, b_per_row=True, has_c=True, out="fp32")]

if __name__ == "__main__" and not any(mode in sys.argv for mode in MODES):
    for cfg in FP8_CONFIGS:
        ck = compile_fp8_gemm(**cfg)
        print(cfg, "smem", ck.metadata.shared, resource_usage(ck.asm["cubin"]), sass_counts(ck.asm["cubin"]))


def gluon_desc_sig(block, dtype="fp8e4nv"):
    from triton.experimental.gluon import language as gl
    layout = gl.NVMMASharedLayout.get_default_for(block, getattr(gl, dtype if dtype != "fp8e4nv" else "float8e4nv"))
    short = {"fp8e4nv": "fp8e4nv", "bfloat16": "bf16", "float32": "fp32"}[dtype]
    return f"tensordesc<{short}{list(block)},{layout!r}>"


def compile_fp8_gemm_ws(bm=128, bn=128, stages=5, grouping=0, b_per_row=False, has_c=False, out="bf16",
                        consumer_regs=232, producer_regs=40, maxnreg=None, waves=1, wave_n=False, narrow=None,
                        d_tma=None, c_tma=False, scales_smem=False, split_k=1, g_pad=8, zero_gaps=True,
                        kg_desc=False, walk=False, uniform=False, stagger=0):
    """The warp-specialised FP8 kernel built for sm_90a with these constexprs. The kernel's defaulted ones (KG_DESC:
    K-grouped per-group descriptors, A's and B's FP8 storage in ws_ptr / counter_ptr; WALK / UNIFORM / STAGGER:
    Fp8Overrides.tile_walk / uniform_tiles / stagger) are always set: a hand-built source does not apply the
    defaults."""
    from deep_gemm.gemm.fp8.kernels.gemm_ws import _fp8_gemm_ws_kernel as fn
    narrow = bn if narrow is None else narrow
    tile_n = bn + narrow if wave_n else bn
    split = wave_n and narrow < bn
    sig = {"a_desc": gluon_desc_sig([bm, 128]), "b_desc": gluon_desc_sig([bn if split else tile_n, 128]),
           "b2_desc": gluon_desc_sig([narrow if split else tile_n, 128]), "sfa_ptr": "*fp32",
           "sfb_ptr": "*fp32", "d_ptr": f"*{out}", "c_ptr": f"*{out}",
           "d_desc": gluon_desc_sig([64, bn], {"bf16": "bfloat16", "fp32": "float32"}[out]),
           "d2_desc": gluon_desc_sig([64, narrow if split else bn], {"bf16": "bfloat16", "fp32": "float32"}[out]),
           "c_desc": gluon_desc_sig([64, bn], {"bf16": "bfloat16", "fp32": "float32"}[out]),
           "layout_ptr": "*i32", "ws_ptr": "*fp8e4nv" if kg_desc else "*fp32",
           "counter_ptr": "*fp8e4nv" if kg_desc else "*i32"}
    sig.update({n: "i32" for n in ["M", "N", "K", "NUM_GROUPS", "stride_sfa_g", "stride_sfa_m", "stride_sfa_k",
                                   "stride_sfb_g", "stride_sfb_n", "stride_sfb_k", "stride_dg", "stride_dm",
                                   "stride_cm"]})
    constexprs = dict(BM=bm, BN=bn, BK=128, STAGES=stages, GROUP_M=8, NUM_SMS=132, GROUPING=grouping, G_PAD=g_pad,
                      PSUM_ALIGN=128, ZERO_GAPS=zero_gaps, B_PER_ROW=b_per_row, HAS_C=has_c,
                      D_TMA=(grouping in (0, 1, 2)) if d_tma is None else d_tma, WAVES=waves, WAVE_N=wave_n,
                      TILE_N=tile_n, NARROW=narrow, C_TMA=c_tma, SCALES_SMEM=scales_smem, SPLIT_K=split_k,
                      CONSUMER_REGS=consumer_regs, PRODUCER_REGS=producer_regs, KG_DESC=kg_desc, WALK=walk,
                      UNIFORM=uniform, STAGGER=stagger)
    sig.update({k: "constexpr" for k in constexprs})
    from triton.experimental.gluon._runtime import GluonASTSource
    # The split-K workspace is a fresh torch allocation: the launch specialises its pointer as 16-byte aligned.
    src = GluonASTSource(fn=fn, signature=sig,
                         constexprs={(fn.arg_names.index(k),): v for k, v in constexprs.items()},
                         attrs={(fn.arg_names.index("ws_ptr"),): [["tt.divisibility", 16]]})
    return triton.compile(src, target=SM90, options={"num_warps": 4, "num_stages": 1, "maxnreg": maxnreg,
                                                     **FP_FUSION})


# The warp-specialised FP8 kernel's variants: one- and two-wave tiles in every grouping, 1D1D, C by TMA.
FP8_WS_CONFIGS = [dict(), dict(stages=6), dict(stages=6, scales_smem=True), dict(bn=64, stages=8, scales_smem=True),
                  dict(grouping=1), dict(grouping=2), dict(grouping=3),
                  dict(bm=256, waves=2, stages=4),
                  dict(bm=256, waves=2, stages=3), dict(bm=256, waves=2, stages=4, has_c=True),
                  dict(waves=2, wave_n=True, stages=4, grouping=1), dict(waves=2, wave_n=True, stages=4, grouping=2),
                  dict(waves=2, wave_n=True, stages=4, grouping=3), dict(waves=2, wave_n=True, stages=4),
                  dict(waves=2, wave_n=True, narrow=64, stages=4),
                  dict(waves=2, wave_n=True, narrow=64, stages=4, grouping=1),
                  dict(waves=2, wave_n=True, narrow=64, stages=4, grouping=2),
                  dict(waves=2, wave_n=True, narrow=16, stages=5), dict(waves=2, wave_n=True, narrow=32, stages=5,
                                                                        grouping=1),
                  dict(waves=2, wave_n=True, stages=3, b_per_row=True, has_c=True, out="fp32", c_tma=True),
                  dict(waves=2, wave_n=True, stages=3, b_per_row=True, out="fp32"),
                  dict(waves=2, wave_n=True, stages=3, b_per_row=True, has_c=True, out="fp32", c_tma=True,
                       grouping=4, d_tma=True)]

if __name__ == "__main__" and "--ws" in sys.argv:
    for cfg in FP8_WS_CONFIGS:
        ck = compile_fp8_gemm_ws(**cfg)
        print("ws", cfg, "smem", ck.metadata.shared, resource_usage(ck.asm["cubin"]), sass_counts(ck.asm["cubin"]))


def ptxas_info(ptx: str) -> str:
    """What `ptxas -v` says about a kernel's PTX for sm_90a (its info lines name serialised wgmmas: C7514), from the
    ptxas Triton assembles sm_90 with: Triton 3.9 uses its newer bundled ptxas (bin/ptxas-blackwell) there and
    writes PTX that the older bin/ptxas refuses. A ptxas error raises rather than reading as "not serialised"."""
    from triton.backends.nvidia.compiler import get_ptxas
    tool = get_ptxas(SM90.arch).path
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        out = subprocess.run([tool, "-arch=sm_90a", "-v", src, "-o", os.path.join(tmp, "k.cubin")],
                             capture_output=True, text=True)
        if out.returncode:
            raise RuntimeError(f"{tool} failed: {out.stderr[-2000:]}")
        return out.stderr


# The Gluon kernel's mainloops, each in a grouping that runs it (see docs/ARCHITECTURE.md, "The FP8 kernels").
SERIALISATION_VARIANTS = {
    "two-wave 128x256 dense": dict(waves=2, wave_n=True, stages=4),
    "two-wave 128x256 psum": dict(waves=2, wave_n=True, stages=4, grouping=2),
    "two-wave 128x256 masked (TMA store)": dict(waves=2, wave_n=True, stages=4, grouping=3, d_tma=True),
    "split 128x192 dense": dict(waves=2, wave_n=True, narrow=64, stages=4),
    "tail 128x(128+16) dense": dict(waves=2, wave_n=True, narrow=16, stages=5),
    "two-wave 128x256 1D1D, C by TMA": dict(waves=2, wave_n=True, stages=3, b_per_row=True, has_c=True, out="fp32",
                                            c_tma=True),
    "one-wave 128x128 dense": dict(stages=6),
    "one-wave 128x128 m_ids": dict(stages=5, grouping=1),
    "one-wave 128x128 dense, staged scales": dict(stages=5, scales_smem=True),
    "one-wave 128x64 dense, staged scales": dict(bn=64, stages=8, scales_smem=True),
    "one-wave 128x128 masked, staged scales": dict(stages=5, grouping=3, d_tma=True, scales_smem=True),
    "one-wave 128x128 dense, split-K 4": dict(stages=4, split_k=4),
    "one-wave 128x64 dense, staged scales, split-K 2": dict(bn=64, stages=7, scales_smem=True, split_k=2),
}

if __name__ == "__main__" and "--serialisation" in sys.argv:
    import json
    report = {}
    for name, cfg in SERIALISATION_VARIANTS.items():
        ck = compile_fp8_gemm_ws(**cfg)
        info = ptxas_info(ck.asm["ptx"])
        report[name] = dict(serialised="C7514" in info, qgmma=sass_counts(ck.asm["cubin"])["QGMMA"])
    print(json.dumps(report))


def spilled_bytes(cubin: bytes) -> int:
    """Local memory (spills) per thread of a compiled kernel, from cuobjdump's resource usage (STACK)."""
    return int(resource_usage(cubin).split("STACK:")[1].split()[0])


# Stack bytes per thread a non-warp-specialised (HMMA) kernel may keep under a Triton release, by (major, minor).
# Triton 3.8's PTX and 3.9's ptxas flags (--regAllocOptLevel=2, its workaround for a ptxas 13 bug) leave one 8-16 byte
# slot in a few BF16 tl.* and HC configs, stored and loaded once per program or tile, outside the main loop (SASS of
# the 3.8.0 / 3.9.0 builds); 3.6 and 3.7 leave none. Anything more is a spill to fix.
STACK_ALLOWANCE = {(3, 8): 16, (3, 9): 8}


def stack_allowance() -> int:
    from deep_gemm._internals import triton_version

    return STACK_ALLOWANCE.get((triton_version() or (0, 0))[:2], 0)


# ---- the per-family compile checks' shared pieces (compile_check_mega, _sparse_mqa, _mega_mhc, _fp4, ...) ----------

SM90_SHARED_LIMIT = 227 * 1024  # bytes of shared memory one program may use on sm_90a


def int_args(*names) -> dict:
    """Signature entries of runtime int32 arguments."""
    return {n: "i32" for n in names}


def thunk_builders(thunks) -> list:
    """(name, build) pairs from (name, thunk) pairs, each ``build`` bound to its own thunk."""
    return [(name, lambda t=thunk: t()) for name, thunk in thunks]


def report_variants(label: str, builders, needles=("HGMMA", "HMMA", "LDL", "STL")) -> int:
    """Compile every (name, build) variant, print its shared memory, resource usage and SASS counts, and return the
    exit status: 1 when a variant fails to compile, spills beyond the release's stack allowance, or overflows shared
    memory."""
    bad = 0
    for name, build in builders:
        try:
            ck = build()
        except Exception as exc:  # a variant that does not compile is a failure, reported with the others
            print(label, name, "FAILED TO COMPILE:", type(exc).__name__, str(exc)[:400], flush=True)
            bad += 1
            continue
        cubin = ck.asm["cubin"]
        usage = resource_usage(cubin)
        print(label, name, "smem", ck.metadata.shared, usage, sass_counts(cubin, needles), flush=True)
        if spilled_bytes(cubin) > stack_allowance() or ck.metadata.shared > SM90_SHARED_LIMIT:
            bad += 1
    print("FAIL" if bad else "OK", f"({bad} variants fail to compile, spill or overflow shared memory)")
    return 1 if bad else 0


# Variants whose spills depend on more than the mainloop: the masked two-wave kernel at 8 and 32 groups (G_PAD).
BUDGET_VARIANTS = {**SERIALISATION_VARIANTS,
                   "two-wave 128x256 masked, 8 groups": dict(waves=2, wave_n=True, stages=4, grouping=3, d_tma=True,
                                                              g_pad=8),
                   "two-wave 128x256 masked, 32 groups": dict(waves=2, wave_n=True, stages=4, grouping=3, d_tma=True,
                                                               g_pad=32)}

if __name__ == "__main__" and "--budgets" in sys.argv:
    from deep_gemm.gemm.fp8 import plan as fp8_plan
    budgets = fp8_plan.WS_REGISTER_BUDGETS
    print(f"{'variant':52s}", *(f"{c}/{p:<4d}" for c, p in budgets), " kept  (spilled bytes per thread)")
    for name, cfg in BUDGET_VARIANTS.items():
        spills = {b: spilled_bytes(compile_fp8_gemm_ws(consumer_regs=b[0], producer_regs=b[1], **cfg).asm["cubin"])
                  for b in budgets}
        kept = fp8_plan.ws_register_budget(lambda b: spills[b] // 4)
        print(f"{name:52s}", *(f"{spills[b]:>8d}" for b in budgets), f" {kept[0]}/{kept[1]}", flush=True)


def compile_bf16_gemm(bm, bn, bk=64, warps=8, stages=3, split=1, grouping=0, has_c=False, out="bf16", d_tma=None,
                      a_k_major=True, b_k_major=True, tail=0, zero_gaps=True, uniform=False, psum_walk=False,
                      target=SM90):
    """The BF16 GEMM kernel (gemm/bf16/kernels/gemm.py) for one config, as bf16_launch._execute launches it
    (``zero_gaps``: ZERO_GAPS, the psum layout's gap rows zeroed or left untouched; ``uniform``: UNIFORM, K-grouped;
    ``psum_walk``: PSUM_WALK, a psum call's group ends walked as a masked call), built for ``target`` (sm_90a unless
    given)."""
    from deep_gemm.gemm.bf16.kernels.gemm import _bf16_gemm_kernel as fn
    d_tma = grouping in (0, 1, 2) if d_tma is None else d_tma
    a_block = [bm, bk] if a_k_major else [bk, bm]
    b_block = [bn, bk] if b_k_major else [bk, bn]
    b2_block = ([tail, bk] if b_k_major else [bk, tail]) if tail else b_block
    d_sig = f"tensordesc<{out}{[bm, bn]}>" if d_tma else f"tensordesc<bf16{a_block}>"
    d2_sig = f"tensordesc<{out}{[bm, tail]}>" if tail and d_tma else d_sig
    sig = {"a_desc": f"tensordesc<bf16{a_block}>", "b_desc": f"tensordesc<bf16{b_block}>",
           "b2_desc": f"tensordesc<bf16{b2_block}>", "d_ptr": f"*{out}", "c_ptr": f"*{out}", "d_desc": d_sig,
           "d2_desc": d2_sig, "layout_ptr": "*i32", "ws_ptr": "*fp32", "counter_ptr": "*i32"}
    sig.update({n: "i32" for n in ["M", "N", "K", "NUM_GROUPS", "A_GROUP_M", "B_GROUP_N", "B_GROUP_K", "stride_dg",
                                   "stride_dm", "stride_cg", "stride_cm", "SPLIT_FROM", "FIRST_ITEM"]})
    constexprs = dict(BM=bm, BN=bn, BK=bk, GROUP_M=8, NUM_PROGRAMS=132, NUM_STAGES=stages, SPLIT_K=split,
                      GROUPING=grouping, G_PAD=8, PSUM_ALIGN=128, ZERO_GAPS=zero_gaps, HAS_C=has_c, D_TMA=d_tma,
                      A_K_MAJOR=a_k_major, B_K_MAJOR=b_k_major, BN_TAIL=tail, UNIFORM=uniform, PSUM_WALK=psum_walk)
    sig.update({k: "constexpr" for k in constexprs})
    src = ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in constexprs.items()})
    return triton.compile(src, target=target, options={"num_warps": warps, "num_stages": stages, **FP_FUSION})


# The configs bf16_plan picks for DeepGEMM's test shapes (and the layouts/groupings that change the kernel).
BF16_CONFIGS = [
    dict(bm=128, bn=256, warps=8, stages=3), dict(bm=128, bn=128, warps=8, stages=5),
    dict(bm=128, bn=256, warps=8, stages=3, a_k_major=False, b_k_major=False),
    dict(bm=128, bn=256, warps=8, stages=3, a_k_major=False), dict(bm=128, bn=256, warps=8, stages=3, b_k_major=False),
    dict(bm=128, bn=128, warps=8, stages=4, out="fp32", has_c=True), dict(bm=128, bn=128, warps=8, stages=5,
                                                                           has_c=True),
    dict(bm=64, bn=128, warps=4, stages=6, out="fp32", has_c=True),
    dict(bm=64, bn=64, warps=4, stages=6, split=2), dict(bm=16, bn=32, bk=128, warps=4, stages=6, split=2),
    dict(bm=16, bn=128, bk=128, warps=4, stages=6, has_c=True),
    dict(bm=128, bn=256, warps=8, stages=3, grouping=1), dict(bm=128, bn=256, warps=8, stages=3, grouping=2,
                                                              b_k_major=False),
    # Psum with gaps left untouched (DeepGEMM's SM90 default): pointer stores, so 128 x 128.
    dict(bm=128, bn=128, warps=8, stages=6, grouping=2, d_tma=False, zero_gaps=False),
    dict(bm=32, bn=128, bk=128, warps=4, stages=4, grouping=3, d_tma=False),
    # Masked decode rows with the last wave split (bf16_plan.masked_split): the plan's 5-stage 32 x 128 tile.
    dict(bm=32, bn=128, bk=128, warps=4, stages=5, grouping=3, d_tma=False, split=4),
    # Psum decode calls walked as masked ones (bf16_plan.PSUM_WALK_MAX_EXPECTED_M), unsplit and split, B both majors.
    dict(bm=32, bn=128, bk=128, warps=4, stages=5, grouping=3, d_tma=False, psum_walk=True),
    dict(bm=32, bn=128, bk=128, warps=4, stages=5, grouping=3, d_tma=False, split=4, psum_walk=True),
    dict(bm=32, bn=128, bk=128, warps=4, stages=5, grouping=3, d_tma=False, b_k_major=False, psum_walk=True),
    dict(bm=128, bn=128, warps=8, stages=5, grouping=3, d_tma=False, psum_walk=True),
    dict(bm=128, bn=128, warps=8, stages=5, grouping=3, d_tma=False),
    dict(bm=128, bn=128, warps=8, stages=5, grouping=4, out="fp32", has_c=True, d_tma=False, a_k_major=False,
         b_k_major=False),
    dict(bm=128, bn=128, warps=8, stages=5, grouping=4, out="fp32", has_c=True, d_tma=False, a_k_major=False,
         b_k_major=False, uniform=True),
    # Split-K of the last wave (4096 x 2112 / 576) and of M = 128 rows; deep rings of streaming-bound tiles.
    dict(bm=128, bn=128, warps=8, stages=5, split=8), dict(bm=128, bn=128, warps=8, stages=5, split=4),
    dict(bm=64, bn=128, warps=4, stages=6, split=4, has_c=True, out="fp32"),
    dict(bm=64, bn=64, warps=4, stages=12), dict(bm=64, bn=64, warps=4, stages=12, split=2),
    dict(bm=64, bn=128, warps=4, stages=8), dict(bm=64, bn=128, warps=4, stages=8, split=2),
    dict(bm=16, bn=32, bk=128, warps=4, stages=12, split=2), dict(bm=16, bn=64, bk=128, warps=4, stages=10),
    # Dense decode rows: 16 x 64 on the 6-stage ring, an unsplit 16 x 32 on the deep one.
    dict(bm=16, bn=64, bk=128, warps=4, stages=6), dict(bm=16, bn=32, bk=128, warps=4, stages=12),
    dict(bm=128, bn=128, warps=8, stages=6, split=2, out="fp32", d_tma=False),
    # Opt-in 128 x (128 + 16) tiles (N = 576 in 4 tile columns; Bf16Config.block_n_tail), TMA and pointer stores.
    dict(bm=128, bn=128, warps=8, stages=5, tail=16), dict(bm=128, bn=128, warps=8, stages=5, tail=16, d_tma=False),
    dict(bm=128, bn=128, warps=8, stages=5, tail=16, a_k_major=False, b_k_major=False),
]


def check_bf16(verbose: bool = True) -> list:
    """Compile every BF16 config; returns the ones that spill or exceed shared memory (empty = all good)."""
    bad = []
    for cfg in BF16_CONFIGS:
        ck = compile_bf16_gemm(**cfg)
        usage = resource_usage(ck.asm["cubin"])
        spill = int(usage.split("STACK:")[1].split()[0]) if "STACK:" in usage else 0
        counts = sass_counts(ck.asm["cubin"], ("HGMMA", "HMMA", "UTMALDG", "UTMASTG", "LDL", "STL"))
        ok = spill <= stack_allowance() and ck.metadata.shared <= 227 * 1024 and (counts["LDL"] == 0 or 0 < spill)
        if verbose:
            print("bf16", cfg, "smem", ck.metadata.shared, usage, counts, "" if ok else "<-- BAD", flush=True)
        if not ok:
            bad.append(cfg)
    return bad


if __name__ == "__main__" and "--bf16" in sys.argv:
    sys.exit(1 if check_bf16() else 0)


def compile_bf16_gemm_ws(bn=256, bk=64, stages=3, a_k_major=True, b_k_major=True, grouping=0, has_c=False,
                         out="bfloat16", consumer_regs=232, producer_regs=40, tail=0, zero_gaps=True, uniform=False,
                         bm=128):
    """The warp-specialised BF16 kernel (gemm/bf16/kernels/gemm_ws.py) for one config (``tail``: its TAIL_N columns,
    B and D blocks of their own as bf16_launch._execute_ws passes them; ``zero_gaps`` / ``uniform``: its ZERO_GAPS
    and UNIFORM, the psum layout's gap rows zeroed and its layout values marked warp-uniform; ``bm`` 64: the
    64 x BN tile whose column halves the consumers split, SPLIT_N, D's block [64, BN / 2])."""
    from deep_gemm.gemm.bf16.kernels.gemm_ws import _bf16_gemm_ws_kernel as fn
    from triton.experimental.gluon._runtime import GluonASTSource
    b_block = [bn, bk] if b_k_major else [bk, bn]
    b2_block = ([tail, bk] if b_k_major else [bk, tail]) if tail else b_block
    split_n = bm == 64
    slab_n = bn // 2 if split_n else bn
    sig = {"a_desc": gluon_desc_sig([bm, bk] if a_k_major else [bk, bm], "bfloat16"),
           "b_desc": gluon_desc_sig(b_block, "bfloat16"), "b2_desc": gluon_desc_sig(b2_block, "bfloat16"),
           "d_desc": gluon_desc_sig([64, slab_n], out), "d2_desc": gluon_desc_sig([64, tail or bn], out),
           "c_desc": gluon_desc_sig([64, bn], out), "layout_ptr": "*i32",
           "d_ptr": "*" + {"bfloat16": "bf16", "float32": "fp32"}[out], "stride_dm": "i32"}
    sig.update({n: "i32" for n in ["M", "N", "K", "NUM_GROUPS", "B_GROUP_N", "B_GROUP_K", "NUM_TILES"]})
    constexprs = dict(BM=bm, BN=bn, BK=bk, STAGES=stages, GROUP_M=8, NUM_SMS=132, A_K_MAJOR=a_k_major,
                      B_K_MAJOR=b_k_major, GROUPING=grouping, G_PAD=8, PSUM_ALIGN=128, HAS_C=has_c, TAIL_N=tail,
                      CONSUMER_REGS=consumer_regs,
                      PRODUCER_REGS=producer_regs, ZERO_GAPS=zero_gaps, UNIFORM=uniform, SPLIT_N=split_n)
    sig.update({k: "constexpr" for k in constexprs})
    src = GluonASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in constexprs.items()})
    return triton.compile(src, target=SM90, options={"num_warps": 4, "num_stages": 1, **FP_FUSION})


BF16_WS_CONFIGS = [dict(bn=256, stages=3), dict(bn=128, stages=6), dict(bn=256, stages=3, b_k_major=False),
                   dict(bn=256, stages=3, a_k_major=False), dict(bn=256, stages=3, a_k_major=False, b_k_major=False),
                   dict(bn=256, stages=3, grouping=1), dict(bn=256, stages=3, grouping=2, b_k_major=False),
                   dict(bn=128, stages=6, grouping=2), dict(bn=256, stages=3, has_c=True),
                   dict(bn=128, stages=4, has_c=True, out="float32", a_k_major=False, b_k_major=False),
                   # Masked (rows past masked_m untouched), its tile values warp-uniform (bf16_plan._masked_plan).
                   dict(bn=256, stages=3, grouping=3, uniform=True), dict(bn=128, stages=6, grouping=3, uniform=True),
                   # ... on 64 x BN tiles, the consumers splitting N (SPLIT_N; bf16_plan._ws_config's 4 and 8 stages).
                   dict(bm=64, bn=256, stages=4, grouping=3, uniform=True),
                   dict(bm=64, bn=128, stages=8, grouping=3, uniform=True),
                   dict(bm=64, bn=256, stages=4, grouping=3, uniform=True, b_k_major=False),
                   # Tiles 128 + tail wide (bf16_plan._ws_config's rings: 5, 5 and 4 stages): 144 = N 576 / 4,
                   # 192 = N 2112 / 11.
                   dict(bn=128, stages=5, tail=16), dict(bn=128, stages=5, tail=32), dict(bn=128, stages=4, tail=64),
                   dict(bn=128, stages=5, tail=16, a_k_major=False, b_k_major=False),
                   # Psum with gaps left untouched (TMA for whole slabs, pointers for a group's end), its layout
                   # values marked warp-uniform or not (Bf16Overrides.ws / uniform_tiles).
                   dict(bn=256, stages=3, grouping=2, zero_gaps=False),
                   dict(bn=256, stages=3, grouping=2, zero_gaps=False, uniform=True),
                   dict(bn=128, stages=6, grouping=2, zero_gaps=False, uniform=True, b_k_major=False),
                   # K-grouped (FP32 C and D over [G*M, N], MN-major A and B; bf16_plan's 5-stage ring).
                   dict(bn=128, stages=5, grouping=4, has_c=True, out="float32", a_k_major=False, b_k_major=False,
                        uniform=True),
                   dict(bn=128, stages=5, grouping=4, out="float32", a_k_major=False, b_k_major=False)]

def partition_registers(cubin: bytes) -> list[tuple[int, int]]:
    """(setmaxnreg budget, highest register used + 1) of each warp-specialised partition whose code follows its
    budget: the SASS from one USETMAXREG to the next (stretches of a few instructions, the hand-overs, skipped).
    An estimate from register names (R<n>), enough to see how far a consumer's accumulators are from its budget."""
    import re
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        sass = subprocess.run([tool, "--dump-sass", f.name], capture_output=True, text=True).stdout
    parts, current = [], None
    for line in sass.splitlines():
        budget = re.search(r"USETMAXREG\.\w+\.CTAPOOL(?: UP\d,)? (0x[0-9a-f]+)", line)
        if budget:
            if current and current[2] > 20:
                parts.append((current[0], current[1]))
            current = [int(budget.group(1), 16), 0, 0]
        elif current is not None and "/*" in line:
            regs = [int(r) for r in re.findall(r"\bR(\d+)\b", line.split(";")[0])]
            current[1] = max([current[1]] + [r + 1 for r in regs])
            current[2] += 1
    if current and current[2] > 20:
        parts.append((current[0], current[1]))
    return parts


if __name__ == "__main__" and "--bf16-ws" in sys.argv:
    for cfg in BF16_WS_CONFIGS:
        try:
            ck = compile_bf16_gemm_ws(**cfg)
        except Exception as exc:  # noqa: BLE001  (report and go on: some majorness pairs may not lower)
            print("bf16-ws", cfg, "FAILED", type(exc).__name__, str(exc).splitlines()[0][:300], flush=True)
            continue
        info = ptxas_info(ck.asm["ptx"])
        print("bf16-ws", cfg, "smem", ck.metadata.shared, resource_usage(ck.asm["cubin"]),
              sass_counts(ck.asm["cubin"], ("HGMMA", "UTMALDG", "UTMASTG", "LDL", "STL")),
              "SERIALISED" if "C7514" in info else "", "partitions (budget, used):",
              partition_registers(ck.asm["cubin"]), flush=True)
