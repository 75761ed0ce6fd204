"""In-process A/B of the parallel reduction kernels of ``einsum('bmk,bnk->mn')`` at DeepGEMM's 6 rows (FP32 D, c=d),
at the planned split: the session-24 kernel (``BmkPlan.legacy_reduce``: eight ranges' 4-byte loads at a time, C
loaded after the sum) against the new default (every range's 8-byte load and C's issued before the first add), and
the new kernel with other rows per program / loads in flight. Per variant and row: the GEMM kernel's and the
reduction kernel's GPU time (profiler, L2 flushed before each call, median of 20; DeepGEMM's bench_kineto measure),
and whether the bits equal the legacy kernel's. Variants alternate over ``--rounds`` rounds; the median of the
rounds is printed, with DeepGEMM's time per row from session 29 call 4 (research/results/2026-12-03-h200-s29-call4/
einsum_breakdown_dg.log: one kernel, FP32 atomics) and the ratio DeepGEMM / ours.

    PYTHONPATH=$PWD python research/probes/einsum_bmk_reduce_ab.py [--rounds 2]
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
# DeepGEMM's kernel time (us) per row of BMK_SHAPES, H200, session 29 call 4.
DEEPGEMM_US = {(129, 128, 384, 128): 11.9, (129, 256, 256, 256): 17.3, (129, 384, 128, 384): 22.4,
               (4096, 128, 384, 128): 139.3, (4096, 256, 256, 256): 259.8, (4096, 384, 128, 384): 389.8}


# The split a reduction model refitted to the new kernel would pick instead of the planned one (einsum_triton.py,
# BMK_REDUCE_LAUNCH_US): 26 -> 33 ranges at s = 129, m = 128 (the only row it moves).
ALTERNATIVE_SPLITS = {26: 33}


def variants(auto: et.BmkPlan) -> dict:
    out = {"legacy": et.BmkPlan(auto.tile, auto.splits, legacy_reduce=True),
           "new": et.BmkPlan(auto.tile, auto.splits),
           "new rm=1": et.BmkPlan(auto.tile, auto.splits, reduce_rows=1),
           "new rm=4": et.BmkPlan(auto.tile, auto.splits, reduce_rows=4)}
    if auto.splits > 32:
        out["new loads=32"] = et.BmkPlan(auto.tile, auto.splits, reduce_loads=32)  # (two rounds of loads)
    if auto.splits in ALTERNATIVE_SPLITS:
        x = ALTERNATIVE_SPLITS[auto.splits]
        out[f"new splits={x}"] = et.BmkPlan(auto.tile, x)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(0)
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    ratios = {}
    for s, m, n, k in BMK_SHAPES:
        a = torch.randn((s, m, k), dtype=torch.bfloat16, device="cuda")
        b = torch.randn((s, n, k), dtype=torch.bfloat16, device="cuda")
        auto = et.bmk_plan(s, m, n, k)
        plans = variants(auto)
        d = {r: torch.zeros((m, n), device="cuda") for r in plans}
        times = {r: {"gemm": [], "reduce": [], "total": []} for r in plans}
        for _ in range(args.rounds):
            for r, plan in plans.items():
                def call(plan=plan, out=d[r]):
                    run_launcher("einsum", "bmk,bnk->mn", a, b, out, out, launcher_kwargs=dict(config=plan))
                got = kernel_times_by_name(call, ["gemm", "reduce"], reps=REPS, flush=flush)
                for key in times[r]:
                    times[r][key].append(got[key])
        bits = {}
        d0 = torch.randn((m, n), device="cuda")
        for r, plan in plans.items():  # one call each from the same D (= C)
            out = d0.clone()
            run_launcher("einsum", "bmk,bnk->mn", a, b, out, out, launcher_kwargs=dict(config=plan))
            bits[r] = out
        torch.cuda.synchronize()
        dg = DEEPGEMM_US[s, m, n, k]
        print(f"s={s:5d} m={m} n={n} k={k} {auto} (DeepGEMM {dg:.1f} us):", flush=True)
        for r in plans:
            med = {key: statistics.median(v) for key, v in times[r].items()}
            same = ("other split" if plans[r].splits != auto.splits
                    else "same bits" if torch.equal(bits[r], bits["legacy"]) else "BITS DIFFER")
            ratios.setdefault(r, []).append(dg / med["total"])
            print(f"  {r:13s} gemm {med['gemm']:6.1f} | reduce {med['reduce']:5.2f} | total {med['total']:6.1f} us | "
                  f"DeepGEMM/ours {dg / med['total']:.3f} | {same}", flush=True)
    for r, x in ratios.items():
        print(f"{r:13s} DeepGEMM/ours: min {min(x):.3f}, geomean {statistics.geometric_mean(x):.3f}", flush=True)


if __name__ == "__main__":
    main()
