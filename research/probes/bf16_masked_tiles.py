"""Which tl.* tile should `m_grouped_bf16_gemm_nt_masked` get per row? Forced configs (Bf16Overrides(config=...,
ws=False)) on bench_bf16_gemm's MASKED rows with expected_m 20 and 192 (the same operands: masked_m = expected x
0.7-1.3, seed 0, max_m 4096), the shipped plan beside them, one process, one timer (harness.KernelTimer: kernels
only, L2 flushed). Every variant is checked against the fp32 reference (calc_diff < 1e-5) and must leave the rows
past masked_m untouched (D starts as a NaN sentinel there).

Why: session 28's call 1 (research/results/2026-12-03-h200-s28-call1/compare.md) measured G=6 expected_m=20 at
0.84x / 0.86x DeepGEMM (N x K 6144 x 7168, 7168 x 3072) on the plan's 64 x 256 tile: 6 groups x 24 tile columns =
144 tiles for 132 SMs, so 12 SMs stream a second tile while the rest idle; these rows only stream B (528 MB at
6144 x 7168: DeepGEMM's 137 us is 3.85 TB/s), so the tile count's fit to the SMs sets the time.

    python research/probes/bf16_masked_tiles.py [--expected 20,192] [--reps 10]     (H200: ~1-2 min)
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path[:0] = [ROOT, os.path.join(ROOT, "benchmarks")]

import torch  # noqa: E402

from bench_bf16_gemm import GROUPED_NK, MASKED, MASKED_MAX_M, masked_inputs, ref_nt  # noqa: E402
from harness import KernelTimer, calc_diff, geomean  # noqa: E402

BF16 = torch.bfloat16


def variants(call):
    """(name, Bf16Overrides): the plan, then tl.* tiles (bm, bn, warps, bk) at the plan's own stage count for
    that tile (bf16_plan._config) and, for the narrow decode tiles, a 6-stage ring."""
    from dataclasses import replace

    from deep_gemm.gemm import bf16_plan
    from deep_gemm.gemm.bf16_plan import Bf16Overrides as O
    out = [("plan", O())]
    tiles = [(32, 32, 4, 128), (32, 64, 4, 128), (32, 128, 4, 128), (64, 64, 4, 64), (64, 128, 4, 64),
             (64, 256, 4, 64), (128, 128, 8, 64), (64, 128, 4, 128)]
    for bm, bn, warps, bk in tiles:
        cfg = bf16_plan._config(call, bm, bn, warps, bk, 1, False)
        if cfg is None:
            continue
        out.append((f"{bm}x{bn}x{bk}s{cfg.num_stages}w{warps}", O(config=cfg, ws=False)))
        if bm < 64 and cfg.num_stages > 6:
            out.append((f"{bm}x{bn}x{bk}s6w{warps}", O(config=replace(cfg, num_stages=6), ws=False)))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--expected", default="20,192")
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    from deep_gemm._ops.library import run_launcher
    from deep_gemm.gemm import bf16_plan, bf16_triton
    timer = KernelTimer(args.reps)
    wanted = {int(x) for x in args.expected.split(",")}
    ratios = {}
    for g, expected in MASKED:
        if expected not in wanted:
            continue
        for n, k in GROUPED_NK:
            masked, masked_m, a, b = masked_inputs(g, expected, n, k)
            refs = [ref_nt(a[i, :m], b[i]) for i, m in enumerate(masked)]
            probe = torch.empty(g, MASKED_MAX_M, n, device="cuda", dtype=BF16)
            call = bf16_triton._call(bf16_plan.GROUPING["masked"], MASKED_MAX_M, n, k, g, probe, None, True, True,
                                     False, expected_m=expected)
            chosen = bf16_plan.plan(call).config
            times = {}
            for name, over in variants(call):
                d = torch.full((g, MASKED_MAX_M, n), float("nan"), device="cuda", dtype=BF16)
                kw = dict(overrides=over)

                def run(d=d, kw=kw):
                    run_launcher("m_grouped_bf16_gemm_nt_masked", a, b, d, masked_m, expected, "nk",
                                 launcher_kwargs=kw)
                try:
                    run()
                except Exception as exc:  # noqa: BLE001  (a config that fails to compile is reported, not fatal)
                    print(f" ~ G={g} m={expected} N={n} K={k} {name}: {type(exc).__name__}: {str(exc)[:160]}")
                    continue
                diff = max(calc_diff(d[i, :m], refs[i]) for i, m in enumerate(masked) if m)
                untouched = all(bool(torch.isnan(d[i, m:]).all()) for i, m in enumerate(masked))
                if not diff < 1e-5 or not untouched:
                    print(f" ! G={g} m={expected} N={n} K={k} {name}: WRONG diff {diff:.2e} untouched {untouched}")
                    continue
                times[name] = timer(run)
            base = times.get("plan")
            line = " ".join(f"{name} {us:7.1f}" for name, us in times.items())
            print(f"G={g} m={expected} N={n} K={k} (plan {chosen.block_m}x{chosen.block_n}): {line}", flush=True)
            if base:
                best = min(times, key=times.get)
                print(f"   best {best} {times[best]:.1f} us: plan / best {base / times[best]:.3f}x", flush=True)
                for name, us in times.items():
                    ratios.setdefault(name, []).append(base / us)
    print("geomean plan / variant:")
    for name, rs in ratios.items():
        print(f"  {name:22s} {geomean(rs):.3f}x over {len(rs)} rows (min {min(rs):.3f}x)")


if __name__ == "__main__":
    main()
