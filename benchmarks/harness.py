"""What every benchmark script shares: one kernel timer, the provider under test, and the results file.

A benchmark script imports whichever ``deep_gemm`` is first on ``sys.path`` and uses only the API both packages
share (DeepGEMM's names and arguments), so the SAME script times this package and DeepGEMM itself (built from source
next to it, ``PYTHONPATH=.dg/DeepGEMM``) in the same device call with the same timer:

    PYTHONPATH=$PWD            python benchmarks/bench_X.py --out $OUT/ours
    PYTHONPATH=$PWD/.dg/DeepGEMM python benchmarks/bench_X.py --out $OUT/dg
    python benchmarks/compare_providers.py $OUT/ours/bench_X.json $OUT/dg/bench_X.json

This module imports torch only (never ``deep_gemm``): it must work under either package.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import statistics

import torch

L2_FLUSH_BYTES = 256 * 1024 * 1024  # > 4x the H200's 60 MB L2
# The L2 flush is an in-place bitwise NOT of a 256 MB buffer: an op the timed calls do not use themselves (a zero_
# fill would be, e.g. torch.zeros inside a pipeline, and its kernels would then split a call into several "calls").
# FLUSH_KERNEL_TAG is a name fragment of that kernel; flush kernels mark the call boundaries and are not timed.
FLUSH_KERNEL_TAG = "bitwise_not"


def flush_l2(buffer: torch.Tensor) -> None:
    buffer.bitwise_not_()


def _flush_times(events) -> list:
    times = sorted(e.time_range.start for e in events if FLUSH_KERNEL_TAG in e.name)
    if not times:
        raise RuntimeError(f"no L2 flush kernel ('{FLUSH_KERNEL_TAG}' in its name) in the profile: the timer cannot "
                           "tell calls apart")
    return times


class KernelTimer:
    """Median GPU time (us) of the kernels one call launches, summed, with the L2 flushed before every call.

    The profiler's kernel times leave the host out: a call's time is what its kernels keep the GPU busy, which is
    what DeepGEMM's own ``bench_kineto`` reports too."""

    def __init__(self, reps: int = 20):
        self.reps = reps
        self.flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")

    def __call__(self, fn) -> float:
        fn()  # warm up (compiles on first call)
        torch.cuda.synchronize()
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(self.reps):
                flush_l2(self.flush)
                fn()
            torch.cuda.synchronize()
        events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        kernels = [e for e in events if FLUSH_KERNEL_TAG not in e.name and "Memset" not in e.name
                   and "Memcpy" not in e.name]
        # Group kernels into reps by the flush kernels that separate them.
        flush_times = _flush_times(events)
        buckets = [0.0] * len(flush_times)
        for e in kernels:
            idx = max(0, sum(1 for t in flush_times if t <= e.time_range.start) - 1)
            buckets[idx] += e.time_range.elapsed_us()
        per_rep = [b for b in buckets if b > 0]
        return statistics.median(per_rep) if per_rep else float("nan")


def provider() -> str:
    """'deep_gemm' (this package: it has ``backends()``) or 'DeepGEMM' (the CUDA original)."""
    import deep_gemm
    return "deep_gemm" if hasattr(deep_gemm, "backends") else "DeepGEMM"


def calc_diff(x: torch.Tensor, y: torch.Tensor) -> float:
    """DeepGEMM's accuracy measure as a float, 0 for two all-zero tensors. The benchmarks run under either package,
    and DeepGEMM's ``deep_gemm.testing.calc_diff`` returns a tensor (not JSON) and divides by zero there."""
    x, y = x.double(), y.double()
    denominator = (x * x + y * y).sum()
    return 0.0 if denominator == 0 else float(1 - 2 * (x * y).sum() / denominator)


def geomean(xs) -> float:
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def case_key(row: dict) -> str:
    """The identity of a result row across providers: its table and every field that is not a measurement."""
    return json.dumps({k: v for k, v in sorted(row.items()) if k not in MEASUREMENTS})


# Result fields that are measurements, not part of a case's identity.
MEASUREMENTS = frozenset(("us", "tflops", "gbps", "diff", "vs_torch", "torch_us", "note", "clean_us", "clean_gbps",
                          "call_us"))


def write_results(out_dir: str, name: str, results: list[dict], extra: dict | None = None) -> str:
    """Write ``{out_dir}/{name}.json``: the rows plus the date, GPU, versions and provider. Returns the path."""
    import deep_gemm
    meta = dict(date=datetime.date.today().isoformat(), gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                provider=provider(), deep_gemm_path=os.path.dirname(deep_gemm.__file__))
    try:
        import triton
        meta["triton"] = triton.__version__
    except ImportError:
        pass
    meta.update(extra or {})
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{name}.json")
    with open(path, "w") as f:
        json.dump(dict(meta=meta, results=results), f, indent=1)
    print(f"wrote {path} ({meta['provider']}, {meta['gpu']}, torch {meta['torch']})")
    return path


def kernel_times_by_name(fn, names, reps: int = 20, flush: torch.Tensor | None = None) -> dict:
    """Median GPU time (us) per call of the kernels of ``fn`` whose names contain each substring of ``names``
    (summed per call; 0.0 for a name no kernel matches), plus ``"total"`` (every kernel of the call). L2 flushed
    before each call. DeepGEMM's tests time one kernel by name the same way (``bench_kineto``)."""
    flush = flush if flush is not None else torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    fn()
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            flush_l2(flush)
            fn()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    flush_times = _flush_times(events)
    kernels = [e for e in events if FLUSH_KERNEL_TAG not in e.name and "Memset" not in e.name
               and "Memcpy" not in e.name]
    result = {}
    for name in (*names, "total"):
        buckets = [0.0] * len(flush_times)
        for e in kernels:
            if name == "total" or name in e.name:
                idx = max(0, sum(1 for t in flush_times if t <= e.time_range.start) - 1)
                buckets[idx] += e.time_range.elapsed_us()
        result[name] = statistics.median(buckets) if buckets else float("nan")
    return result
