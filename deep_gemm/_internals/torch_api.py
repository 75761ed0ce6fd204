"""The private ``torch._C`` entry points of deep_gemm's host fast path, each with a public fallback.

The fast path reads the current stream and the capture state on every replayed launch, and the eager path asks
whether any mode or transform is active on every call. The private entry points are the same C functions the public
ones end in, without a Python layer or two (~0.3-1 us a call). Each is looked up by name once;
where a torch build lacks one (a CPU build has no CUDA entry points; a later torch may rename them) the public API
stands in: slower host time, the same answers. ``tests/test_internals.py`` runs both forms of each on CPU.
"""

from __future__ import annotations

import types
from typing import Callable

import torch

_C = torch._C


def _private(name: str) -> Callable | None:
    # Only a C function counts: CPU builds put placeholder classes under some CUDA names (torch._utils._dummy_type).
    fn = getattr(_C, name, None)
    return fn if isinstance(fn, types.BuiltinFunctionType) else None


_RAW_STREAM = _private("_cuda_getCurrentRawStream")
_CAPTURING = _private("_cuda_isCurrentStreamCapturing")
_GET_DEVICE = _private("_cuda_getDevice")


def _public_raw_stream(device_index: int) -> int:
    return torch.cuda.current_stream(device_index).cuda_stream


def _public_capturing() -> bool:
    return torch.cuda.is_current_stream_capturing()


#: ``current_raw_stream(device_index)``: the raw handle (an int) of the current stream of that CUDA device.
current_raw_stream: Callable[[int], int] = _RAW_STREAM or _public_raw_stream
#: ``is_current_stream_capturing()``: whether the current stream of the current device is capturing a CUDA graph.
is_current_stream_capturing: Callable[[], bool] = _CAPTURING or _public_capturing
#: ``cuda_current_device()``: the current CUDA device index, without ``torch.cuda.current_device``'s lazy-init test
#: (callers use it only once CUDA is initialised).
cuda_current_device: Callable[[], int] = _GET_DEVICE or torch.cuda.current_device


def parse_schema(schema: str):
    """The parsed ``FunctionSchema`` of an operator schema string (arguments with names, types and defaults).
    torch has no public parser; this one has had the same form since torch 1.x and every supported torch is
    tested through it (every op's argument binding depends on it)."""
    return _C.parse_schema(schema)


def _eager_probes():
    names = ("_len_torch_dispatch_stack", "_is_torch_function_mode_enabled", "_are_functorch_transforms_active",
             "_get_tracing_state")
    found = tuple(_private(n) for n in names) + (getattr(torch.autograd, "_profiler_enabled", None),)
    return found if all(callable(f) for f in found) else None


#: ``(dispatch_mode_depth, function_mode_enabled, functorch_active, jit_tracing_state, profiler_enabled)``: what the
# eager path asks
#: before skipping the dispatcher; None where this torch lacks one of them (the eager path then always takes the
#: dispatcher: correct, a few microseconds slower).
EAGER_PROBES = _eager_probes()


def tensor_guards_class():
    """torch's ``TensorGuards`` (what compiled frames check their inputs with), or None where it cannot be imported;
    its users self-test it before relying on it."""
    try:
        from torch._C._dynamo.guards import TensorGuards
    except Exception:  # noqa: BLE001 - any failure to import means "not available"
        return None
    return TensorGuards
