"""A/B of Fp8Overrides.uniform_tiles (kernels/uniform.warp_uniform: the psum / masked layout's values marked
warp-uniform, so the K loops keep ptxas's uniform datapath) on DeepGEMM's psum rows and masked-through-psum (decode)
rows, against the shipped plan and the same psum problems in the expert-id layout, one process, one timer
(harness.KernelTimer: kernels only, L2 flushed). Rows and tensors come from research/sweeps/sweep_moe_schedule.py
(DeepGEMM's generators: sizes 0.7-1.3 x the expected rows, seed 0; ensure_zero_padding=False as on SM90).

Variants (each checked against the dequantised reference; the uniform ones must be bit-identical to `plan`):
  plan         the shipped plan (psum: the carried walk; decode: the per-tile scan, split 128 x 192 tiles at G=6 m=1024)
  uni          uniform_tiles on the plan's own tile lookup
  uni_scan     uniform_tiles with the per-tile scan (its sm_90a build spills least: 8 B, none in a K loop)
  uni_walk     uniform_tiles with the walk
  uni_n256     (decode rows) uniform_tiles, the scan, 128 x 256 tiles (the plan sizes decode rows by 1.2 x the
               expected rows and picks 128 x 192 at G=6 m=1024 by a hair)
  ids          (psum rows) the same problem in the expert-id layout on the shipped plan: the target

    python research/probes/ws_uniform_ab.py [--rows psum,decode] [--reps 10]      (H200: ~2-4 min incl. compiles)
    python research/probes/ws_uniform_ab.py --rows k_grouped      (H200: ~1-2 min: plan vs uni, bench K_GROUPED tn)
    python research/probes/ws_uniform_ab.py --compile [--rows k_grouped]   (no GPU, no TRITON_INTERPRET: sm_90a
                                                                            K-loop facts of those rows' builds)

k_grouped rows: benchmarks/shapes.K_GROUPED through k_grouped_fp8_gemm_tn_contiguous (bench_fp8_gemm's operands,
C a separate zero tensor so every call writes the same D); `uni` marks each tile's K range warp-uniform
(fp8_plan.UNIFORM_K_GROUPED, off in the plan).

--compile: per variant and register budget, spilled bytes and, per innermost K loop (a backward branch around
wgmmas), its instructions, LDL/STL, R2UR moves and uniform-datapath instructions.

One line per row: each variant's us and plan / variant (> 1: faster than the plan), then the geomean per variant.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "sweeps"))

import sweep_moe_schedule as sweep  # noqa: E402  (puts the repository and benchmarks/ first on sys.path)

VARIANTS = {
    "plan": None,
    "uni": dict(uniform_tiles=True),
    "uni_scan": dict(uniform_tiles=True, tile_walk=False),
    "uni_walk": dict(uniform_tiles=True, tile_walk=True),
    "uni_n256": dict(uniform_tiles=True, tile_walk=False, waves=2, wave_n=True, narrow=128),
}
PSUM_VARIANTS = ["plan", "uni", "uni_scan", "uni_walk"]
DECODE_VARIANTS = ["plan", "uni", "uni_walk", "uni_n256"]
# DeepGEMM's masked-through-psum rows (bench MOE_MASKED, MASKED_MAX_M rows per group), the worst (G=6 m=1024
# N=4096 K=4096, 0.74x DeepGEMM in session 23) and its N=6144 K=7168 sibling added.
DECODE_ROWS = [(32, 192, 6144, 7168), (32, 192, 4096, 4096), (6, 1024, 4096, 4096), (6, 1024, 6144, 7168),
               (32, 20, 7168, 3072)]


def parse(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", default="psum,decode", help="comma-separated: psum, decode, k_grouped")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--compile", action="store_true", help="sm_90a builds only (no GPU)")
    args = parser.parse_args(argv)
    args.rows = [r for r in args.rows.split(",") if r]
    unknown = set(args.rows) - {"psum", "decode", "k_grouped"}
    if unknown:
        parser.error(f"--rows: unknown {sorted(unknown)}")
    return args


# (name, compile_check_fp8.compile_ws arguments): the two-wave 128 x 256 tiles of the psum rows (G_PAD 8, gaps not
# zeroed), the split 128 x 192 tiles of the worst decode row, and the expert-id build of the same tiles.
COMPILE_VARIANTS = [
    ("ids", dict(waves=2, wave_n=True, stages=4, grouping=1, g_pad=8)),
    ("psum walk", dict(waves=2, wave_n=True, stages=4, grouping=2, zero_gaps=False, g_pad=8, walk=True)),
    ("psum walk uniform", dict(waves=2, wave_n=True, stages=4, grouping=2, zero_gaps=False, g_pad=8, walk=True,
                               uniform=True)),
    ("psum scan", dict(waves=2, wave_n=True, stages=4, grouping=2, zero_gaps=False, g_pad=8)),
    ("psum scan uniform", dict(waves=2, wave_n=True, stages=4, grouping=2, zero_gaps=False, g_pad=8, uniform=True)),
    ("decode split scan", dict(waves=2, wave_n=True, narrow=64, stages=4, grouping=2, zero_gaps=False, g_pad=8)),
    ("decode split scan uniform", dict(waves=2, wave_n=True, narrow=64, stages=4, grouping=2, zero_gaps=False,
                                       g_pad=8, uniform=True)),
]
# K-grouped (the plan's two-wave 128 x 256 1D1D tiles, C and D by TMA; nt: per-group descriptors) and the dense
# build of the same tile: the target.
_KG = dict(waves=2, wave_n=True, stages=3, b_per_row=True, has_c=True, out="fp32", c_tma=True, d_tma=True)
K_GROUPED_COMPILE_VARIANTS = [
    ("dense 1D1D", dict(_KG, grouping=0)),
    ("k_grouped tn", dict(_KG, grouping=4)),
    ("k_grouped tn uniform", dict(_KG, grouping=4, uniform=True)),
    ("k_grouped nt desc", dict(_KG, grouping=4, kg_desc=True)),
    ("k_grouped nt desc uniform", dict(_KG, grouping=4, kg_desc=True, uniform=True)),
]


def compile_report(rows):
    for p in (os.path.join(HERE, "..", "..", "scripts"), HERE):
        sys.path.insert(0, p)
    from compile_check import spilled_bytes
    from compile_check_fp8 import compile_ws
    from ws_loop_spills import LINE, loop_spills, sass_of

    from deep_gemm.gemm.fp8_plan import WS_REGISTER_BUDGETS, ws_register_budget
    variants = (COMPILE_VARIANTS if {"psum", "decode"} & set(rows) else []) + (
        K_GROUPED_COMPILE_VARIANTS if "k_grouped" in rows else [])
    for name, cfg in variants:
        spills = {}
        for budget in WS_REGISTER_BUDGETS:
            ck = compile_ws(consumer_regs=budget[0], producer_regs=budget[1], **cfg)
            sass = sass_of(ck.asm["cubin"])
            insts = [m.group(2) for m in LINE.finditer(sass)]
            loops = loop_spills(sass)
            inner = [lp for lp in loops if not any(o != lp and lp[0] <= o[0] and o[1] <= lp[1] for o in loops)]
            facts = []
            for start, end, _, ldl, stl in inner:
                body = insts[start:end + 1]
                facts.append(f"{len(body)}i/{ldl}L/{stl}S/{sum('R2UR' in t for t in body)}r2ur/"
                             f"{sum(t.split()[0].startswith('U') for t in body)}u")
            spills[budget] = spilled_bytes(ck.asm["cubin"])
            print(f"{name:28s} {budget} spilled {spills[budget]:4d} B  K loops {' '.join(facts)}", flush=True)
        print(f"{name:28s} kept {ws_register_budget(lambda b: spills[b] // 4)}", flush=True)


def tables(rows):
    """[(name, flops, {variant: call}, check, valid)] of the requested rows (sweep_moe_schedule's row builders,
    with this probe's variants)."""
    sweep.VARIANTS.clear()
    sweep.VARIANTS.update(VARIANTS)
    out = []
    if "psum" in rows:
        out += list(sweep.psum_rows(PSUM_VARIANTS))
    if "decode" in rows:
        sweep.bench.MOE_MASKED[:] = DECODE_ROWS
        out += list(sweep.masked_rows(DECODE_VARIANTS, True))
    if "k_grouped" in rows:
        out += [_k_grouped_row(*shape) for shape in sweep.bench.shapes.K_GROUPED]
    return out


def _k_grouped_row(g, m, n, k_per_group, variants=None):
    """(name, flops, {variant: call}, check, valid) of one K-grouped tn row (bench_fp8_gemm's operands); `variants`
    maps names to Fp8Overrides (None: the plan), default plan and uni."""
    import torch

    from deep_gemm.gemm.fp8_plan import Fp8Overrides
    bench = sweep.bench
    ks, a, b, layout = bench.k_grouped_operands(g, m, n, k_per_group)
    d = torch.empty(g, m, n, device="cuda")
    c = torch.zeros(g, m, n, device="cuda")  # (D = C + A B: every call writes the same D)

    def call(ov):
        return lambda: sweep.run_launcher("k_grouped_fp8_gemm_tn_contiguous", a[0], a[1], b[0], b[1], d, ks, layout,
                                          c=c, launcher_kwargs=sweep._kwargs(ov))
    if variants is None:
        variants = {"plan": None, "uni": Fp8Overrides(uniform_tiles=True)}
    calls = {v: call(ov) for v, ov in variants.items()}
    expected = bench.k_grouped_reference(a, b, ks, layout, g, m, n)
    return (f"k_grouped G={g} M={m} N={n} sumK={sum(ks)}", 2 * m * n * sum(ks), calls,
            lambda: bench.calc_diff(d, expected), lambda: d)


def main(argv=None):
    args = parse(argv)
    if args.compile:
        compile_report(args.rows)
        return 0
    import torch
    torch.manual_seed(0)
    rows = tables(args.rows)
    timer = sweep.KernelTimer(reps=args.reps)
    errors = sweep.first_calls(rows)
    ratios = {}
    for name, flops, calls, check, valid in rows:
        base, line = None, []
        times = {}
        for v, fn in calls.items():
            if (name, v) in errors:
                continue
            fn()
            diff = check()
            out = valid().clone()
            if v == "plan":
                base = out
            flag = "" if diff < sweep.bench.CORRECTNESS_LIMIT else "!WRONG"
            if v not in ("plan", "ids") and base is not None and not torch.equal(out, base):
                flag += "!DIFF"  # (uni_n256 changes the tile width: its bits may differ only by tile order: none)
            times[v] = min(timer(fn), timer(fn))
            line.append(f"{v} {times[v]:7.1f}{flag}")
        rel = {v: times["plan"] / t for v, t in times.items() if "plan" in times}
        for v, r in rel.items():
            ratios.setdefault((name.split()[0], v), []).append(r)
        print(f"{name:36s} " + "  ".join(line) + "  | plan/x: " + " ".join(f"{v} {r:.3f}" for v, r in rel.items()
                                                                          if v != "plan"), flush=True)
    print("geomean plan / variant:")
    for (kind, v), rs in sorted(ratios.items()):
        if v != "plan":
            gm = math.exp(sum(map(math.log, rs)) / len(rs))
            print(f"  {kind:12s} {v:9s} {gm:.3f}x over {len(rs)} rows (min {min(rs):.3f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
