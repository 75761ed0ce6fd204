"""Sweep of tf32_hc_prenorm_gemm configs on the GPU (ours only): the heuristic's config against hand-picked
neighbours (sub-splits, stages, programs per SM) on the rows that decide the issue's targets, same timer as the
benchmark. Prints one line per (row, config) and writes JSON.

    PYTHONPATH=$PWD python research/sweeps/hc_prenorm_sweep.py --out $OUT/hc
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

ROWS = [(8192, 24, 28672, None), (8192, 24, 7168, None), (4096, 24, 7168, None), (137, 24, 7168, 16), (4096, 24, 28672, 16), (137, 24, 28672, None),
        (13, 24, 28672, None), (13, 24, 7168, 16), (1, 24, 7168, None)]


def variants(base, m, splits):
    out = [("heuristic", base)]
    for sub in sorted({1, 2, 4, base.sub, max(1, base.sub // 2), base.sub * 2}):
        for stages in (6, 12):
            if (sub, stages) == (base.sub, base.stages):
                continue
            if base.block_m * 64 * 2 * stages + base.block_n * 64 * 4 * stages > 220 * 1024:
                continue
            red = base.red_chunk if base.sub > 1 else max(1, min(16, 16384 // (base.block_m * base.block_n)))
            out.append((f"sub{sub}-st{stages}", dataclasses.replace(base, sub=sub, stages=stages,
                                                                    red_chunk=red if sub > 1 else 1)))
    if m >= 4096:
        # Taller row blocks: B (FP32, padded to BN rows) is re-read from L2 once per row block, as many bytes as
        # a 64-row A block at BN = 32, so BM = 128 halves the SM-side load traffic per byte of A.
        for sub in (1, 2, 4):
            for stages, warps in ((4, 8), (8, 8), (4, 4)):
                red = max(1, min(16, 8192 // (128 * base.block_n)))
                out.append((f"bm128-w{warps}-sub{sub}-st{stages}",
                            dataclasses.replace(base, block_m=128, sub=sub, stages=stages, num_warps=warps,
                                                red_chunk=red if sub > 1 else 1)))
    if m < 4096 and splits > 1:
        # Latency-bound rows (a few K blocks per program): does a shallower pipeline start the MMAs sooner?
        for stages in (2, 3, 4):
            out.append((f"st{stages}", dataclasses.replace(base, stages=stages)))
    return out


def main():
    from deep_gemm._ops.library import run_launcher
    from deep_gemm.hyperconnection import hc_triton
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="research/results")
    args = parser.parse_args()
    timer = KernelTimer(reps=10)
    results = []
    for m, n, k, num_splits in ROWS:
        a = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
        b = torch.randn(n, k, device="cuda")
        lead = () if num_splits is None else (num_splits,)
        d = torch.empty(*lead, m, n, device="cuda")
        s = torch.empty(*lead, m, device="cuda")
        base = hc_triton.config_of(m, n, k, num_splits or 1)
        nbytes = a.numel() * 2 + b.numel() * 4 + d.numel() * 4 + s.numel() * 4
        for name, cfg in variants(base, m, num_splits or 1):
            if cfg.sub > (k // 64) // (num_splits or 1):
                continue
            fn = lambda: run_launcher("tf32_hc_prenorm_gemm", a, b, d, s, num_splits,  # noqa: E731
                                      launcher_kwargs=dict(config=cfg))
            try:
                us = timer(fn)
            except Exception as e:  # noqa: BLE001 (a config that does not compile is reported, not fatal)
                print(f"{m}x{k} s={num_splits}: {name} FAILED {e!r}"[:300], flush=True)
                continue
            results.append(dict(m=m, n=n, k=k, splits=num_splits or 0, variant=name, config=dataclasses.asdict(cfg),
                                us=us, gbps=nbytes / us / 1e3))
            print(f"{m:5}x{k:5} s={num_splits or 0:2} {name:14} {us:7.1f} us {nbytes / us / 1e3:6.0f} GB/s",
                  flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "hc_prenorm_sweep.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
