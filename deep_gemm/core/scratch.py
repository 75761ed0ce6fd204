"""What launches of every kernel family share about streams and per-call memory: the current stream, whether it
is capturing a CUDA graph, and the split-K workspace and arrival counters.

Split-K kernels write FP32 partials to a per-call workspace; the last split to arrive at a tile's counter (an int32
``atomic_add``) reduces them and resets the counter to zero (or, where every split waits for all the others and
then reduces a slice, the last to leave it: ``einsum/kernels._wait_for_ranges``), so counters are zero between uses
and are kept. They
belong to a (device, stream): launches queued on one stream run in order, but two streams' launches may run at the
same time, and a counter both used would let one launch's splits count as the other's (measured on the H200: wrong
tiles in 6-16 of 24 rounds of tests/test_fp8_gemm_gpu.py::test_split_k_calls_on_concurrent_streams with one buffer).
A launch captured into a CUDA graph gets counters of its own, allocated from the graph's memory pool: the
allocation's zero fill is captured with it, so each replay starts from zeros, and graphs captured on one stream
(torch.cuda.graph's default capture stream is shared) may be replayed at the same time on different streams, which
that stream's shared counters would not survive (28 % wrong calls in a probe).
"""

from __future__ import annotations

import threading

import torch

from .._internals import torch_api

# Smallest counter buffer kept per (device, stream): one per tile of most problems, so it is rarely regrown.
MIN_COUNTERS = 4096

_COUNTERS: dict = {}
_COUNTERS_LOCK = threading.Lock()


# The raw handle of torch's default stream on every device (``torch.cuda.default_stream().cuda_stream``): the legacy
# default stream to the C launchers, which launch on handle 0 without per-thread semantics. No graph capture can
# include it: CUDA refuses to begin a capture on the legacy stream, torch.cuda.graph refuses the default stream, and a
# launch on it while another stream captures runs eagerly (non-blocking capture streams, torch's) or fails, never
# joins the capture. So the capture test, a CUDA runtime query on every replay of a plan that keeps buffers, is
# answered without asking for launches on it: the eager default-stream call, the common one.
LEGACY_DEFAULT_STREAM = 0


def stream_of(t: torch.Tensor):
    """The raw current stream of t's device (what a launch for t runs on), None for CPU tensors."""
    return torch_api.current_raw_stream(t.get_device()) if t.is_cuda else None


def stream_capturing(stream) -> bool:
    """Whether a launch on raw stream ``stream`` (``stream_of``'s value) would be captured into a CUDA graph: never
    for None (CPU) and the legacy default stream (see ``LEGACY_DEFAULT_STREAM``), else CUDA is asked."""
    return stream is not None and stream != LEGACY_DEFAULT_STREAM and torch_api.is_current_stream_capturing()


def capturing(t: torch.Tensor) -> bool:
    """Whether the current stream of CUDA tensor t's device is capturing a graph (False for CPU tensors)."""
    return stream_capturing(stream_of(t))


def arrival_counters(d: torch.Tensor, count: int) -> torch.Tensor:
    """At least ``count`` zeroed int32 arrival counters for launches writing ``d`` on the current stream of its
    device (kept between calls), or fresh ones inside a graph capture (see the module docstring)."""
    if capturing(d):
        return torch.zeros(count, dtype=torch.int32, device=d.device)
    return _kept_per_stream(_COUNTERS, _COUNTERS_LOCK, d, count,
                            lambda: torch.zeros(max(count, MIN_COUNTERS), dtype=torch.int32, device=d.device))


def _kept_per_stream(cache: dict, lock: threading.Lock, d: torch.Tensor, count: int, make) -> torch.Tensor:
    """The buffer ``cache`` keeps for the current stream of d's device, replaced by ``make()`` when it is missing or
    holds fewer than ``count`` elements (checked again under ``lock``, so concurrent first calls make one)."""
    key = (d.get_device(), stream_of(d))
    buf = cache.get(key)
    if buf is None or buf.numel() < count:
        with lock:
            buf = cache.get(key)
            if buf is None or buf.numel() < count:
                buf = make()
                cache[key] = buf
    return buf


def split_k_buffers(d: torch.Tensor, split: int, num_counters: int, ws_elems: int, recorder=None):
    """(workspace, counters) of a split-K launch writing ``d``: ``ws_elems`` FP32 partials (fresh per call) and
    ``num_counters`` arrival counters, or ``d`` itself for both when the launch does not split (the kernel then
    never touches them). A ``recorder`` (plans.Recorder) learns which is per-call scratch and which persists."""
    if split == 1:
        return d, d  # unused
    ws = torch.empty(ws_elems, dtype=torch.float32, device=d.device)
    counters = arrival_counters(d, num_counters)
    if recorder is not None:
        recorder.scratch.append(ws)
        recorder.persistent.append(counters)
    return ws, counters


# ---- a kept split-K workspace per (device, stream) ------------------------------------------------------------------

_WORKSPACES: dict = {}
_WORKSPACES_LOCK = threading.Lock()


def stream_workspace(d: torch.Tensor, elems: int) -> torch.Tensor:
    """At least ``elems`` FP32 elements of split-K workspace for launches writing ``d`` on the current stream of its
    device, kept between calls (fresh inside a graph capture, like ``arrival_counters``).

    Launches queued on one stream run in order, so consecutive calls may reuse one workspace: a kernel that writes
    its partials and reads them back before it ends (the last arriver's reduction) leaves nothing behind that the
    next launch could see. Keeping it saves the per-call allocation on the host path of small launches. When a call
    needs more, a larger buffer replaces it; the smaller one stays alive as long as a launch plan holds it, and the
    caching allocator reuses its memory only in stream order."""
    if capturing(d):
        return torch.empty(elems, dtype=torch.float32, device=d.device)
    return _kept_per_stream(_WORKSPACES, _WORKSPACES_LOCK, d, elems,
                            lambda: torch.empty(elems, dtype=torch.float32, device=d.device))
