"""Public runtime knobs (DeepGEMM's ``set_num_sms`` & co.), each a call of its ``torch.ops.deep_gemm`` op so Python,
torch.compile and C++ callers share one state. The setters take DeepGEMM's parameter names by keyword, as its
torch-op bindings do (``set_num_sms(new_num_sms=...)``); ``deep_gemm._C`` keeps the positional-only forms.
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

import torch

from . import runtime
from .runtime import JITRuntime

_ops = torch.ops.deep_gemm


def _compiling() -> bool:
    # Dynamo cannot put a custom op returning a bare int into a graph (torch 2.13: "op returned non-Tensor"), so
    # inside a compiled region the getters read the state directly; Dynamo guards on the value read.
    return torch.compiler.is_compiling()

__all__ = [
    "set_num_sms", "get_num_sms", "set_tc_util", "get_tc_util", "set_pdl", "get_pdl", "set_ignore_compile_dims",
    "set_block_size_multiple_of", "set_mk_alignment_for_contiguous_layout", "get_mk_alignment_for_contiguous_layout",
    "get_m_alignment_for_contiguous_layout", "get_k_alignment_for_contiguous_layout",
    "get_theoretical_mk_alignment_for_contiguous_layout", "get_jit",
]


def set_num_sms(new_num_sms: int) -> None:
    """Limit persistent kernels to ``new_num_sms`` SMs (0 = all SMs of the device; at most the device's count)."""
    _ops.set_num_sms(new_num_sms)


def get_num_sms() -> int:
    """SMs persistent kernels use: the value set, else the current device's SM count (0 without a GPU)."""
    if _compiling():
        n = runtime.peek("num_sms")
        return n if n > 0 else runtime.device_num_sms()
    return _ops.get_num_sms()


def set_tc_util(new_tc_util: int) -> None:
    """Tensor-core utilisation target in percent, 0-100 (DeepGEMM uses it on SM100 only; recorded here)."""
    _ops.set_tc_util(new_tc_util)


def get_tc_util() -> int:
    """The tensor-core utilisation target; 100 when unset."""
    if _compiling():
        return runtime.peek("tc_util") or 100
    return _ops.get_tc_util()


def set_pdl(enable: bool) -> None:
    """Enable programmatic dependent launch for deep_gemm's kernels (default off, as upstream)."""
    _ops.set_pdl(enable)


def get_pdl() -> bool:
    """Whether programmatic dependent launch is enabled."""
    if _compiling():
        return runtime.peek("pdl")
    return _ops.get_pdl()


def set_ignore_compile_dims(ignore: bool) -> None:
    """Make every GEMM dimension a runtime kernel argument (fewer compilations, possibly slower kernels)."""
    _ops.set_ignore_compile_dims(ignore)


def set_block_size_multiple_of(value: Union[int, Sequence[int]]) -> None:
    """Constrain BLOCK_M and BLOCK_N to multiples: an int applies to both, a pair ``(m, n)`` to each. ``value`` may
    be passed by keyword, as DeepGEMM's Python wrapper names it (``deep_gemm._C``'s form is positional-only)."""
    if isinstance(value, int):
        block_m, block_n = value, value
    else:  # (m, n), or DeepGEMM's one-element [x]
        values = list(value)
        block_m, block_n = values[0], values[-1]
    _ops.set_block_size_multiple_of(block_m, block_n)


def set_mk_alignment_for_contiguous_layout(new_value: int) -> None:
    """Row alignment of expert segments (M-grouped contiguous) and of K groups (K-grouped); default 128."""
    _ops.set_mk_alignment_for_contiguous_layout(new_value)


def get_mk_alignment_for_contiguous_layout() -> int:
    """Row alignment of expert segments in the contiguous layouts (default 128)."""
    if _compiling():
        return runtime.peek("mk_alignment")
    return _ops.get_mk_alignment_for_contiguous_layout()


get_m_alignment_for_contiguous_layout = get_mk_alignment_for_contiguous_layout  # legacy name
get_k_alignment_for_contiguous_layout = get_mk_alignment_for_contiguous_layout  # legacy name


def get_theoretical_mk_alignment_for_contiguous_layout(expected_m: Optional[int] = None,
                                                       num_groups: Optional[int] = None) -> int:
    """Smallest segment alignment the kernels could use (128 on Hopper, whatever ``expected_m`` and
    ``num_groups``; DeepGEMM's SM100 heuristic uses ``num_groups``, SM90's does not)."""
    if num_groups is not None and (isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups < 0):
        from .errors import fail
        fail(f"num_groups: expected a non-negative integer or None, got {num_groups!r}")
    if _compiling():
        return runtime.get_theoretical_mk_alignment_for_contiguous_layout(expected_m)
    return _ops.get_theoretical_mk_alignment_for_contiguous_layout(expected_m)


def get_jit() -> JITRuntime:
    """The process's kernel runtime: ``.cache_dir``, ``.num_compiled_kernels``, ``.clear()``."""
    return JITRuntime(_ops.get_jit())
