"""In-process A/B of the bmk batch split's reductions at DeepGEMM's 6 rows of ``einsum('bmk,bnk->mn')`` (FP32 D,
c=d): the one-launch "grid" reduction against the two-launch "parallel" one (and any other ``--reduce``), at the
planned split. Per variant and row: the kernels' GPU time (profiler, L2 flushed before each call, median of 20;
DeepGEMM's bench_kineto measure), the time with the gaps between kernels (20 flushed calls queued back to back,
minus the 20 flushes alone), the kernel count per call, and whether the bits equal the first variant's.
Variants alternate over ``--rounds`` rounds; the median of the rounds is printed.

    PYTHONPATH=$PWD python research/probes/einsum_bmk_grid_ab.py [--reduce grid parallel] [--rounds 3]
"""
import argparse
import os
import statistics
import sys

import torch

sys.path.append(os.path.join(os.path.dirname(__file__), "..", ".."))
from benchmarks.bench_einsum import BMK_SHAPES  # noqa: E402
from benchmarks.harness import L2_FLUSH_BYTES, kernel_times_by_name  # noqa: E402

from deep_gemm._ops.library import run_launcher  # noqa: E402
from deep_gemm.einsum import einsum_triton as et  # noqa: E402

REPS = 20


def stream_us(fn, flush) -> float:
    """GPU time per call with the gaps between its kernels: REPS (flush, call) pairs queued back to back, minus REPS
    flushes alone, timed by events (each 256 MB flush lets the host queue the next call ahead: no host gaps)."""
    def timed(body) -> float:
        body()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(REPS):
            body()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) * 1e3 / REPS

    def both():
        flush.zero_()
        fn()
    return timed(both) - timed(flush.zero_)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reduce", nargs="+", default=["grid", "parallel"])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    ratios = []
    for s, m, n, k in BMK_SHAPES:
        a = torch.randn((s, m, k), dtype=torch.bfloat16, device="cuda")
        b = torch.randn((s, n, k), dtype=torch.bfloat16, device="cuda")
        auto = et.bmk_plan(s, m, n, k)
        plans = {r: et.BmkPlan(auto.tile, auto.splits, r) for r in args.reduce}
        d = {r: torch.zeros((m, n), device="cuda") for r in args.reduce}
        kernel, gaps, counts = ({r: [] for r in args.reduce} for _ in range(3))
        for _ in range(args.rounds):
            for r, plan in plans.items():
                def call(plan=plan, out=d[r]):
                    run_launcher("einsum", "bmk,bnk->mn", a, b, out, out, launcher_kwargs=dict(config=plan))
                times = kernel_times_by_name(call, ["gemm", "reduce"], reps=REPS, flush=flush)
                kernel[r].append(times["total"])
                counts[r] = "1 kernel" if times["reduce"] == 0 else "2 kernels"
                gaps[r].append(stream_us(call, flush))
        # Bits: one call each from zeros.
        bits = {}
        for r, plan in plans.items():
            out = torch.zeros((m, n), device="cuda")
            run_launcher("einsum", "bmk,bnk->mn", a, b, out, out, launcher_kwargs=dict(config=plan))
            bits[r] = out
        first = args.reduce[0]
        line = [f"s={s:5d} m={m} n={n} k={k} {auto.tile} splits={auto.splits} (plan {auto.reduce}):"]
        for r in args.reduce:
            same = "same bits" if torch.equal(bits[r], bits[first]) else "BITS DIFFER"
            line.append(f"{r} {statistics.median(kernel[r]):6.1f} us (with gaps {statistics.median(gaps[r]):6.1f}, "
                        f"{counts[r]}, {same})")
        if len(args.reduce) > 1:
            ratio = statistics.median(kernel[args.reduce[1]]) / statistics.median(kernel[first])
            ratios.append(ratio)
            line.append(f"{args.reduce[1]}/{first} {ratio:.3f}")
        print(" | ".join(line), flush=True)
    if ratios:
        print(f"geomean {args.reduce[1]}/{args.reduce[0]}: {statistics.geometric_mean(ratios):.3f}", flush=True)


if __name__ == "__main__":
    main()
