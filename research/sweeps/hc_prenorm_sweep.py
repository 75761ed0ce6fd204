"""Sweep of tf32_hc_prenorm_gemm configs on the GPU (ours only): the heuristic's config against hand-picked
neighbours (sub-splits, stages, programs per SM) on the rows that decide the issue's targets, same timer as the
benchmark. Prints one line per (row, config) and writes JSON.

    PYTHONPATH=$PWD python research/sweeps/hc_prenorm_sweep.py --out $OUT/hc
    PYTHONPATH=$PWD python research/sweeps/hc_prenorm_sweep.py --ws --out $OUT/hc-ws   # the WS variant (~2 min)

``--ws``: the warp-specialised kernel (hyperconnection/kernels_ws.py) against the current plan and session 24's
best tl.* neighbour (st5) on the three M = 8192 unsplit rows, and the plan alone on one M = 4096 split row (a
control: it should time as in earlier sessions, 4096 x 28672 s=16).
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
        (1, 24, 7168, None), (64, 24, 28672, None)]


def variants(base, m, splits):
    """The heuristic's config and its neighbours. Session 24's first sweep: short K loops (a few K blocks per
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


# (4096 x 28672 unsplit, a DeepGEMM test row too, gets the plan and the two default WS configs only: it decides
# whether WS_AUTO_MIN_ROWS may be 4096.)
WS_ROWS = [(8192, 24, 28672, None), (8192, 24, 7680, None), (8192, 24, 7168, None), (4096, 24, 28672, 16),
           (4096, 24, 28672, None)]


def ws_variants(base, m, n, k, splits, num_sms):
    """The plan's config, st5 (the best tl.* neighbour of session 24's sweep) and the WS kernel's configs: one or
    two consumer warpgroups (BM 64 / 128), ring depths, 128 CTAs (M = 8192: BM = 64 then has no shared row
    blocks, BM = 128 exactly two CTAs per row block) against one per SM, and N = 24 as one 32-wide wgmma
    ("notail") against 16 + 8."""
    from deep_gemm.hyperconnection import hc_plan
    out = [("heuristic", base)]
    if splits > 1:
        return out
    short = m < 8192
    if not short:
        out.append(("st5", dataclasses.replace(base, stages=5)))
    for name, kw in (("ws-c2", {}), ("ws-c2-st4", dict(stages=4)), ("ws-c2-st6", dict(stages=6)),
                     ("ws-c1", dict(consumers=1)), ("ws-c1-st6", dict(consumers=1, stages=6)),
                     ("ws-c1-st8", dict(consumers=1, stages=8)), ("ws-c2-g128", dict(grid=128)),
                     ("ws-c1-g128", dict(consumers=1, grid=128)), ("ws-c2-notail", dict(tail=False)),
                     ("ws-c1-notail", dict(consumers=1, tail=False))):
        if short and name not in ("ws-c2", "ws-c1"):
            continue
        kw.setdefault("consumers", 2)
        cfg = hc_plan.ws_config(m, n, k, num_sms, **kw)
        out.append((f"{name}-st{cfg.stages}" if "st" not in name else name, cfg))
    return out


def main():
    from deep_gemm._ops.library import run_launcher
    from deep_gemm.hyperconnection import hc_triton
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="research/results")
    parser.add_argument("--tall-only", action="store_true", help="only the rows with M >= 4096")
    parser.add_argument("--ws", action="store_true", help="the warp-specialised variant on WS_ROWS")
    args = parser.parse_args()
    timer = KernelTimer(reps=10)
    results = []
    rows = WS_ROWS if args.ws else ROWS
    for m, n, k, num_splits in rows:
        if args.tall_only and m < 4096:
            continue
        a = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
        b = torch.randn(n, k, device="cuda")
        lead = () if num_splits is None else (num_splits,)
        d = torch.empty(*lead, m, n, device="cuda")
        s = torch.empty(*lead, m, device="cuda")
        base = hc_triton.config_of(m, n, k, num_splits or 1)
        nbytes = a.numel() * 2 + b.numel() * 4 + d.numel() * 4 + s.numel() * 4
        if args.ws:
            cands = ws_variants(base, m, n, k, num_splits or 1, hc_triton._num_sms())
        else:
            cands = variants(base, m, num_splits or 1)
        for name, cfg in cands:
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
            print(f"{m:5}x{k:5} s={num_splits or 0:2} {name:22} {us:7.1f} us {nbytes / us / 1e3:6.0f} GB/s",
                  flush=True)
            if cfg.kernel == "ws":
                # (a WS launch that fell back to the tl.* kernel would time the wrong kernel: say so)
                ran = hc_triton._execute_ws(a, b, d, s, cfg, None)
                print(f"      {name}: WS kernel ran: {ran}; "
                      f"{_check(a, b, d, s)}", flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "hc_prenorm_ws_sweep.json" if args.ws else "hc_prenorm_sweep.json"), "w") as f:
        json.dump(results, f, indent=1)
    # Per row: the heuristic against the fastest variant.
    for m, n, k, num_splits in rows:
        got = [r for r in results if (r["m"], r["k"], r["splits"]) == (m, k, num_splits or 0)]
        if got:
            best = min(got, key=lambda r: r["us"])
            heur = next((r["us"] for r in got if r["variant"] == "heuristic"), float("nan"))
            print(f"best {m:5}x{k:5} s={num_splits or 0:2} {best['variant']:22} {best['us']:7.1f} us "
                  f"(heuristic {heur:.1f} us)", flush=True)


def _check(a, b, d, s) -> str:
    """calc_diff of the last launch against the FP64 product of TF32-rounded B (the GPU tests' bar: 1e-11)."""
    from deep_gemm.hyperconnection.reference import round_to_tf32
    from deep_gemm.testing import calc_diff
    torch.cuda.synchronize()
    diff = calc_diff(d, a.double() @ round_to_tf32(b).double().T)
    return f"calc_diff {diff:.1e} {'ok' if diff < 1e-11 else 'WRONG'}"


if __name__ == "__main__":
    main()
