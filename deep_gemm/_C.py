"""The legacy ``deep_gemm._C`` surface (DeepGEMM's pybind11 module), in pure Python over ``torch.ops.deep_gemm``.

Code written against DeepGEMM sometimes calls ``deep_gemm._C.<name>`` directly. This module gives it:

* every entry point under its DeepGEMM name as the very function object the public package exports
  (``_C.fp8_gemm_nt is deep_gemm.fp8_gemm_nt``). The names are not copied by hand: they are the public ops and
  aliases of the schema table (``core/schemas.py``), resolved against the package on first access, so a
  family that lands later is covered without touching this file;
* pybind's positional-only behaviour where DeepGEMM binds a function without ``py::arg`` (``_POSITIONAL_ONLY``
  below): those functions are real positional-only Python functions (``def f(x, /)``), so passing an argument by
  keyword raises ``TypeError`` as it does with pybind. The package's own functions already are (runtime knobs,
  layout and Mega MoE helpers); ``get_tma_aligned_size``, which ``deep_gemm.utils`` also offers with keywords, is
  defined here;
* ``get_jit()``: the process's kernel runtime (``deep_gemm.get_jit``), as DeepGEMM's JIT-runtime extension exposes it;
* the ``_C``-only names: ``init``, the raw ``fp8_mega_moe`` / ``fp8_fp4_mega_moe`` / ``bf16_mega_moe`` entry points
  (the dispatcher ops: a flat buffer and pointer list instead of a buffer object) and the SM90 buffer's
  ``get_symm_buffer_size_for_sm90_mega_moe`` / ``slice_symm_buffer_for_sm90_mega_moe``, next to the forwarded
  ``get_symm_buffer_size_for_mega_moe``
  (DeepGEMM's ``(num_bytes, slice_fn)``), ``get_ring_limit_for_mega_moe`` and ``get_token_alignment_for_mega_moe``.

The module namespace holds those names and nothing else (every helper below is underscored), so ``dir(_C)`` reads
like DeepGEMM's extension. Importing this module does no CUDA work.
"""

import importlib as _importlib
from typing import List as _List, Optional as _Optional, Sequence as _Sequence

import torch as _torch

from .core.schemas import SCHEMAS as _SCHEMAS
from .core.runtime import JITRuntime as _JITRuntime

_ops = _torch.ops.deep_gemm

