"""The legacy ``deep_gemm._C`` surface (DeepGEMM's pybind11 module), in pure Python over ``torch.ops.deep_gemm``.

Code written against DeepGEMM sometimes calls ``deep_gemm._C.<name>`` directly. This module gives it:

* every entry point under its DeepGEMM name as the very function object the public package exports
  (``_C.fp8_gemm_nt is deep_gemm.fp8_gemm_nt``). The names are not copied by hand: they are the public ops and
  aliases of the schema table (``deep_gemm/_ops/schemas.py``), resolved against the package on first access, so a
  family that lands later is covered without touching this file;
* pybind's positional-only behaviour where DeepGEMM binds a function without ``py::arg`` (``_POSITIONAL_ONLY``
  below): those functions are real positional-only Python functions (``def f(x, /)``), so passing an argument by
  keyword raises ``TypeError`` as it does with pybind. The package's own functions already are (runtime knobs,
  layout and Mega MoE helpers); ``get_tma_aligned_size``, which ``deep_gemm.utils`` also offers with keywords, is
  defined here;
* ``get_jit()``: the process's kernel runtime (``deep_gemm.get_jit``), as DeepGEMM's JIT-runtime extension exposes it;
* the ``_C``-only names: ``init`` and the raw ``fp8_fp4_mega_moe`` / ``bf16_mega_moe`` entry points (a flat buffer
  and pointer list instead of a ``SymmBuffer``), next to the forwarded ``get_symm_buffer_size_for_mega_moe``
  (DeepGEMM's ``(num_bytes, slice_fn)``), ``get_ring_limit_for_mega_moe`` and ``get_token_alignment_for_mega_moe``.

The module namespace holds those names and nothing else (every helper below is underscored), so ``dir(_C)`` reads
like DeepGEMM's extension. Importing this module does no CUDA work.
"""

import importlib as _importlib
from typing import List as _List, Optional as _Optional, Sequence as _Sequence, Tuple as _Tuple

import torch as _torch

from ._ops.schemas import SCHEMAS as _SCHEMAS
from .runtime import JITRuntime as _JITRuntime

_ops = _torch.ops.deep_gemm

# Functions DeepGEMM binds without py::arg, so they take positional arguments only.
_POSITIONAL_ONLY = frozenset({
    "set_num_sms", "get_num_sms", "set_tc_util", "get_tc_util", "set_pdl", "get_pdl", "set_ignore_compile_dims",
    "set_block_size_multiple_of", "set_mk_alignment_for_contiguous_layout", "get_mk_alignment_for_contiguous_layout",
    "get_tma_aligned_size", "get_mn_major_tma_aligned_tensor", "init", "get_symm_buffer_size_for_mega_moe",
    "get_ring_limit_for_mega_moe", "get_token_alignment_for_mega_moe", "fp8_fp4_mega_moe", "bf16_mega_moe",
})

# Handle-level runtime ops of ours: reached through get_jit()'s object, not as _C functions. get_jit itself is defined
# below (the runtime object, not the op's integer handle).
_NOT_IN_LEGACY_C = frozenset({"get_jit", "jit_cache_dir", "jit_num_compiled_kernels", "jit_clear_cache"})

# Paths handed to init(): DeepGEMM's C++ JIT finds its headers and nvcc through them; here they are only recorded.
_INIT_PATHS: dict = {}


def init(library_root_path: str, cuda_home_path_by_python: str, /) -> None:
    """Record the package directory and the CUDA home. DeepGEMM's C++ JIT needs them; Triton finds its own way,
    so nothing else happens (in particular no CUDA initialisation)."""
    for name, value in (("library_root_path", library_root_path),
                        ("cuda_home_path_by_python", cuda_home_path_by_python)):
        if not isinstance(value, str):
            raise TypeError(f"init: {name} must be a str, got {type(value).__name__}")
    _INIT_PATHS.update(library_root_path=library_root_path, cuda_home_path_by_python=cuda_home_path_by_python)


def get_tma_aligned_size(x: int, element_size: int, /) -> int:
    """``x`` rounded up so that ``x`` elements of ``element_size`` bytes span a multiple of 16 bytes."""
    from .utils import get_tma_aligned_size as aligned_size
    return aligned_size(x, element_size)


