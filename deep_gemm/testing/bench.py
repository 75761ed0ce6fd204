"""GPU timers for benchmarks: ``bench`` (CUDA events) and ``bench_kineto`` (kernel time from the profiler).

Both flush the L2 cache before every timed call by zeroing a scratch buffer several times larger than the L2, so
each call reads its operands from HBM as it would inside a model, not from a cache warmed by the previous call.
They need a CUDA device and raise ``RuntimeError`` saying so otherwise (tests never time anything; benchmarks do).
"""

from __future__ import annotations

import os
import time
from typing import Callable, Optional, Sequence, Tuple, Union

import torch

from .utils import empty_suppress, suppress_stdout_stderr

# Lower bound on the L2-flush buffer. DeepGEMM's event timer zeroes 256 MB: over 4x the L2 of an H100 (50 MiB) or
# H200 (60 MiB), which evicts every line a previous call left behind.
MIN_L2_FLUSH_BYTES = 256 * 1024 * 1024
# The flush buffer is at least this many times the device's L2 size (GPUs with larger L2s get a larger buffer).
# DeepGEMM's profiler timer zeroes 8 GB instead: that costs 8 GB of memory and ~2 ms per call for no extra
# eviction, so we size the buffer from the L2 rather than copying that constant.
L2_FLUSH_FACTOR = 4
# bench(high_precision=True) queues one fp32 matmul of this size (~1.1 TFLOP, milliseconds on a Hopper GPU) before
# the timed calls, so the host has queued them all before the GPU reaches them: launch gaps drop out of the timing.
LAUNCH_SHIELD_DIM = 8192
# bench_kineto(barrier=...) sleeps this long before each barrier so every rank's flush has finished.
BARRIER_SLEEP_S = 0.01
# Set to a non-zero value when an external tool (nsys, ncu, compute-sanitizer) owns the GPU timeline: bench_kineto
# then skips the profiler and reports 1 second for every kernel name, as DeepGEMM does.
NVIDIA_TOOLS_ENV = "DG_USE_NVIDIA_TOOLS"


def _require_cuda(what: str) -> None:
    if not torch.cuda.is_available():
        raise RuntimeError(f"{what}: needs a CUDA device (torch.cuda.is_available() is False); the timers use CUDA "
                           f"events and the CUDA profiler, so there is nothing to time on this machine")


def _require_positive(name: str, value: int) -> None:
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}: expected a positive integer, got {value!r}")


def l2_flush_bytes(device: Optional[torch.device] = None) -> int:
    """Size of the buffer zeroed to flush the L2 of ``device`` (current device by default)."""
    props = torch.cuda.get_device_properties(device if device is not None else torch.cuda.current_device())
    l2_bytes = getattr(props, "L2_cache_size", 0)
    return max(MIN_L2_FLUSH_BYTES, L2_FLUSH_FACTOR * l2_bytes)


class _L2Flush:
    """Zeroing a buffer larger than the L2 evicts whatever a previous call left there."""

    def __init__(self) -> None:
        self.buffer = torch.empty(l2_flush_bytes() // 4, dtype=torch.int32, device="cuda")

    def __call__(self) -> None:
        self.buffer.zero_()


def bench(fn: Callable[[], object], num_warmups: int = 5, num_tests: int = 10, high_precision: bool = False) -> float:
    """Mean GPU time of ``fn()`` in seconds, measured with CUDA events around each call.

    ``fn`` is called ``num_warmups`` times untimed (compilation, autotuning, caches), then ``num_tests`` times, each
    after an L2 flush that is outside the timed window. With ``high_precision`` a large matmul is queued first, so
    host launch overhead between the timed calls is hidden. Needs CUDA (``RuntimeError`` otherwise).

    >>> seconds = bench(lambda: deep_gemm.fp8_gemm_nt(a, b, d))
    """
    _require_cuda("bench")
    _require_positive("num_tests", num_tests)
    flush = _L2Flush()
    for _ in range(num_warmups):
        fn()
    if high_precision:
        x = torch.randn(LAUNCH_SHIELD_DIM, LAUNCH_SHIELD_DIM, device="cuda")
        x @ x
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(num_tests)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(num_tests)]
    for start, end in zip(starts, ends):
        flush()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    milliseconds = sum(start.elapsed_time(end) for start, end in zip(starts, ends))
    return milliseconds / num_tests / 1e3