# Functions DeepGEMM binds without py::arg, so they take positional arguments only.
_POSITIONAL_ONLY = frozenset({
    "set_num_sms", "get_num_sms", "set_tc_util", "get_tc_util", "set_pdl", "get_pdl", "set_ignore_compile_dims",
    "set_block_size_multiple_of", "set_mk_alignment_for_contiguous_layout", "get_mk_alignment_for_contiguous_layout",
    "get_tma_aligned_size", "get_mn_major_tma_aligned_tensor", "init", "get_symm_buffer_size_for_mega_moe",
    "get_ring_limit_for_mega_moe", "get_token_alignment_for_mega_moe", "fp8_fp4_mega_moe", "bf16_mega_moe",
    "fp8_mega_moe", "get_symm_buffer_size_for_sm90_mega_moe", "slice_symm_buffer_for_sm90_mega_moe",
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


def get_tma_aligned_size(mn: int, element_size: int, /) -> int:
    """``mn`` rounded up so that ``mn`` elements of ``element_size`` bytes span a multiple of 16 bytes."""
    from .utils import get_tma_aligned_size as aligned_size
    return aligned_size(mn, element_size)


def fp8_mega_moe(y: _torch.Tensor, l1_weights: _torch.Tensor, l1_weights_sf: _torch.Tensor,
                 l2_weights: _torch.Tensor, l2_weights_sf: _torch.Tensor,
                 cumulative_local_expert_recv_stats: _Optional[_torch.Tensor], sym_buffer: _torch.Tensor,
                 sym_buffer_ptrs: _Sequence[int], rank_idx: int, num_max_tokens_per_rank: int, num_experts: int,
                 num_topk: int, recipe: _Sequence[int], activation: str, activation_clamp: _Optional[float],
                 fast_math: bool, /) -> None:
    """Raw SM90 FP8 Mega MoE over a flat buffer (``torch.ops.deep_gemm.fp8_mega_moe``; ``deep_gemm.fp8_mega_moe``
    is the public form, taking an ``SM90SymmBuffer``)."""
    _ops.fp8_mega_moe(y, l1_weights, l1_weights_sf, l2_weights, l2_weights_sf, cumulative_local_expert_recv_stats,
                      sym_buffer, list(sym_buffer_ptrs), rank_idx, num_max_tokens_per_rank, num_experts, num_topk,
                      list(recipe), activation, activation_clamp, fast_math)


def fp8_fp4_mega_moe(y: _torch.Tensor, l1_weights: _torch.Tensor, l1_weights_sf: _torch.Tensor,
                     l2_weights: _torch.Tensor, l2_weights_sf: _torch.Tensor,
                     shared_l1_weights: _Optional[_torch.Tensor], shared_l1_weights_sf: _Optional[_torch.Tensor],
                     shared_l2_weights: _Optional[_torch.Tensor], shared_l2_weights_sf: _Optional[_torch.Tensor],
                     cumulative_local_expert_recv_stats: _Optional[_torch.Tensor], sym_buffer: _torch.Tensor,
                     sym_buffer_ptrs: _Sequence[int], rank_idx: int, num_max_tokens_per_rank: int, num_experts: int,
                     num_topk: int, recipe: _Sequence[int], mma_type: str, activation: str,
                     activation_clamp: _Optional[float], fast_math: bool, use_x_scales: bool,
                     l1_alphas: _Optional[_torch.Tensor], l2_alphas: _Optional[_torch.Tensor],
                     l2_act_scales: _Optional[_torch.Tensor], post_expert_norm: bool,
                     post_expert_norm_weight: _Optional[_torch.Tensor], post_expert_norm_eps: float,
                     post_expert_norm_weight_first: bool, use_trtllm_weights: bool,
                     global_num_tokens: _Optional[int], num_ring_tokens: int, /) -> None:
    """Raw FP8 x FP4 Mega MoE over a flat buffer (``torch.ops.deep_gemm.fp8_fp4_mega_moe``: DeepGEMM's arguments
    plus ``num_ring_tokens`` last, as our buffer is sized by its ring). ``deep_gemm.fp8_fp4_mega_moe`` is the
    public form, taking a ``SymmBuffer``."""
    _ops.fp8_fp4_mega_moe(y, l1_weights, l1_weights_sf, l2_weights, l2_weights_sf, shared_l1_weights,
                          shared_l1_weights_sf, shared_l2_weights, shared_l2_weights_sf,
                          cumulative_local_expert_recv_stats, sym_buffer, list(sym_buffer_ptrs), rank_idx,
                          num_max_tokens_per_rank, num_experts, num_topk, list(recipe), mma_type, activation,
                          activation_clamp, fast_math, use_x_scales, l1_alphas, l2_alphas, l2_act_scales,
                          post_expert_norm, post_expert_norm_weight, post_expert_norm_eps,
                          post_expert_norm_weight_first, use_trtllm_weights, global_num_tokens, num_ring_tokens)


def bf16_mega_moe(y: _torch.Tensor, l1_weights: _torch.Tensor, l2_weights: _torch.Tensor,
                  shared_l1_weights: _Optional[_torch.Tensor], shared_l2_weights: _Optional[_torch.Tensor],
                  cumulative_local_expert_recv_stats: _Optional[_torch.Tensor], sym_buffer: _torch.Tensor,
                  sym_buffer_ptrs: _Sequence[int], rank_idx: int, num_max_tokens_per_rank: int, num_experts: int,
                  num_topk: int, activation: str, activation_clamp: _Optional[float], fast_math: bool,
                  post_expert_norm: bool, post_expert_norm_weight: _Optional[_torch.Tensor],
                  post_expert_norm_eps: float, post_expert_norm_weight_first: bool, use_trtllm_weights: bool,
                  global_num_tokens: _Optional[int], num_ring_tokens: int, /) -> None:
    """Raw BF16 Mega MoE over a flat buffer (``torch.ops.deep_gemm.bf16_mega_moe``: DeepGEMM's arguments plus
    ``num_ring_tokens`` last). ``deep_gemm.bf16_mega_moe`` is the public form."""
    _ops.bf16_mega_moe(y, l1_weights, l2_weights, shared_l1_weights, shared_l2_weights,
                       cumulative_local_expert_recv_stats, sym_buffer, list(sym_buffer_ptrs), rank_idx,
                       num_max_tokens_per_rank, num_experts, num_topk, activation, activation_clamp, fast_math,
                       post_expert_norm, post_expert_norm_weight, post_expert_norm_eps,
                       post_expert_norm_weight_first, use_trtllm_weights, global_num_tokens, num_ring_tokens)


def get_symm_buffer_size_for_sm90_mega_moe(num_ranks: int, num_experts: int, num_max_tokens_per_rank: int,
                                           num_topk: int, hidden: int, intermediate_hidden: int,
                                           use_fp8_dispatch: bool, activation: str, /) -> int:
    """Bytes of the SM90 FP8 Mega MoE buffer (layout: ``deep_gemm/mega/buffer.py``)."""
    return _ops.get_symm_buffer_size_for_sm90_mega_moe(num_ranks, num_experts, num_max_tokens_per_rank, num_topk,
                                                       hidden, intermediate_hidden, use_fp8_dispatch, activation)


def slice_symm_buffer_for_sm90_mega_moe(buffer: _torch.Tensor, num_ranks: int, num_experts: int,
                                        num_max_tokens_per_rank: int, num_topk: int, hidden: int,
                                        intermediate_hidden: int, use_fp8_dispatch: bool,
                                        activation: str, /) -> _List[_torch.Tensor]:
    """The eight views of an SM90 buffer (x, x_sf, topk_idx, topk_weights, l1_acts, l1_acts_sf, l2_acts,
    l2_acts_sf), aliasing ``buffer``."""
    return _ops._slice_symm_buffer_for_sm90_mega_moe(buffer, num_ranks, num_experts, num_max_tokens_per_rank,
                                                     num_topk, hidden, intermediate_hidden, use_fp8_dispatch,
                                                     activation)


def get_jit() -> _JITRuntime:
    """The process's kernel runtime (``deep_gemm.get_jit()``): ``.cache_dir``, ``.num_compiled_kernels``,
    ``.clear()``. Initialises nothing on CUDA."""
    from .core.config import get_jit as runtime
    return runtime()


def set_num_sms(new_num_sms: int, /) -> None:
    """``deep_gemm.set_num_sms`` without keywords (the pybind binding's form)."""
    _ops.set_num_sms(new_num_sms)


def set_tc_util(new_tc_util: int, /) -> None:
    """``deep_gemm.set_tc_util`` without keywords (the pybind binding's form)."""
    _ops.set_tc_util(new_tc_util)


def set_pdl(enable: bool, /) -> None:
    """``deep_gemm.set_pdl`` without keywords (the pybind binding's form)."""
    _ops.set_pdl(enable)


def set_ignore_compile_dims(ignore: bool, /) -> None:
    """``deep_gemm.set_ignore_compile_dims`` without keywords (the pybind binding's form)."""
    _ops.set_ignore_compile_dims(ignore)


def set_mk_alignment_for_contiguous_layout(new_value: int, /) -> None:
    """``deep_gemm.set_mk_alignment_for_contiguous_layout`` without keywords (the pybind binding's form)."""
    _ops.set_mk_alignment_for_contiguous_layout(new_value)


def set_block_size_multiple_of(value, /) -> None:
    """``deep_gemm.set_block_size_multiple_of`` without keywords (the pybind binding's form)."""
    from .core.config import set_block_size_multiple_of as setter
    setter(value)


_DEFINED_HERE = frozenset({"init", "get_tma_aligned_size", "fp8_fp4_mega_moe", "bf16_mega_moe", "get_jit",
                           "fp8_mega_moe", "get_symm_buffer_size_for_sm90_mega_moe",
                           "slice_symm_buffer_for_sm90_mega_moe", "set_block_size_multiple_of", "set_num_sms",
                           "set_tc_util", "set_pdl", "set_ignore_compile_dims",
                           "set_mk_alignment_for_contiguous_layout"})

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
