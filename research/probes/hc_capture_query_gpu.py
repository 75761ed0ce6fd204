"""GPU host: what the replay's capture query costs, and what skipping it on the default stream saves HC's call.

    PYTHONPATH=$PWD python research/probes/hc_capture_query_gpu.py [--calls N] [--rounds R]

Times (best round, us per call, tight loop without synchronisation as in benchmarks/host_overhead.py): the CUDA-only
queries of a replay by themselves, then host_overhead.py's HC call (M 16, N 24, K 1024: its plan keeps the sub-split
workspace, so a replay on a stream other than the default asks whether that stream captures) on the default stream
(no query since the legacy-default-stream rule) and on a side stream (one query per call), and bf16_gemm_nt (a plan
without kept buffers: no query on either stream) as the control. The HC side-minus-default difference, less the
control's, is the query's share of the call.
"""

from __future__ import annotations

import argparse
import time

import torch


def best_us(fn, calls: int, rounds: int) -> float:
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return best


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    import deep_gemm

    rows = {
        "torch._C._cuda_isCurrentStreamCapturing()": torch._C._cuda_isCurrentStreamCapturing,
        "torch._C._cuda_getCurrentRawStream(0)": lambda: torch._C._cuda_getCurrentRawStream(0),
        "torch._C._cuda_getDevice()": torch._C._cuda_getDevice,
    }
    for label, fn in rows.items():
        print(f"{label:48s} {best_us(fn, args.calls * 10, args.rounds):7.3f} us/call", flush=True)
    m, dev = 16, "cuda"
    hx, hw = torch.randn(m, 1024, device=dev, dtype=torch.bfloat16), torch.randn(24, 1024, device=dev)
    hd, hs = torch.empty(m, 24, device=dev), torch.empty(m, device=dev)
    x, w = torch.randn(m, 512, device=dev, dtype=torch.bfloat16), torch.randn(256, 512, device=dev,
                                                                               dtype=torch.bfloat16)
    d = torch.empty(m, 256, device=dev, dtype=torch.bfloat16)
    calls = {"tf32_hc_prenorm_gemm": lambda: deep_gemm.tf32_hc_prenorm_gemm(hx, hw, hd, hs),
             "bf16_gemm_nt (control)": lambda: deep_gemm.bf16_gemm_nt(x, w, d)}
    side = torch.cuda.Stream()
    for label, fn in calls.items():
        default_us = best_us(fn, args.calls, args.rounds)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            side_us = best_us(fn, args.calls, args.rounds)
        torch.cuda.current_stream().wait_stream(side)
        print(f"{label:48s} default stream {default_us:6.2f}  side stream {side_us:6.2f} us/call", flush=True)


if __name__ == "__main__":
    main()