def _flat_op(name: str):
    """The dispatcher op, or NotImplementedError when no schema defines it (DeepGEMM runs it only on SM100)."""
    if name not in _SCHEMAS:
        raise NotImplementedError(
            f"deep_gemm._C.{name}: the fused Mega MoE kernel has no torch.ops.deep_gemm.{name} op in this build "
            f"(DeepGEMM runs it only on SM100); deep_gemm.mega holds the Mega MoE functions that exist")
    return getattr(_ops, name)


def fp8_fp4_mega_moe(y: _torch.Tensor, l1_weights: _Tuple[_torch.Tensor, _torch.Tensor],
                     l2_weights: _Tuple[_torch.Tensor, _torch.Tensor],
                     cumulative_local_expert_recv_stats: _Optional[_torch.Tensor], sym_buffer: _torch.Tensor,
                     sym_buffer_ptrs: _Sequence[int], rank_idx: int, num_max_tokens_per_rank: int, num_experts: int,
                     num_topk: int, recipe: _Sequence[int], activation: str, activation_clamp: _Optional[float],
                     fast_math: bool, num_ring_tokens: int, /) -> None:
    """Raw fused FP8 x FP4 Mega MoE over a flat symmetric buffer (``deep_gemm.fp8_fp4_mega_moe`` is the public
    form, taking a ``SymmBuffer``)."""
    from .gemm.fp8_api import unpack_pair
    op = _flat_op("fp8_fp4_mega_moe")
    l1, l1_sf = unpack_pair("l1_weights", l1_weights)
    l2, l2_sf = unpack_pair("l2_weights", l2_weights)
    op(y, l1, l1_sf, l2, l2_sf, cumulative_local_expert_recv_stats, sym_buffer, list(sym_buffer_ptrs), rank_idx,
       num_max_tokens_per_rank, num_experts, num_topk, list(recipe), activation, activation_clamp, fast_math,
       num_ring_tokens)


def bf16_mega_moe(y: _torch.Tensor, l1_weights: _torch.Tensor, l2_weights: _torch.Tensor,
                  cumulative_local_expert_recv_stats: _Optional[_torch.Tensor], sym_buffer: _torch.Tensor,
                  sym_buffer_ptrs: _Sequence[int], rank_idx: int, num_max_tokens_per_rank: int, num_experts: int,
                  num_topk: int, activation: str, activation_clamp: _Optional[float], fast_math: bool,
                  num_ring_tokens: int, /) -> None:
    """Raw fused BF16 Mega MoE over a flat symmetric buffer (``deep_gemm.bf16_mega_moe`` is the public form)."""
    _flat_op("bf16_mega_moe")(y, l1_weights, l2_weights, cumulative_local_expert_recv_stats, sym_buffer,
                              list(sym_buffer_ptrs), rank_idx, num_max_tokens_per_rank, num_experts, num_topk,
                              activation, activation_clamp, fast_math, num_ring_tokens)


def get_jit() -> _JITRuntime:
    """The process's kernel runtime (``deep_gemm.get_jit()``): ``.cache_dir``, ``.num_compiled_kernels``,
    ``.clear()``. Initialises nothing on CUDA."""
    from .config import get_jit as runtime
    return runtime()


def set_block_size_multiple_of(value, /) -> None:
    """``deep_gemm.set_block_size_multiple_of`` without keywords (the pybind binding's form)."""
    from .config import set_block_size_multiple_of as setter
    setter(value)


_DEFINED_HERE = frozenset({"init", "get_tma_aligned_size", "fp8_fp4_mega_moe", "bf16_mega_moe", "get_jit",
                           "set_block_size_multiple_of"})

# Every public op (aliases included) of the schema table that this module does not define itself.
_FORWARDED = frozenset(name for name in _SCHEMAS
                       if not name.startswith("_") and name not in _NOT_IN_LEGACY_C and name not in _DEFINED_HERE)

__all__ = sorted(_DEFINED_HERE | _FORWARDED)


def __getattr__(name: str):
    # PEP 562: forwarded names resolve on first access, so it does not matter whether deep_gemm/__init__ has
    # finished importing its families when this module is imported.
    if name not in _FORWARDED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(__package__), name, None)
    if not callable(value):  # e.g. the `einsum` subpackage before its function is exported over it
        raise AttributeError(f"deep_gemm._C.{name}: deep_gemm exports no public function {name!r} "
                             f"(its family module does not list it in __all__)")
    globals()[name] = value
    return value


def __dir__() -> _List[str]:
    return sorted(set(__all__) | {n for n in globals() if n.startswith("__")})
