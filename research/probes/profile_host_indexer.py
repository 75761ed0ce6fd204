"""Where the indexer ops' host time goes on the GPU host: host_overhead.py's indexer cases (prefill with its clean
pass, the paged schedule, a paged decode step), each timed in a tight loop without synchronisation (best of 5 rounds
of 500 calls, us per call), then a cProfile of 500 calls of each (top entries by own time). Session 26 found these
calls 5-12 us slower than in session 24 on the H200 host while the CPU host bench (GPU stubbed) showed no change.

    PYTHONPATH=$PWD python research/probes/profile_host_indexer.py
"""

import cProfile
import os
import pstats
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
from host_overhead import indexer_cases  # noqa: E402

cases = indexer_cases("cuda")
for name, fn in cases.items():
    for _ in range(100):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(500):
            fn()
        best = min(best, (time.perf_counter() - start) / 500 * 1e6)
    torch.cuda.synchronize()
    sync_start = time.perf_counter()
    for _ in range(200):
        fn()
        torch.cuda.synchronize()
    synced = (time.perf_counter() - sync_start) / 200 * 1e6
    print(f"{name:40s} {best:7.2f} us/call unsynchronised, {synced:7.2f} us/call with a sync each", flush=True)
for name, fn in cases.items():
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(500):
        fn()
    profiler.disable()
    torch.cuda.synchronize()
    print(f"==== {name}")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(12)
