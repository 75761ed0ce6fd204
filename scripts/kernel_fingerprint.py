"""Fingerprint every shipped kernel variant: compile each for sm_90a with Triton's compiler (no GPU needed) and print
one line per variant, ``<variant name> <hash>``, sorted by name.

The variants are the ones scripts/compile_check*.py enumerate (the FP8 and BF16 GEMM kernels, tl.* and warp-
specialised; einsum; HyperConnection; the layout kernels; the MQA-logits indexer; legacy; Mega MoE; the block-sparse
MQA indexer; FP4; mega_mhc; mega_gate), minus variants the package does not ship.

The hash is of the PTX Triton hands to ptxas, with what only names source positions removed: ``.loc`` / ``.file``
lines, the line-table labels and the DWARF sections. So moving a ``@triton.jit`` function to another file, or
reflowing its source, keeps the fingerprint, while any change to the generated code changes it. Not the SASS by
default: ptxas (the one Triton bundles, run on this CPU) is not deterministic for every variant, e.g. the one-wave
warp-specialised psum / masked builds come out with other register numbers from one compile of the same PTX to the
next. ``--sass`` hashes the SASS instead (``cuobjdump --dump-sass``, line info dropped), to look at such differences.

Compare two trees (same Python environment, same Triton):

    cd TREE_A && python scripts/kernel_fingerprint.py > /tmp/fp_a.txt
    cd TREE_B && python scripts/kernel_fingerprint.py > /tmp/fp_b.txt
    diff /tmp/fp_a.txt /tmp/fp_b.txt && echo identical

    python scripts/kernel_fingerprint.py --jobs 4          # compile in 4 processes
    python scripts/kernel_fingerprint.py --only einsum     # variants whose name contains "einsum"

Run without TRITON_INTERPRET (the interpreter does not compile). Exits non-zero when a variant fails to compile.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import triton  # noqa: E402

import compile_check as cc  # noqa: E402
import compile_check_einsum as ce  # noqa: E402
import compile_check_fp8 as cf  # noqa: E402
import compile_check_hc as ch  # noqa: E402
import compile_check_indexer as ci  # noqa: E402
import compile_check_legacy as cl  # noqa: E402
import compile_check_mega as cm  # noqa: E402
import compile_check_sparse_mqa as cs  # noqa: E402
import compile_check_fp4 as c4  # noqa: E402
import compile_check_mega_mhc as cmh  # noqa: E402
import compile_check_mega_gate as cmg  # noqa: E402


def _key(cfg) -> str:
    if isinstance(cfg, dict):
        return ",".join(f"{k}={_key(v)}" for k, v in sorted(cfg.items()))
    return repr(cfg)


def variants() -> dict:
    """Variant name -> a function compiling it (deduplicated by name)."""
    out = {}

    def add(name, build):
        out.setdefault(name, build)

    for cfg in cc.FP8_CONFIGS:
        add(f"fp8_gemm {_key(cfg)}", lambda c=cfg: cc.compile_fp8_gemm(**c))
    ws = list(cc.FP8_WS_CONFIGS) + list(cc.BUDGET_VARIANTS.values()) + [c for c, _ in cf.BARRIER_VARIANTS.values()]
    ws += list(cf.PSUM_VARIANTS.values())
    for cfg in ws:
        add(f"fp8_gemm_ws {_key(cfg)}", lambda c=cfg: cc.compile_fp8_gemm_ws(**c))
    for cfg in cc.BF16_CONFIGS:
        add(f"bf16_gemm {_key(cfg)}", lambda c=cfg: cc.compile_bf16_gemm(**c))
    for cfg in cc.BF16_WS_CONFIGS:
        add(f"bf16_gemm_ws {_key(cfg)}", lambda c=cfg: cc.compile_bf16_gemm_ws(**c))
    add("transpose 64x64", lambda: _compile_transpose())

    _einsum(add)

    for cfg in ch.hc_configs():
        add(f"hc {_key(cfg)}", lambda c=cfg: ch.compile_hc(**c))
    for index, (name, _) in enumerate(_layout_names()):
        add(f"layout {name}", lambda i=index: next(itertools.islice(ch.compile_layout(), i, None))[1])

    for cfg in ci.PREFILL_VARIANTS:
        add(f"indexer prefill {_key(cfg)}", lambda c=cfg: ci.compile_prefill(**c))
    for cfg in ci.CLEAN_VARIANTS:
        add(f"indexer clean {_key(cfg)}", lambda c=cfg: ci.compile_clean(**c))
    for cfg in ci.PAGED_VARIANTS:
        add(f"indexer paged {_key(cfg)}", lambda c=cfg: ci.compile_paged(**c))
    add("indexer schedule", lambda: ci.compile_schedule())
    for cfg in ci.PERSISTENT_VARIANTS + ci.PERSISTENT_REGISTER_VARIANTS:
        add(f"indexer paged_persistent {_key(cfg)}", lambda c=cfg: ci.compile_paged_persistent(**c))

    for fn, pointers, ints, constexprs in cl.shipped_cases():
        add(f"legacy {fn.__name__} d={pointers['d_ptr']} {_key(constexprs)}",
            lambda f=fn, p=pointers, i=ints, c=constexprs: cl.compile_kernel(f, p, i, c))

    for name, build in cm.builders():
        add(f"mega {name}", build)
    for name, build in cs.builders():
        add(f"sparse_mqa {name}", build)
    for name, build in c4.builders():
        add(f"fp4_gemm {name}", build)
    for name, build in cmh.builders():
        add(f"mega_mhc {name}", build)
    for name, build in cmg.builders():
        add(f"mega_gate {name}", build)
    return out


def _compile_transpose():
    sys.path.insert(0, os.path.dirname(__file__))
    import compile_check_arch as ca
    return ca._compile_transpose(cc.SM90)


def _layout_names():
    # compile_layout yields (name, kernel) lazily; names only, without compiling.
    from deep_gemm.layout import plan as lt
    names = []
    for cols, c_unit in ((lt.BLOCK_COLS, True), (lt.BLOCK_COLS, False), (1, False), (4, True)):
        br, bc = lt.tile(cols)
        names += [(f"mn_major_copy {br}x{bc} c_unit={c_unit}", None), (f"pack_ue8m0 {br}x{bc} c_unit={c_unit}", None)]
    names += [(f"k_grouped_pack psum={psum}", None) for psum in (False, True)]
    return names


def _einsum(add):
    from deep_gemm.einsum.plan import BH_CONFIGS, BH_WIDE, BMK_CONFIGS, BMK_REDUCE_LOADS, FP8_CONFIGS
    for cfg in BH_CONFIGS:
        for b_k_major in (True, False):
            add(f"einsum bh {_key(cfg)} b_k_major={b_k_major}", lambda c=cfg, b=b_k_major: ce.compile_bh(c, b))
        if cfg in BH_WIDE:
            continue
        add(f"einsum bh {_key(cfg)} fp32 c_tma", lambda c=cfg: ce.compile_bh(c, has_c=True, out="fp32", c_tma=True))
        add(f"einsum bh {_key(cfg)} fp32 c ptr", lambda c=cfg: ce.compile_bh(c, has_c=True, out="fp32", d_tma=False))
        add(f"einsum bh {_key(cfg)} fp32 c", lambda c=cfg: ce.compile_bh(c, has_c=True, out="fp32"))
    for cfg in BMK_CONFIGS:
        for reduce in (1, 2, 3):
            add(f"einsum bmk {_key(cfg)} reduce={reduce} fp32 c",
                lambda c=cfg, r=reduce: ce.compile_bmk(c, has_c=True, d_tma=r == 1, reduce=r))
            add(f"einsum bmk {_key(cfg)} reduce={reduce} bf16",
                lambda c=cfg, r=reduce: ce.compile_bmk(c, out="bf16", reduce=r, d_tma=r == 1))
        for rm in (1, 2, 8):
            for loads in BMK_REDUCE_LOADS:
                add(f"einsum bmk_reduce {_key(cfg)} rm={rm} loads={loads} fp32 c",
                    lambda c=cfg, r=rm, n=loads: ce.compile_bmk_reduce(c, r, has_c=True, loads=n))
        add(f"einsum bmk_reduce {_key(cfg)} rm=2 loads=64 bf16", lambda c=cfg: ce.compile_bmk_reduce(c, 2, out="bf16"))
        add(f"einsum bmk_reduce {_key(cfg)} rm=2 loads=64 fp32 c unaligned",
            lambda c=cfg: ce.compile_bmk_reduce(c, 2, has_c=True, aligned=False))
        add(f"einsum bmk {_key(cfg)} fp32 c_tma", lambda c=cfg: ce.compile_bmk(c, has_c=True, c_tma=True))
        add(f"einsum bmk {_key(cfg)} fp32 c ptr", lambda c=cfg: ce.compile_bmk(c, has_c=True, d_tma=False))
        add(f"einsum bmk {_key(cfg)} bf16", lambda c=cfg: ce.compile_bmk(c, out="bf16"))
        add(f"einsum bmk {_key(cfg)} fp32 c", lambda c=cfg: ce.compile_bmk(c, has_c=True))
    for cfg in FP8_CONFIGS:
        add(f"einsum fp8 {_key(cfg)}", lambda c=cfg: ce.compile_fp8(c))
        add(f"einsum fp8 {_key(cfg)} 1d1d fp32 c_tma",
            lambda c=cfg: ce.compile_fp8(c, b_per_row=True, has_c=True, out="fp32", c_tma=True))
        add(f"einsum fp8 {_key(cfg)} 1d1d fp32 c ptr",
            lambda c=cfg: ce.compile_fp8(c, b_per_row=True, has_c=True, out="fp32", d_tma=False))
        add(f"einsum fp8 {_key(cfg)} gran_k=32", lambda c=cfg: ce.compile_fp8(c, bk=32))
        add(f"einsum fp8 {_key(cfg)} 1d1d fp32 c", lambda c=cfg: ce.compile_fp8(c, b_per_row=True, has_c=True,
                                                                               out="fp32"))


def sass_hash(cubin: bytes) -> str:
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        sass = subprocess.run([tool, "--dump-sass", f.name], capture_output=True, text=True, check=True).stdout
    lines = [" ".join(line.split()) for line in sass.splitlines()]
    lines = [line for line in lines if line and not line.startswith("//##")]
    if not any(re.match(r"/\*[0-9a-f]{4,}\*/", line) for line in lines):
        raise RuntimeError("cuobjdump printed no SASS")
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def ptx_hash(ptx: str) -> str:
    """The PTX without what names source positions (.loc / .file lines, line-table labels, the DWARF sections)."""
    cut = re.search(r"^\s*\.section\s+\.debug", ptx, re.M)
    body = ptx[:cut.start()] if cut else ptx
    lines = [" ".join(line.split()) for line in body.splitlines()]
    lines = [line for line in lines if line and not re.match(r"(\.loc|\.file)\b|\$L__tmp\d+:$", line)]
    if not any(line.startswith(".entry") or ".entry" in line for line in lines):
        raise RuntimeError("no kernel entry in the PTX")
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


_VARIANTS: dict = {}
_SASS = False


def _fingerprint(name: str) -> str:
    try:
        ck = _VARIANTS[name]()
        return f"{name} {sass_hash(ck.asm['cubin']) if _SASS else ptx_hash(ck.asm['ptx'])}"
    except Exception as exc:  # noqa: BLE001  (reported per variant)
        return f"{name} FAILED {type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc) else ''}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="compiling processes (default: %(default)s)")
    parser.add_argument("--only", default="", help="variants whose name contains this string")
    parser.add_argument("--sass", action="store_true", help="hash the SASS instead of the PTX (see above)")
    args = parser.parse_args(argv)
    global _SASS
    _SASS = args.sass
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        parser.error("run without TRITON_INTERPRET (the interpreter does not compile)")
    _VARIANTS.update(variants())
    names = sorted(n for n in _VARIANTS if args.only in n)
    if args.jobs > 1:
        import multiprocessing
        with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
            lines = pool.map(_fingerprint, names, chunksize=1)
    else:
        lines = [_fingerprint(n) for n in names]
    for line in lines:
        print(line)
    failed = [line for line in lines if " FAILED " in line]
    print(f"# triton {triton.__version__}: {len(lines)} variants, {len(failed)} failed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
