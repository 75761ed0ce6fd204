"""Compile the indexer kernels (attention/kernels/) for sm_90a on any machine (no GPU needed): registers, spills,
shared memory, SASS counts and layout conversions per variant. Run without TRITON_INTERPRET.

    python scripts/compile_check_indexer.py             # the variants the launchers use
    python scripts/compile_check_indexer.py --ttgir     # also count convert_layout ops in the TTGIR
    python scripts/compile_check_indexer.py --only-persistent   # only the persistent paged kernel's variants
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import triton  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from compile_check import FP_FUSION, SM90, resource_usage, sass_counts  # noqa: E402


def _compile(fn, sig: dict, constexprs: dict, warps: int, stages: int, maxnreg: int | None = None, target=SM90):
    sig = dict(sig)
    sig.update({k: "constexpr" for k in constexprs})
    src = ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in constexprs.items()})
    options = {"num_warps": warps, "num_stages": stages, **FP_FUSION}
    if maxnreg is not None:
        options["maxnreg"] = maxnreg
    return triton.compile(src, target=target, options=options)


def compile_prefill(h=64, d=128, block_kv=64, warps=4, stages=4, fp4=False, tma=True, compressed=False, out="fp32",
                    cols=128, fma_relu=False, interior=False, maxnreg=None, lean=None, target=SM90):
    """lean: PrefillConfig.lean_interior (None: as the launcher's default, i.e. on with the interior loop)."""
    from deep_gemm.attention.kernels.prefill import _fp8_mqa_logits_kernel as fn
    elem = "i8" if fp4 else "fp8e4nv"
    sig = {"q_desc": f"tensordesc<fp8e4nv[{cols}, {d}]>" if tma else "*fp8e4nv",
           "kv_desc": f"tensordesc<fp8e4nv[{block_kv}, {d}]>" if tma else "*fp8e4nv",
           "q_ptr": f"*{elem}", "q_sf_ptr": "*i32" if fp4 else "*fp8e4nv", "kv_ptr": f"*{elem}",
           "kv_sf_ptr": "*i32" if fp4 else "*fp32", "w_ptr": "*fp32", "ks_ptr": "*i32", "ke_ptr": "*i32",
           "out_ptr": f"*{out}"}
    sig.update({n: "i32" for n in ["S", "SK", "stride_w", "stride_out", "max_k", "num_q_blocks"]})
    constexprs = dict(H=h, D=d, BQ=cols // h, BLOCK_KV=block_kv, NUM_STAGES=stages, USE_TMA=tma, IS_FP4=fp4,
                      FP4_DOT_BF16=True, COMPRESSED=compressed, FMA_RELU=fma_relu, INTERIOR=interior,
                      LEAN_INTERIOR=interior if lean is None else lean, PTX=True)
    return _compile(fn, sig, constexprs, warps, stages, maxnreg, target)


def compile_clean(out="fp32", aligned=True, target=SM90):
    """The clean pass (``aligned``: its ALIGNED, whole blocks in 16-byte stores)."""
    from deep_gemm.attention.kernels.prefill import _clean_logits_kernel as fn
    sig = {"out_ptr": f"*{out}", "ks_ptr": "*i32", "ke_ptr": "*i32", "cols": "i32", "stride_out": "i32",
           "cols_per_program": "i32"}
    return _compile(fn, sig, dict(BLOCK=1024, ALIGNED=aligned), 4, 1, target=target)


def compile_paged(h=64, d=128, rows=2, block_kv=64, pages=8, warps=4, stages=3, fp4=False, tma=True, clean=False,
                  ctx_2d=True, out="fp32", target=SM90):
    from deep_gemm.attention.kernels.paged import _fp8_paged_mqa_logits_kernel as fn
    elem = "i8" if fp4 else "fp8e4nv"
    sig = {"q_ptr": f"*{elem}", "q_sf_ptr": "*i32" if fp4 else f"*{elem}",
           "kv_desc": f"tensordesc<fp8e4nv[1, {block_kv}, {d}]>" if tma else f"*{elem}",
           "kv_ptr": f"*{elem}", "kv_sf_ptr": "*i32" if fp4 else "*fp32", "w_ptr": "*fp32", "ctx_ptr": "*i32",
           "bt_ptr": "*i32", "out_ptr": f"*{out}"}
    sig.update({n: "i32" for n in ["next_n", "max_ctx", "max_blocks", "num_blocks", "stride_bt", "stride_page",
                                   "stride_w", "stride_out"]})
    constexprs = dict(H=h, D=d, ROWS=rows, BLOCK_KV=block_kv, PAGES=pages, NUM_STAGES=stages, KV_TMA=tma,
                      IS_FP4=fp4, FP4_DOT_BF16=True, CTX_2D=ctx_2d, CLEAN=clean)
    return _compile(fn, sig, constexprs, warps, stages, target=target)


def compile_schedule(target=SM90):
    from deep_gemm.attention.kernels.paged import _paged_schedule_kernel as fn
    sig = {"ctx_ptr": "*i32", "out_ptr": "*i32", "batch": "i32", "next_n": "i32", "num_sms": "i32", "atoms": "i32"}
    return _compile(fn, sig, dict(SMS_PAD=256, CHUNK=16), 4, 1, target=target)


def report(name, cfg, ck, ttgir=False):
    line = f"{name} {cfg} smem {ck.metadata.shared} {resource_usage(ck.asm['cubin'])} " \
           f"{sass_counts(ck.asm['cubin'], ('QGMMA', 'HGMMA', 'UTMALDG', 'LDL', 'STL', 'HMMA'))}"
    if ttgir:
        line += f" convert_layout {ck.asm['ttgir'].count('convert_layout')}"
    print(line, flush=True)


# The tl.* prefill kernel's variants: head counts and dims, FP4, compressed, the interior loop, the FMA ReLU.
PREFILL_VARIANTS = [dict(), dict(d=32), dict(d=64), dict(h=32), dict(h=16, d=64), dict(h=8, d=32),
                    dict(block_kv=128, warps=8, stages=3), dict(block_kv=128, warps=4, stages=3),
                    dict(compressed=True), dict(out="bf16"), dict(tma=False), dict(cols=256, warps=8),
                    dict(cols=256, warps=8, block_kv=128, stages=3),
                    dict(fp4=True, stages=2), dict(fp4=True, d=64, h=32, stages=2),
                    dict(fma_relu=True), dict(interior=True), dict(fma_relu=True, interior=True),
                    dict(fma_relu=True, interior=True, maxnreg=128),
                    dict(fma_relu=True, interior=True, compressed=True),
                    dict(fma_relu=True, interior=True, h=32), dict(fma_relu=True, interior=True, fp4=True, stages=2)]
CLEAN_VARIANTS = [dict(), dict(out="bf16")]
# The grid-walking paged kernel's variants.
PAGED_VARIANTS = [dict(), dict(rows=1), dict(h=32, rows=4), dict(clean=True, ctx_2d=False), dict(tma=False),
                  dict(block_kv=32, pages=16), dict(h=8, d=32, rows=2), dict(out="bf16"),
                  dict(fp4=True), dict(fp4=True, d=64, rows=1, block_kv=32, pages=16)]

if __name__ == "__main__" and "--only-persistent" not in sys.argv:
    ttgir = "--ttgir" in sys.argv
    for cfg in PREFILL_VARIANTS:
        report("prefill", cfg, compile_prefill(**cfg), ttgir)
    for cfg in CLEAN_VARIANTS:
        report("clean", cfg, compile_clean(**cfg), ttgir)
    for cfg in PAGED_VARIANTS:
        report("paged", cfg, compile_paged(**cfg), ttgir)
    report("schedule", {}, compile_schedule(), ttgir)


def compile_paged_persistent(h=64, d=128, rows=2, atom_rows=2, block_kv=64, warps=4, stages=5, fp4=False,
                             tma=True, clean=False, ctx_2d=True, out="fp32", q_align=1, row_dots=False,
                             maxnreg=None, lean=False, reg_scales=False, target=SM90):
    from deep_gemm.attention.kernels.paged import _fp8_paged_mqa_logits_persistent_kernel as fn
    elem = "i8" if fp4 else "fp8e4nv"
    sig = {"q_ptr": f"*{elem}", "q_sf_ptr": "*i32" if fp4 else f"*{elem}",
           "kv_desc": f"tensordesc<fp8e4nv[1, {block_kv}, {d}]>" if tma else f"*{elem}",
           "kv_ptr": f"*{elem}", "kv_sf_ptr": "*i32" if fp4 else "*fp32", "w_ptr": "*fp32", "ctx_ptr": "*i32",
           "bt_ptr": "*i32", "meta_ptr": "*i32", "out_ptr": f"*{out}",
           "sf_desc": f"tensordesc<fp32[1, {block_kv}]>" if lean and tma and not fp4 and not reg_scales else "*fp32"}
    sig.update({n: "i32" for n in ["batch", "next_n", "max_ctx", "max_blocks", "num_blocks", "stride_bt",
                                   "stride_page", "stride_w", "stride_out", "per_sm"]})
    constexprs = dict(H=h, D=d, ROWS=rows, ATOM_ROWS=atom_rows, BLOCK_KV=block_kv,
                      NUM_STAGES=stages, KV_TMA=tma, IS_FP4=fp4, FP4_DOT_BF16=True, CTX_2D=ctx_2d, CLEAN=clean,
                      TAIL_BLOCK=256, ATOM_CHUNK=64, Q_ALIGN=q_align, ROW_DOTS=row_dots, LEAN_LOOP=lean,
                      REG_SCALES=reg_scales, PTX=True)
    return _compile(fn, sig, constexprs, warps, stages, maxnreg, target)


PERSISTENT_VARIANTS = [dict(), dict(rows=1, atom_rows=1), dict(clean=True), dict(clean=True, ctx_2d=False),
                       dict(stages=7), dict(stages=7, clean=True), dict(stages=7, clean=True, ctx_2d=False),
                       dict(stages=3), dict(stages=6), dict(h=32), dict(h=32, rows=1, atom_rows=1), dict(tma=False),
                       dict(block_kv=32), dict(h=8, d=32, rows=2, atom_rows=1), dict(out="bf16"),
                       dict(fp4=True, stages=1),
                       dict(fp4=True, d=64, rows=1, atom_rows=1, block_kv=32, stages=1)]
# The register levers of PagedConfig: 16-byte Q loads (q_align=16), one dot per row (row_dots), a ptxas
# cap (maxnreg), 8 warps; <= 128 registers at 4 warps lets 4 programs share an SM (65536 registers).
PERSISTENT_REGISTER_VARIANTS = [
    dict(stages=7, q_align=16), dict(stages=7, q_align=16, maxnreg=128), dict(stages=7, row_dots=True),
    dict(stages=7, row_dots=True, q_align=16), dict(stages=5, row_dots=True, q_align=16),
    dict(stages=7, row_dots=True, q_align=16, clean=True, ctx_2d=False),
    dict(stages=7, row_dots=True, q_align=16, out="bf16"), dict(h=32, stages=7, row_dots=True, q_align=16),
    dict(stages=7, q_align=16, warps=8), dict(stages=7, row_dots=True, q_align=16, warps=8),
    # The lean page loop (PagedConfig.lean_page_loop): the defaults with it, and without TMA.
    dict(stages=7, q_align=16, maxnreg=128, lean=True), dict(stages=7, q_align=16, maxnreg=128, lean=True, out="bf16"),
    dict(stages=7, q_align=16, maxnreg=128, lean=True, clean=True, ctx_2d=False),
    dict(stages=7, q_align=16, maxnreg=128, lean=True, tma=False), dict(rows=1, atom_rows=1, q_align=16, lean=True),
    dict(h=32, q_align=16, lean=True), dict(fp4=True, stages=1, lean=True)]

if __name__ == "__main__":  # the persistent paged kernel (default paged path)
    for cfg in PERSISTENT_VARIANTS + PERSISTENT_REGISTER_VARIANTS:
        report("paged_persistent", cfg, compile_paged_persistent(**cfg), "--ttgir" in sys.argv)
