"""A/B of Fp8Overrides.stagger (fp8_gemm_ws._mainloop_two_waves: warpgroup 1 issues wave 0 of a K block only after
warpgroup 0's wave 0 of that block completed; 1 = a tile's first block, 2 = every block) on the two-wave 1D2D rows:
DeepGEMM's dense M=4096 rows, its psum contiguous rows and the same problems in the expert-id layout, its masked
decode rows through the psum layout, and (1D1D scales, _mainloop_two_waves_1d1d) its weight-gradient rows and the
benchmark's K-grouped tn rows. One process, one timer (harness.KernelTimer: kernels only, L2 flushed).

Hypothesis (session 31): both consumer warpgroups wait for the same stage and issue their waves together; sharing the
tensor core, they finish together and promote together while it idles, twice per K block (two waves), which fits
session 12's 1300-1350 cycles per K block against 1024 and the 12-22 % that dropping the promotion gained (session 6).
Predicted: stagger 2 up to ~10 % faster on the long-K rows if the hardware interleaves the two warpgroups' wgmmas;
no change if it serves them in issue order. A stagger changes no arithmetic: every variant must be bit-identical to
its `plan` (`ids_st*` to `ids`).

Variants are timed in interleaved rounds (plan, st1, st2, plan, ...; --rounds), each round's time the median of
--reps calls; the row's time per variant is the median over rounds.

`plan` is the shipped plan (fp8_plan.STAGGER's level for the layout); st0-st3 force a level (st3: the warpgroups
meet before each tile's K loop, then issue together: the opposite of st1). Other variants force other Fp8Overrides
fields (VARIANTS): n192 is the split 128 x 192 tile (each wave promoted while the other runs; layouts without split
tiles fall back to the plan). Session 33 timed a joint form of it here (both waves in flight, one wait; the kernel
patch is research/results/2026-12-06-s33-joint-split.patch; its variant is bit-identical to n192, which is
bit-identical to the plan).

    python research/probes/ws_stagger_ab.py [--rows dense,psum,decode,wgrad,k_grouped] [--rounds 3] [--reps 10]
        [--levels st0,st1] [--ids st1]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "sweeps"))

import sweep_fp8_configs as dense_sweep  # noqa: E402  (puts the repository and benchmarks/ first on sys.path)
import sweep_moe_schedule as moe  # noqa: E402
import ws_uniform_ab  # noqa: E402

from deep_gemm.gemm.fp8_plan import Fp8Overrides  # noqa: E402

SPLIT_192 = dict(waves=2, wave_n=True, narrow=64)
VARIANTS = {"st0": dict(stagger=0), "st1": dict(stagger=1), "st2": dict(stagger=2), "st3": dict(stagger=3),
            "n192": SPLIT_192}
DENSE_ROWS = [(4096, 4096, 7168), (4096, 7168, 16384), (4096, 24576, 1536), (4096, 7168, 2048), (4096, 2112, 7168)]
DECODE_ROWS = [(32, 192, 6144, 7168), (6, 1024, 4096, 4096), (32, 20, 7168, 3072)]
WGRAD_ROWS = [(4096, 4096, 7168), (7168, 4096, 16384), (2112, 4096, 7168)]  # DeepGEMM's 1D1D rows


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="dense,psum,decode")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--levels", default=",".join(v for v in VARIANTS if v.startswith("st")),
                    help="variants (VARIANTS) to time next to the plan")
    ap.add_argument("--ids", default=None, help="variants also timed in the expert-id layout (as ids_<variant>; "
                    "default: those of --levels)")
    return ap.parse_args(argv)


def dense_row(levels, m, n, k, wgrad=False):
    """(name, flops, {variant: call}, check, valid) of one dense row, 1D2D or (wgrad) 1D1D with C = D in FP32;
    every variant writes its own D."""
    row = dense_sweep.Row("wgrad" if wgrad else "dense4096", m, n, k, wgrad)
    calls = {"plan": row.call("plan", None)}
    calls.update({v: row.call(v, Fp8Overrides(**VARIANTS[v])) for v in levels})
    return (f"{'wgrad' if wgrad else 'dense'} M={m} N={n} K={k}", 2 * m * n * k, calls,
            lambda v: row.check(v, calls[v]), row.out)


def k_grouped_rows(levels):
    """benchmarks/shapes.K_GROUPED through k_grouped_fp8_gemm_tn_contiguous (1D1D two-wave tiles), one D per row."""
    variants = {"plan": None, **{v: Fp8Overrides(**VARIANTS[v]) for v in levels}}
    out = []
    for shape in moe.shapes.K_GROUPED:
        name, flops, calls, check, valid = ws_uniform_ab._k_grouped_row(*shape, variants=variants)
        out.append((name, flops, calls, (lambda v, check=check, calls=calls: (calls[v](), check())[1]),
                    (lambda v, valid=valid: valid())))
    return out


def moe_rows(kinds, levels, ids):
    moe.VARIANTS.update({v: VARIANTS[v] for v in levels + ids})
    moe.IDS_VARIANTS[:] = ["plan", *ids]
    out = []
    if "psum" in kinds:
        out += list(moe.psum_rows(["plan", *levels]))
    if "decode" in kinds:
        moe.bench.MOE_MASKED[:] = DECODE_ROWS
        out += list(moe.masked_rows(["plan", *levels], True))
    # (sweep_moe_schedule's rows share one D per row: check and capture right after each variant's call)
    return [(name, flops, calls, (lambda v, check=check, calls=calls: (calls[v](), check())[1]),
             (lambda v, valid=valid: valid())) for name, flops, calls, check, valid in out]


def main(argv=None):
    args = parse(argv)
    import torch
    torch.manual_seed(0)
    kinds, levels = args.rows.split(","), args.levels.split(",")
    ids = levels if args.ids is None else [v for v in args.ids.split(",") if v]
    rows = ([dense_row(levels, *s) for s in DENSE_ROWS] if "dense" in kinds else []) + moe_rows(kinds, levels, ids)
    rows += [dense_row(levels, *s, wgrad=True) for s in WGRAD_ROWS] if "wgrad" in kinds else []
    rows += k_grouped_rows(levels) if "k_grouped" in kinds else []
    timer = moe.KernelTimer(reps=args.reps)
    errors = moe.first_calls(rows)
    ratios = {}
    for name, flops, calls, check, valid in rows:
        live = [v for v in calls if (name, v) not in errors]
        flags, outs = {}, {}
        for v in live:
            diff = check(v)
            outs[v] = valid(v).clone()
            base = outs.get("ids" if v.startswith("ids") else "plan")
            flags[v] = ("" if diff < moe.bench.CORRECTNESS_LIMIT else " WRONG") + (
                "" if base is None or torch.equal(outs[v], base) else " DIFF")
        rounds = {v: [] for v in live}
        for _ in range(args.rounds):
            for v in live:
                rounds[v].append(timer(calls[v]))
        us = {v: statistics.median(t) for v, t in rounds.items()}
        parts = []
        for v in live:
            ref = us.get("ids" if v.startswith("ids") else "plan")
            r = ref / us[v] if ref else float("nan")
            ratios.setdefault((name.split()[0], v), []).append(r)
            parts.append(f"{v} {us[v]:8.1f}{flags[v]} ({r:.3f}x, {flops / us[v] / 1e6:.0f} TF)")
        print(f"{name:34s} " + "  ".join(parts), flush=True)
    print("geomean base / variant (base: plan, or ids for ids_*):")
    for (kind, v), rs in sorted(ratios.items()):
        if v not in ("plan", "ids"):
            gm = math.exp(sum(map(math.log, rs)) / len(rs))
            print(f"  {kind:12s} {v:9s} {gm:.3f}x over {len(rs)} rows (min {min(rs):.3f}x, max {max(rs):.3f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
