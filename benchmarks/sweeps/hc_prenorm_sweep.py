"""Sweep of the tf32_hc_prenorm_gemm plan on the GPU (this package only): the plan's config against hand-picked
neighbours (sub-splits, stages, row blocks, programs per SM) on DeepGEMM's HC rows and the decode rows, same timer as
benchmarks/bench_hc_prenorm.py. Prints one line per (row, config) and writes JSON. Run by scripts/gpu/hc.sh, or:

    PYTHONPATH=$PWD python benchmarks/sweeps/hc_prenorm_sweep.py --out $OUT/hc
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))

from harness import KernelTimer  # noqa: E402

ROWS = [(8192, 24, 28672, None), (8192, 24, 7680, None), (8192, 24, 7168, None), (4096, 24, 28672, 16),
        (13, 24, 7168, 16), (13, 24, 7680, 16), (13, 24, 28672, 16), (137, 24, 7168, 16), (137, 24, 7680, 16),
        (137, 24, 28672, 16), (137, 24, 28672, None), (13, 24, 28672, None), (13, 24, 7168, None),
        (1, 24, 7168, None), (64, 24, 28672, None), (137, 24, 7168, None), (137, 24, 7680, None),
        (13, 24, 7680, None), (64, 24, 7168, None)]


def variants(base, m, splits):
    """The heuristic's config and its neighbours. On the H200 (2026-12-02) short K loops (a few K blocks per
    program) ran fastest at 4-6 stages, not the 12 the shared-memory budget allows, so stages are swept on every
    row; warps on the small row blocks; sub-splits around the heuristic's; BM = 128 on the tall rows."""
    out, seen = [("heuristic", base)], {base}

    def add(name, **change):
        if change.get("sub", base.sub) > 1 and "red_chunk" not in change:
            bm, bn = change.get("block_m", base.block_m), base.block_n
            change["red_chunk"] = max(1, min(16, 8192 // (bm * bn)))
        if change.get("sub", base.sub) == 1:
            change["red_chunk"] = 1
        cfg = dataclasses.replace(base, **change)
        if cfg not in seen:
            seen.add(cfg)
            out.append((name, cfg))

    for stages in (3, 4, 5, 6, 8):
        add(f"st{stages}", stages=stages)
    if base.block_m <= 32:
        for warps in (1, 2):
            for stages in (4, 6):
                add(f"w{warps}-st{stages}", num_warps=warps, stages=stages)
    if m < 4096 and splits == 1:
        for sub in sorted({max(2, base.sub // 2), base.sub * 2, 16, 32}):
            for stages in (4, 6):
                add(f"sub{sub}-st{stages}", sub=sub, stages=stages)
    if m < 4096 and splits > 1:
        for sub in (2, 4):
            add(f"sub{sub}-st4", sub=sub, stages=4)
    if 32 < m < 4096:
        # Shorter row blocks at M = 137: 9 or 5 row blocks instead of 3, so more programs stream A
        # (the split rows there are ~5 us kernels of 7 K blocks per program, latency-bound).
        for bm in (16, 32):
            for stages in (3, 4, 6):
                add(f"bm{bm}-st{stages}", block_m=bm, stages=stages)
    if m >= 4096:
        # Taller row blocks: B (FP32, padded to BN rows) is re-read from L2 once per row block, as many bytes as
        # a 64-row A block at BN = 32, so BM = 128 halves the SM-side load traffic per byte of A.
        for sub in (1, 2):
            for stages, warps in ((3, 4), (4, 4), (6, 4), (4, 8)):
                add(f"bm128-w{warps}-sub{sub}-st{stages}", block_m=128, sub=sub, stages=stages, num_warps=warps)
        for sub in (1, 2):
            for stages in (4, 6, 8):
                add(f"sub{sub}-st{stages}", sub=sub, stages=stages)
        # Shorter row blocks: M = 8192 at BM = 32 is 256 programs (two per SM) without a device reduction.
        for stages in (4, 6, 8):
            add(f"bm32-sub1-st{stages}", block_m=32, sub=1, stages=stages)
    return out


def main():
    from deep_gemm.core.registry import run_launcher
    from deep_gemm.hyperconnection import launch as hc_launch
    from deep_gemm.hyperconnection.plan import HcOverrides
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="gpu_out")
    parser.add_argument("--tall-only", action="store_true", help="only the rows with M >= 4096")
    parser.add_argument("--short-only", action="store_true", help="only the rows with M < 4096")
    args = parser.parse_args()
    timer = KernelTimer(reps=10)
    results = []
    for m, n, k, num_splits in ROWS:
        if args.tall_only and m < 4096:
            continue
        if args.short_only and m >= 4096:
            continue
        a = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
        b = torch.randn(n, k, device="cuda")
        lead = () if num_splits is None else (num_splits,)
        d = torch.empty(*lead, m, n, device="cuda")
        s = torch.empty(*lead, m, device="cuda")
        base = hc_launch.config_of(m, n, k, num_splits or 1)
        nbytes = a.numel() * 2 + b.numel() * 4 + d.numel() * 4 + s.numel() * 4
        for name, cfg in variants(base, m, num_splits or 1):
            if cfg.sub > (k // 64) // (num_splits or 1):
                continue
            fn = lambda: run_launcher("tf32_hc_prenorm_gemm", a, b, d, s, num_splits,  # noqa: E731
                                      launcher_kwargs=dict(overrides=HcOverrides(config=cfg)))
            try:
                us = timer(fn)
            except Exception as e:  # noqa: BLE001 (a config that does not compile is reported, not fatal)
                print(f"{m}x{k} s={num_splits}: {name} FAILED {e!r}"[:300], flush=True)
                continue
            results.append(dict(m=m, n=n, k=k, splits=num_splits or 0, variant=name, config=dataclasses.asdict(cfg),
                                us=us, gbps=nbytes / us / 1e3))
            print(f"{m:5}x{k:5} s={num_splits or 0:2} {name:22} {us:7.1f} us {nbytes / us / 1e3:6.0f} GB/s",
                  flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "hc_prenorm_sweep.json"), "w") as f:
        json.dump(results, f, indent=1)
    # Per row: the heuristic against the fastest variant.
    for m, n, k, num_splits in ROWS:
        rows = [r for r in results if (r["m"], r["k"], r["splits"]) == (m, k, num_splits or 0)]
        if rows:
            best = min(rows, key=lambda r: r["us"])
            heur = next((r["us"] for r in rows if r["variant"] == "heuristic"), float("nan"))
            print(f"best {m:5}x{k:5} s={num_splits or 0:2} {best['variant']:22} {best['us']:7.1f} us "
                  f"(heuristic {heur:.1f} us)", flush=True)


if __name__ == "__main__":
    main()
