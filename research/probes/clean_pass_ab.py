"""A/B of the prefill clean pass (the -inf fill outside each query's window, attention.triton_launch.clean_rows) in
one process: whole blocks in 16-byte vector stores (the default since session 30) against per-element stores, and
the block / warp sizes around the default, on bench_mqa_logits' prefill rows (FP32 logits, their windows). Each
config's output is compared bitwise with the first config's; times are the clean kernel's alone (L2 flushed).

Session 30 (issue 17, target: clean pass >= 2 TB/s on every row; the cp row 8192 x 65536 measured 1961 GB/s).

    PYTHONPATH=$PWD python research/probes/clean_pass_ab.py [--reps 20] [--rounds 3]
"""

import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))

from bench_mqa_logits import PREFILL_QUICK, prefill_inputs  # noqa: E402
from deep_gemm.attention import triton_launch  # noqa: E402
from harness import kernel_times_by_name  # noqa: E402

# name: (CLEAN_BLOCK, CLEAN_WARPS, vector_stores)
CONFIGS = {"default (vector, 1024, 4 warps)": (1024, 4, True), "per element (session 29)": (1024, 4, False),
           "vector, 2048, 4 warps": (2048, 4, True), "vector, 2048, 8 warps": (2048, 8, True),
           "vector, 4096, 8 warps": (4096, 8, True)}


def run(out, ks, ke, cols, cfg):
    block, warps, vector = cfg
    triton_launch.CLEAN_BLOCK, triton_launch.CLEAN_WARPS = block, warps
    triton_launch.clean_rows(out, ks, ke, cols, vector_stores=vector)


def fill_us(out, reps):
    """Median time of torch's fill_ over the whole output, CUDA events (the profiler timer would drop it: the L2 flush
    is a fill too, and its kernels are excluded by name); 2 GB dwarfs the L2, so no flush is needed."""
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out.fill_(float("-inf"))
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def ab_row(s, sk, h, d, windows, reps, rounds):
    _, _, _, ks, ke = prefill_inputs(s, sk, h, d, windows)
    out = torch.empty(s, sk, device="cuda")
    col = torch.arange(sk, device="cuda")[None, :]
    outside_bytes = int(((col < ks[:, None].long()) | (col >= ke[:, None].long())).sum()) * out.element_size()
    del col
    want = None
    same = {}
    for name, cfg in CONFIGS.items():
        out.fill_(1.0)
        run(out, ks, ke, sk, cfg)
        got = out.view(torch.int32).clone()
        if want is None:
            want = got
        same[name] = torch.equal(got, want)
    del want, got
    times = {name: [] for name in CONFIGS}
    for _ in range(rounds):
        for name, cfg in CONFIGS.items():
            t = kernel_times_by_name(lambda cfg=cfg: run(out, ks, ke, sk, cfg), ("clean_logits",), reps=reps)
            times[name].append(t["clean_logits"])
    fill = fill_us(out, reps)
    print(f"S={s} SK={sk} windows={windows}: {outside_bytes / 1e6:.0f} MB outside the windows; torch fill_ of the "
          f"whole output (the write ceiling): {fill:.2f} us, {out.numel() * 4 / fill / 1e3:.0f} GB/s", flush=True)
    for name, ts in times.items():
        us = statistics.median(ts)
        print(f"  {name:34s} {us:8.2f} us {outside_bytes / us / 1e3:7.0f} GB/s | bitwise "
              f"{'SAME' if same[name] else 'DIFFERENT'} | runs {[round(t, 2) for t in ts]}", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    for row in PREFILL_QUICK:
        ab_row(*row, reps=args.reps, rounds=args.rounds)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
