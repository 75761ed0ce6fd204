"""Compile the portable kernels for other GPU architectures than sm_90a, without a GPU: sm_100a (B200 / B300),
sm_120a (RTX 50xx), sm_89 (L40S, RTX 4090), sm_80 (A100).

Per architecture and op family, the family's own plan runs over representative problems (DeepGEMM's shapes: dense,
M-grouped, masked, K-grouped, decode rows) with that architecture's capability, and every distinct kernel variant
it picks is compiled for the target with Triton's compiler (the same builders as scripts/compile_check*.py). A
variant passes when it compiles and its shared memory fits the architecture's opt-in limit per block
(``deep_gemm.core.arch.shared_memory``: Triton refuses to load a kernel that needs more). Spills are reported, not
failed: these kernels are tuned on sm_90a only. Plans that choose sm_90a-only kernels elsewhere, and FP8 kernels
on sm_80 (no FP8 MMA: the ops run the reference there), fail the check.

    python scripts/compile_check_arch.py                           # every family, every architecture
    python scripts/compile_check_arch.py --arch 120 89 --family bf16 hc
    python scripts/compile_check_arch.py --quick                   # a few representative variants
    python scripts/compile_check_arch.py --quick --only 120:fp8 80:bf16   # ... of these (SM, family) pairs only
    python scripts/compile_check_arch.py --json                     # also one JSON line of results at the end

Exits non-zero when a variant fails. Run without TRITON_INTERPRET.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402

import compile_check as cc  # noqa: E402
import compile_check_einsum as ce  # noqa: E402
import compile_check_hc as ch  # noqa: E402
import compile_check_indexer as ci  # noqa: E402
import compile_check_legacy as cl  # noqa: E402
from deep_gemm.core import arch  # noqa: E402

ARCHS = (100, 120, 89, 80)
FAMILIES = ("fp8", "bf16", "einsum", "hc", "indexer", "layout", "legacy", "fp4", "sparse", "mega", "mega_mhc",
            "mega_gate")
# The SM count the plans see (the host has no GPU; an H100's, so tile choices are the ones the GPU tests know).
NUM_SMS = 132


def target(sm: int) -> GPUTarget:
    return GPUTarget("cuda", sm, 32)


class Variant:
    """One kernel build: a label, and ``build(target)`` returning the compiled kernel."""

    def __init__(self, family: str, label: str, build):
        self.family, self.label, self.build = family, label, build


def _key(d: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in d.items())


def _distinct(family: str, kwargs_list, builder, prefix: str = ""):
    seen, out = set(), []
    for kwargs in kwargs_list:
        label = prefix + _key(kwargs)
        if label not in seen:
            seen.add(label)
            out.append(Variant(family, label, lambda t, kw=kwargs: builder(**kw, target=t)))
    return out


class PlanError(Exception):
    """A plan chose something the architecture cannot run (an sm_90a-only kernel, or no kernel at all)."""


# ---- FP8 GEMM (gemm/fp8/kernels/gemm.py, the tl.* kernel)
# ---------------------------------------------------------------

def fp8_calls(sm: int):
    from deep_gemm.gemm.fp8.plan import GROUPING as G, Fp8Call
    calls = [Fp8Call(G["dense"], m, n, k, 1, NUM_SMS, sm=sm)
             for m, n, k in ((1, 2112, 7168), (64, 7168, 2048), (128, 4096, 7168), (4096, 7168, 2048),
                             (4096, 24576, 1536), (4096, 576, 7168))]
    calls += [Fp8Call(G["dense"], 4096, 4096, 7168, 1, NUM_SMS, b_per_row=True, has_c=True, out_bytes=4, c_tma=True,
                      sm=sm),
              Fp8Call(G["m_ids"], 4 * 8192, 7168, 3072, 4, NUM_SMS, sm=sm),
              Fp8Call(G["m_psum"], 8 * 4096, 4096, 2048, 8, NUM_SMS, zero_gaps=False, d_tma=False, sm=sm),
              Fp8Call(G["masked"], 1024, 4096, 4096, 6, NUM_SMS, expected_m=1024, d_tma=False, sm=sm),
              Fp8Call(G["masked"], 256, 7168, 3072, 32, NUM_SMS, expected_m=20, d_tma=False, sm=sm),
              Fp8Call(G["k_grouped"], 4096, 7168, 34304, 4, NUM_SMS, b_per_row=True, has_c=True, out_bytes=4,
                      d_tma=False, sm=sm)]
    return calls


def fp8_variants(sm: int, quick: bool = False):
    from deep_gemm.gemm.fp8 import plan as fp8_plan
    kwargs_list = []
    calls = fp8_calls(sm)
    for call in calls[3:4] if quick else calls:  # (quick: 4096 x 7168 x 2048, the 128 x 128 tile)
        p = fp8_plan.plan(call)
        if p is None:
            continue
        if p.kernel != "tl":
            raise PlanError(f"fp8 {call}: the plan chose the {p.kernel!r} kernel on sm_{sm}")
        cfg = p.config
        kwargs_list.append(dict(bm=cfg.block_m, bn=cfg.block_n, warps=cfg.num_warps, stages=cfg.num_stages,
                                split=cfg.split_k, grouping=call.grouping, b_per_row=call.b_per_row,
                                has_c=call.has_c, out="fp32" if call.out_bytes == 4 else "bf16", d_tma=call.d_tma))
    variants = _distinct("fp8", kwargs_list, cc.compile_fp8_gemm, "fp8_gemm ")
    if not quick:
        variants.append(Variant("fp8", "transpose 64x64", _compile_transpose))
    return variants


def _compile_transpose(t):
    from triton.compiler import ASTSource
    from deep_gemm.common.kernels.transpose import _transpose_kernel as fn
    sig = {"y_ptr": "*u8", "out_ptr": "*u8", "R": "i32", "C": "i32", "stride_yb": "i32", "stride_yc": "i32",
           "stride_ob": "i32", "stride_or": "i32", "BR": "constexpr", "BC": "constexpr"}
    src = ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index("BR"),): 64, (fn.arg_names.index("BC"),): 64})
    return triton.compile(src, target=t, options={"num_warps": 4, "num_stages": 1})


# ---- BF16 GEMM (gemm/bf16/kernels/gemm.py)
# -------------------------------------------------------------------------------

def bf16_calls(sm: int):
    from deep_gemm.gemm.bf16.plan import GROUPING as G, Bf16Call

    def call(grouping, m, n, k, groups=1, has_c=False, out=2, a_k=True, b_k=True, d_tma=True, **kw):
        return Bf16Call(grouping, m, n, k, groups, NUM_SMS, has_c, out, a_k, b_k, d_tma, sm=sm, **kw)
    calls = []
    for a_k, b_k in ((True, True), (True, False), (False, True), (False, False)):
        calls += [call(G["dense"], m, n, k, a_k=a_k, b_k=b_k, d_aligned=True)
                  for m, n, k in ((1, 2112, 7168), (128, 4096, 7168), (4096, 7168, 2048), (4096, 576, 7168))]
    calls += [call(G["dense"], 4096, 4096, 7168, has_c=True, out=4, c_tma=True, d_aligned=True),
              call(G["dense"], 64, 4096, 7168, has_c=True, out=4, c_tma=True, d_aligned=True),
              call(G["m_ids"], 4 * 8192, 7168, 3072, 4, d_aligned=True),
              call(G["m_psum"], 8 * 4096, 4096, 2048, 8, b_k=False, d_tma=False, zero_gaps=False, d_aligned=True,
                   k_divisor=2048),
              call(G["masked"], 1024, 4096, 4096, 6, d_tma=False, expected_m=1024, d_aligned=True),
              call(G["masked"], 256, 7168, 3072, 32, d_tma=False, expected_m=20, d_aligned=True),
              call(G["k_grouped"], 4096, 7168, 34304, 4, has_c=True, out=4, a_k=False, b_k=False, d_tma=False,
                   k_divisor=128, c_tma=True, d_aligned=True)]
    return calls


def bf16_variants(sm: int, quick: bool = False):
    from deep_gemm.gemm.bf16 import plan as bf16_plan
    kwargs_list = []
    calls = bf16_calls(sm)
    for call in calls[2:3] if quick else calls:  # (quick: 4096 x 7168 x 2048 nt)
        p = bf16_plan.plan(call)
        if p is None:
            if arch.has_mma(sm):
                raise PlanError(f"bf16 {call}: no plan on sm_{sm}")
            continue
        if p.kernel != "tl":
            raise PlanError(f"bf16 {call}: the plan chose the {p.kernel!r} kernel on sm_{sm}")
        cfg = p.config
        kwargs_list.append(dict(bm=cfg.block_m, bn=cfg.block_n, bk=cfg.block_k, warps=cfg.num_warps,
                                stages=cfg.num_stages, split=cfg.split_k, grouping=call.grouping, has_c=call.has_c,
                                out="fp32" if call.out_bytes == 4 else "bf16", d_tma=p.d_tma,
                                a_k_major=call.a_k_major if call.grouping != bf16_plan.GROUPING["masked"] else True,
                                b_k_major=call.b_k_major, tail=cfg.block_n_tail, zero_gaps=call.zero_gaps,
                                uniform=p.uniform))
    return _distinct("bf16", kwargs_list, cc.compile_bf16_gemm, "bf16_gemm ")


# ---- einsum (einsum/kernels.py) --------------------------------------------------------------------------------------

def einsum_variants(sm: int, quick: bool = False):
    from deep_gemm.einsum import plan as et
    from deep_gemm.einsum.kernels import REDUCE_GRID, REDUCE_NONE, REDUCE_PARALLEL, REDUCE_SERIAL
    variants = []
    rows = [(8, 4096, 1024, 4096, True, "bf16", False), (8, 4096, 1024, 4096, False, "fp32", True),
            (8, 128, 1024, 4096, True, "bf16", False), (128, 4096, 128, 512, True, "bf16", False),
            (128, 4096, 128, 512, False, "bf16", False), (8, 32, 1024, 4096, True, "bf16", False),
            (256, 32, 128, 512, True, "bf16", False)]
    bh = []
    for g, m, n, k, plain, out, has_c in rows[:1] if quick else rows:
        cfg = et.fitted_bh_config(et.bh_config(g, m, n, k, plain), 4 if out == "fp32" else 2, has_c, sm)
        for b_k_major in (True,) if quick else (True, False):
            bh.append(dict(cfg=cfg, b_k_major=b_k_major, has_c=has_c, out=out, c_tma=has_c))
    variants += _distinct("einsum", bh, ce.compile_bh, "bh ")
    if quick:
        return variants
    codes = {"parallel": REDUCE_PARALLEL, "serial": REDUCE_SERIAL, "grid": REDUCE_GRID}
    bmk, reduce_kernels = [], []
    for s, m, n, k in ((129, 128, 384, 128), (4096, 256, 256, 256), (3, 128, 128, 64), (512, 1024, 1024, 128)):
        plan = et.bmk_plan(s, m, n, k, sm=sm)
        reduce = codes[plan.reduce] if plan.splits > 1 else REDUCE_NONE
        tma = reduce in (REDUCE_NONE, REDUCE_SERIAL)
        bmk.append(dict(cfg=plan.tile, has_c=True, out="fp32", d_tma=tma, c_tma=tma, reduce=reduce))
        if reduce == REDUCE_PARALLEL:
            reduce_kernels.append(dict(cfg=plan.tile, rm=2, has_c=True, loads=et.reduce_loads(plan.splits)))
    variants += _distinct("einsum", bmk, ce.compile_bmk, "bmk ")
    variants += _distinct("einsum", reduce_kernels, ce.compile_bmk_reduce, "bmk reduce ")
    if arch.has_fp8_mma(sm):
        fp8 = []
        for g, m, n in ((8, 4096, 1024), (8, 128, 1024), (8, 32, 1024), (128, 32, 1024)):
            cfg = et.fitted_fp8_config(et.fp8_config(g, m, n), 2, False, 128, sm)
            fp8.append(dict(cfg=cfg))
            cfg = et.fitted_fp8_config(et.fp8_config(g, m, n), 4, True, 128, sm)
            fp8.append(dict(cfg=cfg, b_per_row=True, has_c=True, out="fp32", c_tma=True))
        cfg = et.fitted_fp8_config(et.fp8_config(8, 4096, 1024), 2, False, 32, sm)
        fp8.append(dict(cfg=cfg, bk=32))
        variants += _distinct("einsum", fp8, ce.compile_fp8, "fp8 ")
    return variants


# ---- HyperConnection, layout --------------------------------------------------------------------------------------

def hc_variants(sm: int, quick: bool = False):
    from deep_gemm.hyperconnection import plan as hc_plan
    configs = hc_plan.compile_configs(sm)
    return _distinct("hc", configs[:1] if quick else configs, ch.compile_hc, "hc ")


def layout_variants(sm: int, quick: bool = False):
    if quick:  # (compile_layout builds lazily: only its first kernel, the 64 x 32 MN-major copy)
        return [Variant("layout", "mn_major_copy 64x32", lambda t: next(iter(ch.compile_layout(t)))[1])]
    return [Variant("layout", "every layout kernel (MN-major copy, UE8M0 pack, K-grouped pack; the largest smem)",
                    lambda t: max((ck for _, ck in ch.compile_layout(t)), key=lambda ck: ck.metadata.shared))]


# ---- indexer (attention/kernels/) ---------------------------------------------------------------------------------

def indexer_variants(sm: int, quick: bool = False):
    from deep_gemm.attention import plan as tl
    variants = [Variant("indexer", "paged schedule", lambda t: ci.compile_schedule(target=t))]
    if quick:
        return variants
    if not arch.has_fp8_mma(sm):
        return variants  # (the logits kernels take FP8 / FP4 operands: the reference runs)
    prefill = []
    for h, d, fp4 in ((64, 128, False), (16, 64, False), (64, 128, True), (32, 64, True)):
        cfg = tl.prefill_config(h, d, fp4)
        prefill.append(dict(h=h, d=d, block_kv=cfg.block_kv, warps=cfg.num_warps, stages=cfg.num_stages, fp4=fp4,
                            tma=not fp4, cols=cfg.score_cols, fma_relu=cfg.fma_relu, interior=cfg.interior,
                            maxnreg=cfg.max_registers, lean=cfg.interior and cfg.lean_interior))
    variants += _distinct("indexer", prefill, ci.compile_prefill, "prefill ")
    paged = []
    for next_n, h, d, block_kv, fp4 in ((2, 64, 128, 64, False), (1, 64, 128, 64, False), (2, 32, 128, 64, False),
                                        (1, 64, 128, 64, True)):
        cfg = tl.paged_default_config(next_n, h, d, block_kv, fp4)
        atom_rows = 2 if next_n >= 2 else 1
        rows = max(atom_rows, -(-tl.MIN_DOT_N // h))
        reg_scales = cfg.register_page_scales and not fp4
        paged.append(dict(h=h, d=d, rows=rows, atom_rows=atom_rows, block_kv=block_kv, warps=cfg.num_warps,
                          stages=1 if fp4 else cfg.num_stages, fp4=fp4, tma=not fp4, q_align=16,
                          maxnreg=cfg.max_registers, lean=cfg.lean_page_loop, reg_scales=reg_scales))
    variants += _distinct("indexer", paged, ci.compile_paged_persistent, "paged persistent ")
    grid = tl.PAGED_GRID_CONFIG
    variants += _distinct("indexer", [dict(h=64, d=128, rows=2, block_kv=64, pages=grid.tokens_per_program // 64,
                                           warps=grid.num_warps, stages=grid.num_stages)],
                          ci.compile_paged, "paged grid ")
    variants += _distinct("indexer", [dict(aligned=True), dict(aligned=False)], ci.compile_clean, "clean logits ")
    return variants


# ---- legacy (legacy/kernels.py) ------------------------------------------------------------------------------------

def legacy_variants(sm: int, quick: bool = False):
    from deep_gemm.legacy import kernels
    from deep_gemm.legacy.plan import K_GROUPED_TILE, M_GROUPED_TILE
    m_tile, k_tile = M_GROUPED_TILE.for_sm(sm), K_GROUPED_TILE.for_sm(sm)
    cases = []
    for unit in cl.B_UNIT_STRIDES[:1] if quick else cl.B_UNIT_STRIDES:
        ints = [i for i in cl.M_INTS if i != unit]
        cases.append((f"m_grouped {m_tile.label()} {unit}=1", kernels.m_grouped_bf16_gemm_contiguous_tl_impl,
                      cl.M_POINTERS, ints, m_tile, {unit: 1}))
        if not quick:
            cases.append((f"a_fused m_grouped {m_tile.label()} {unit}=1",
                          kernels.a_fused_m_grouped_bf16_gemm_contiguous_tl_impl,
                          dict(cl.M_POINTERS, row_indices_ptr="*i32"), ints, m_tile, {unit: 1}))
    if not quick:
        for fn in (kernels.a_fused_k_grouped_bf16_gemm_contiguous_tl_impl,
                   kernels.b_fused_k_grouped_bf16_gemm_contiguous_tl_impl):
            cases.append((f"{fn.__name__.split('_k_grouped')[0]} k_grouped {k_tile.label()}", fn, cl.K_POINTERS,
                          cl.K_INTS, k_tile, {"ACC": True}))
    variants = []
    for label, fn, pointers, ints, tile, extra in cases:
        constexprs = dict(DOT_FP32=False, BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, BLOCK_K=tile.block_k, **extra)

        def build(t, fn=fn, pointers=pointers, ints=ints, constexprs=constexprs, tile=tile):
            return cl.compile_kernel(fn, pointers, ints, constexprs, tile.num_warps, tile.num_stages, target=t)
        variants.append(Variant("legacy", label, build))
    return variants


def fp4_variants(sm: int, quick: bool = False):
    """The FP4 kernel's forms at the plan's tiles (the same on every architecture: pointer loads, no TMA, a ring of
    at most 64 KB)."""
    import compile_check_fp4 as c4
    variants = [Variant("fp4", f"{name} {cfg.block_m}x{cfg.block_n}x{cfg.block_k} w{cfg.num_warps}",
                        lambda t, c=cfg, f=form: c4.compile_fp4(c, target=t, **f))
                for cfg, name, form in c4.configured_forms()]
    return variants[-1:] if quick else variants


def _from_builders(family: str, sm: int, builders, quick: bool, keep=lambda name: True, quick_prefix: str = ""):
    """Variants of a per-family compile check's ``builders(target)`` (scripts/compile_check_<family>.py), those whose
    name ``keep`` accepts: the forms the family's launchers run on ``sm``. ``quick``: the first of those named with
    ``quick_prefix`` (the family's largest pipeline) and the last."""
    named = [(name, build) for name, build in builders(target(sm)) if keep(name)]
    if quick and len(named) > 1:
        named = [next((nb for nb in named if nb[0].startswith(quick_prefix)), named[0]), named[-1]]
    return [Variant(family, name, lambda t, b=build: b()) for name, build in named]


def sparse_variants(sm: int, quick: bool = False):
    """Block-sparse MQA logits, their schedule metadata and the MQA logits metadata (attention/sparse, metadata:
    every architecture with MMAs); FP8 q's logits only where FP8 is (the op runs the reference below)."""
    import compile_check_sparse_mqa as cs
    return _from_builders("sparse", sm, cs.builders, quick,
                          lambda name: arch.has_fp8_mma(sm) or not (name.startswith("logits") and "fp4=False" in name),
                          quick_prefix="logits")


def mega_variants(sm: int, quick: bool = False):
    """The Mega MoE kernels the launchers (mega/launch.py) run on ``sm``: the FP8 layer and pre-dispatch where FP8
    MMAs exist, the BF16 layer where TMA and the 228 KB shared memory are (sm_90 / sm_100); routing, scan, dispatch
    and combine serve both."""
    import compile_check_mega as cm
    fp8, bf16 = arch.has_fp8_mma(sm), arch.has_tma(sm) and arch.sm90_occupancy(sm)

    def keep(name: str) -> bool:
        return bf16 if name.startswith("bf16 ") else fp8 or (bf16 and not name.startswith(("l1 ", "l2 ", "pre_")))
    return _from_builders("mega", sm, cm.builders, quick, keep, quick_prefix="l1 bm=128" if fp8 else "bf16 l1 bm=128")


def mega_mhc_variants(sm: int, quick: bool = False):
    """mega_mhc's norm and post kernels; the FP8-output forms only where FP8 is (the op runs the reference below)."""
    import compile_check_mega_mhc as cmh
    return _from_builders("mega_mhc", sm, cmh.builders, quick,
                          lambda name: arch.has_fp8_mma(sm) or "fp8=True" not in name)


def mega_gate_variants(sm: int, quick: bool = False):
    """bf16_mega_gate's routing kernel (its logits GEMM is the BF16 GEMM's, checked under ``bf16``)."""
    import compile_check_mega_gate as cmg
    return _from_builders("mega_gate", sm, cmg.builders, quick)


VARIANTS = {"fp8": fp8_variants, "bf16": bf16_variants, "einsum": einsum_variants, "hc": hc_variants,
            "indexer": indexer_variants, "layout": layout_variants, "legacy": legacy_variants, "fp4": fp4_variants,
            "sparse": sparse_variants, "mega": mega_variants, "mega_mhc": mega_mhc_variants,
            "mega_gate": mega_gate_variants}
# Families whose kernels take FP8 operands only: not built below sm_89 (their ops run the reference there).
FP8_ONLY = {"fp8"}


def check(sms, families, quick: bool = False, verbose: bool = True, only=None) -> list[dict]:
    """Build every variant; one result dict per variant (arch, family, label, ok, smem, limit, seconds, error).
    ``only``: (sm, family) pairs to check, instead of every SM of ``sms`` x every family of ``families``."""
    results = []
    for sm in list(dict.fromkeys(pair[0] for pair in only)) if only else sms:
        limit = arch.shared_memory(sm)
        with arch.forced_capability(arch.capability_of_sm(sm)):
            for family in families:
                if only and (sm, family) not in only:
                    continue
                if family in FP8_ONLY and not arch.has_fp8_mma(sm):
                    results.append(dict(arch=sm, family=family, label="(no FP8 MMA: the reference runs)", ok=True,
                                        skipped=True))
                    if verbose:
                        print(f"sm_{sm} {family}: skipped (no FP8 MMA below sm_89: the ops run the reference)",
                              flush=True)
                    continue
                try:
                    variants = VARIANTS[family](sm, quick)
                except PlanError as exc:
                    results.append(dict(arch=sm, family=family, label="(plan)", ok=False, error=str(exc)))
                    if verbose:
                        print(f"FAIL sm_{sm} {family}: {exc}", flush=True)
                    continue
                for v in variants:
                    start = time.time()
                    entry = dict(arch=sm, family=family, label=v.label, limit=limit)
                    try:
                        ck = v.build(target(sm))
                        entry.update(smem=ck.metadata.shared, ok=ck.metadata.shared <= limit)
                        if not entry["ok"]:
                            entry["error"] = f"shared memory {ck.metadata.shared} > {limit}"
                    except Exception as exc:  # noqa: BLE001  (reported per variant; the run goes on)
                        entry.update(ok=False, error=f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}"
                                     if str(exc).strip() else type(exc).__name__)
                        if os.environ.get("DG_COMPILE_CHECK_TRACEBACK"):
                            traceback.print_exc()
                    entry["seconds"] = round(time.time() - start, 1)
                    results.append(entry)
                    if verbose:
                        status = "ok  " if entry["ok"] else "FAIL"
                        detail = f"smem {entry.get('smem')} / {limit}" if "smem" in entry else entry.get("error", "")
                        if "error" in entry and "smem" in entry:
                            detail += f" ({entry['error']})"
                        print(f"{status} sm_{sm} {family} {v.label}: {detail} [{entry['seconds']}s]", flush=True)
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arch", type=int, nargs="+", default=list(ARCHS), help="SM versions (default: %(default)s)")
    parser.add_argument("--family", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    parser.add_argument("--quick", action="store_true", help="a few representative variants per family")
    parser.add_argument("--json", action="store_true", help="print the results as one JSON line at the end")
    parser.add_argument("--only", nargs="+", default=None, metavar="SM:FAMILY",
                        help="check these (SM version, family) pairs only, e.g. 120:fp8")
    args = parser.parse_args(argv)
    only = None
    if args.only:
        only = []
        for pair in args.only:
            sm, _, family = pair.partition(":")
            if not sm.isdigit() or family not in FAMILIES:
                parser.error(f"--only: expected SM:FAMILY with a family of {FAMILIES}, got {pair!r}")
            only.append((int(sm), family))
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        parser.error("run without TRITON_INTERPRET (the interpreter does not compile)")
    from deep_gemm.core import runtime
    runtime.set_num_sms(NUM_SMS)
    results = check(args.arch, args.family, args.quick, verbose=not args.json, only=only)
    bad = [r for r in results if not r["ok"]]
    if args.json:
        print(json.dumps(dict(triton=triton.__version__, results=results)))
    else:
        print(f"triton {triton.__version__}: {len(results) - len(bad)} of {len(results)} variants ok"
              + (f"; FAILED: {[(r['arch'], r['family'], r['label']) for r in bad]}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