def _kernel_times(events, names: Sequence[str], with_multiple_kernels: bool) -> list[float]:
    """Mean duration in seconds of the device events whose name contains each substring (0 when none match)."""
    kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
    result = []
    for name in names:
        matched = [e for e in kernels if name in e.name]
        distinct = sorted({e.name for e in matched})
        if len(distinct) > 1 and not with_multiple_kernels:
            raise AssertionError(f"bench_kineto: kernel name substring {name!r} matches {len(distinct)} different "
                                 f"kernels {distinct}; use a more specific substring or with_multiple_kernels=True")
        total_us = sum(e.time_range.elapsed_us() for e in matched)
        result.append(total_us / len(matched) / 1e6 if matched else 0.0)
    return result


def bench_kineto(fn: Callable[[], object], kernel_names: Union[str, Tuple[str, ...]], num_tests: int = 30,
                 suppress_kineto_output: bool = False, trace_path: Optional[str] = None, flush_l2: bool = True,
                 with_multiple_kernels: bool = False,
                 barrier: Optional[Callable[[], object]] = None) -> Union[float, Tuple[float, ...]]:
    """GPU time in seconds of the kernels ``fn`` launches, read from the PyTorch (kineto) profiler.

    ``fn`` is called once unprofiled (compilation, autotuning and their prints), then ``2 * num_tests`` times under
    the profiler: one round as profiler warmup, one recorded. With ``flush_l2`` (default) the L2 is flushed before
    every call (a buffer of ``max(256 MiB, 4 x L2)`` is zeroed; DeepGEMM zeroes 8 GB). With ``barrier`` each call is
    preceded by a short sleep and ``barrier()`` (keeps ranks in step in multi-GPU benchmarks).

    For each substring of ``kernel_names`` the result is the mean duration per launch of the profiled kernels whose
    name contains it (0.0 when none does): a float for a str, a tuple of floats for a tuple. A substring matching
    several different kernel names raises ``AssertionError`` unless ``with_multiple_kernels``. Mind that the L2 flush
    itself is a fill kernel: do not pick substrings it matches. ``trace_path`` exports a Chrome trace;
    ``suppress_kineto_output`` silences the profiler's prints. With ``DG_USE_NVIDIA_TOOLS`` set, returns 1.0 per name
    without profiling. Needs CUDA (``RuntimeError`` otherwise).

    >>> t = bench_kineto(lambda: deep_gemm.fp8_gemm_nt(a, b, d), "fp8_gemm")
    >>> t_gemm, t_cast = bench_kineto(step, ("gemm", "cast"))
    """
    is_tuple = not isinstance(kernel_names, str)
    names = tuple(kernel_names) if is_tuple else (kernel_names,)
    if os.environ.get(NVIDIA_TOOLS_ENV, "0") not in ("", "0"):
        return tuple(1.0 for _ in names) if is_tuple else 1.0
    _require_cuda("bench_kineto")
    _require_positive("num_tests", num_tests)

    fn()
    flush = _L2Flush() if flush_l2 else None
    suppress = suppress_stdout_stderr if suppress_kineto_output else empty_suppress
    with suppress():
        schedule = torch.profiler.schedule(wait=0, warmup=1, active=1, repeat=1)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA], schedule=schedule) as prof:
            for _ in range(2):
                for _ in range(num_tests):
                    if flush is not None:
                        flush()
                    if barrier is not None:
                        time.sleep(BARRIER_SLEEP_S)
                        barrier()
                    fn()
                torch.cuda.synchronize()
                prof.step()
    if trace_path is not None:
        prof.export_chrome_trace(trace_path)
    times = _kernel_times(prof.events(), names, with_multiple_kernels)
    return tuple(times) if is_tuple else times[0]
