"""DeepGEMM's legacy Triton GEMMs (``deep_gemm.legacy``), same names, arguments and results.

BF16 operands, outputs written in place. CUDA tensors run the Triton kernels of ``kernels.py`` (Triton is imported
at the first call); CPU tensors run the torch definitions of ``reference.py``. These functions are plain Python,
not dispatcher ops (DeepGEMM's are plain Triton launches too). Bad arguments raise ``DeepGEMMError``.

Differences from DeepGEMM's (both supersets): M-grouped rows whose expert id is -1 are written as zeros (DeepGEMM
leaves whatever the tile's expert gave them, its test masks them), and K-grouped groups need not be multiples of
the kernel's K block (DeepGEMM does not mask K tails).
"""

from __future__ import annotations

import os
from typing import Tuple

import torch

from ..core import arch
from .._internals import COMPILE_OPTIONS
from ..core.errors import fail, require
from ..core.first_import import ensure_triton
from ..utils.numeric import ceil_div
from . import reference
from .plan import K_GROUPED_TILE, M_GROUPED_TILE, NO_OVERRIDES, LegacyOverrides

__all__ = [
    "m_grouped_bf16_gemm_nt_contiguous_tl", "m_grouped_bf16_gemm_nn_contiguous_tl",
    "a_fused_m_grouped_bf16_gemm_nt_contiguous_tl", "a_fused_m_grouped_bf16_gemm_nn_contiguous_tl",
    "a_fused_k_grouped_bf16_gemm_tn_contiguous_tl", "b_fused_k_grouped_bf16_gemm_tn_contiguous_tl",
]

# The default tiles (plan.py). The names below are today's values, kept for scripts that read them.
BLOCK_N, BLOCK_K = M_GROUPED_TILE.block_n, M_GROUPED_TILE.block_k
NUM_WARPS, NUM_STAGES = M_GROUPED_TILE.num_warps, M_GROUPED_TILE.num_stages
M_GROUPED_MAX_BLOCK_M = M_GROUPED_TILE.block_m
K_GROUPED_BLOCK_M, K_GROUPED_BLOCK_N = K_GROUPED_TILE.block_m, K_GROUPED_TILE.block_n


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _use_triton(*tensors: torch.Tensor) -> bool:
    """Whether the Triton kernels run: CUDA tensors on a device they run on (sm_80 and later, ``deep_gemm.core.arch``;
    below it the torch definitions run on the GPU), or Triton's interpreter."""
    t = tensors[0]
    return (t.is_cuda and arch.kernels_run(arch.sm_of_tensor(t))) or _interpreting()


def _int32_vector(name: str, t: torch.Tensor, length: int | None = None) -> None:
    require(isinstance(t, torch.Tensor), f"{name}: expected a tensor, got {type(t).__name__}")
    require(t.dtype == torch.int32 and t.dim() == 1 and t.is_contiguous(),
            f"{name}: expected a contiguous 1-D int32 tensor, got {t.dtype} shape {tuple(t.shape)}")
    if length is not None:
        require(t.numel() == length, f"{name}: expected {length} elements, got {t.numel()}")


def _bf16(name: str, t: torch.Tensor, dims: int) -> None:
    require(isinstance(t, torch.Tensor), f"{name}: expected a tensor, got {type(t).__name__}")
    require(t.dtype == torch.bfloat16 and t.dim() == dims,
            f"{name}: expected a {dims}-D bfloat16 tensor, got {t.dtype} shape {tuple(t.shape)}")


def _same_device(**tensors: torch.Tensor) -> None:
    devices = {name: t.device for name, t in tensors.items()}
    first = next(iter(devices.values()))
    for name, device in devices.items():
        require(device == first, f"{name}: expected device {first}, got {device}")


def _block_m(max_block_m: int = M_GROUPED_TILE.block_m) -> int:
    from ..core.config import get_mk_alignment_for_contiguous_layout
    alignment = get_mk_alignment_for_contiguous_layout()
    block = alignment & -alignment  # largest power of two dividing the alignment
    return max(16, min(max_block_m, block))


def _m_grouped(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, m_indices: torch.Tensor,
               row_indices: torch.Tensor | None, overrides: LegacyOverrides = NO_OVERRIDES) -> None:
    """b: [G, N, K] view (K-major for nt, N-major for nn). The launch's tile: M_GROUPED_TILE unless overridden
    (its block_m is an upper bound, see plan.py)."""
    _bf16("a", a, 2)
    _bf16("b", b, 3)
    _bf16("d", d, 2)
    require(a.is_contiguous(), "a: expected a contiguous (K-major) tensor")
    require(d.is_contiguous(), "d: expected a contiguous tensor")
    require(b.stride(-1) == 1 or b.stride(-2) == 1 or b.size(-1) <= 1 or b.size(-2) <= 1,
            f"b: expected a K-major or N-major layout, got strides {b.stride()}")
    m = d.size(0)
    n, k = b.size(1), b.size(2)
    require(a.size(1) == k, f"a: expected {k} columns (K of b), got {a.size(1)}")
    require(d.size(1) == n, f"d: expected {n} columns (N of b), got {d.size(1)}")
    _int32_vector("m_indices", m_indices, m)
    if row_indices is None:
        require(a.size(0) == m, f"a: expected {m} rows (rows of d), got {a.size(0)}")
    else:
        _int32_vector("m_row_indices", row_indices, m)
    from ..core.config import get_mk_alignment_for_contiguous_layout
    alignment = get_mk_alignment_for_contiguous_layout()
    require(m % alignment == 0, f"d: expected a row count that is a multiple of the contiguous-layout alignment "
                                f"{alignment} (get_mk_alignment_for_contiguous_layout()), got {m}")
    _same_device(a=a, b=b, d=d, m_indices=m_indices, **({} if row_indices is None else {"m_row_indices": row_indices}))
    if m == 0 or n == 0:
        return
    if not _use_triton(a):
        reference.m_grouped(a, b, d, m_indices, row_indices)
        return
    ensure_triton()
    from . import kernels
    tile = (overrides.m_grouped_tile or M_GROUPED_TILE).for_sm(arch.sm_of_tensor(a))
    block_m = _block_m(tile.block_m)
    grid = (ceil_div(m, block_m) * ceil_div(n, tile.block_n),)
    # enable_fp_fusion: multiply-adds fused as the kernels were tested (Triton's default turns it off from 3.10)
    common = dict(DOT_FP32=_interpreting(), BLOCK_M=block_m, BLOCK_N=tile.block_n, BLOCK_K=tile.block_k,
                  num_warps=tile.num_warps, num_stages=tile.num_stages, **COMPILE_OPTIONS)
    strides = (a.stride(0), b.stride(0), b.stride(1), b.stride(2), d.stride(0))
    if row_indices is None:
        kernels.m_grouped_bf16_gemm_contiguous_tl_impl[grid](a, b, d, m_indices, m, n, k, *strides, **common)
    else:
        kernels.a_fused_m_grouped_bf16_gemm_contiguous_tl_impl[grid](a, b, d, m_indices, row_indices, m, n, k,
                                                                     *strides, **common)


def m_grouped_bf16_gemm_nt_contiguous_tl(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor,
                                         m_indices: torch.Tensor) -> None:
    """M-grouped BF16 GEMM: ``d[r] = a[r] @ b[m_indices[r]].T``.

    a : ``[M, K]`` contiguous; b : ``[G, N, K]`` (K-major, or its N-major transpose view); d : ``[M, N]`` contiguous;
    m_indices : int32 ``[M]``, the expert of each row (-1: padding, written as zeros). Expert segments start at
    multiples of ``get_mk_alignment_for_contiguous_layout()`` and ``M`` is a multiple of it.
    """
    _m_grouped(a, b, d, m_indices, None)


def m_grouped_bf16_gemm_nn_contiguous_tl(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor,
                                         m_indices: torch.Tensor) -> None:
    """As :func:`m_grouped_bf16_gemm_nt_contiguous_tl` with B given as ``[G, K, N]``."""
    _bf16("b", b, 3)
    _m_grouped(a, b.mT, d, m_indices, None)


def _mappings(mappings) -> Tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(mappings, (tuple, list)) or len(mappings) != 2:
        fail(f"mappings: expected a (m_indices, m_row_indices) pair, got {type(mappings).__name__}")
    return mappings[0], mappings[1]


def a_fused_m_grouped_bf16_gemm_nt_contiguous_tl(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor,
                                                 mappings: Tuple[torch.Tensor, torch.Tensor]) -> None:
    """M-grouped BF16 GEMM gathering A's rows: ``d[r] = a[m_row_indices[r]] @ b[m_indices[r]].T``.

    mappings : ``(m_indices, m_row_indices)``, int32 ``[M]`` each (``M = d.size(0)``, a multiple of the
    contiguous-layout alignment); a negative source row or expert gives a zero row. a : ``[M_a, K]`` contiguous
    (any row count); b : ``[G, N, K]``.
    """
    m_indices, row_indices = _mappings(mappings)
    _m_grouped(a, b, d, m_indices, row_indices)


def a_fused_m_grouped_bf16_gemm_nn_contiguous_tl(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor,
                                                 mappings: Tuple[torch.Tensor, torch.Tensor]) -> None:
    """As :func:`a_fused_m_grouped_bf16_gemm_nt_contiguous_tl` with B given as ``[G, K, N]``."""
    _bf16("b", b, 3)
    m_indices, row_indices = _mappings(mappings)
    _m_grouped(a, b.mT, d, m_indices, row_indices)


def _k_grouped(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, handle, acc: bool, gather_a: bool,
               overrides: LegacyOverrides = NO_OVERRIDES) -> None:
    if not isinstance(handle, (tuple, list)) or len(handle) != 3:
        fail(f"handle: expected a (k_indices, k_start, k_end) triple, got {type(handle).__name__}")
    k_indices, k_start, k_end = handle
    _bf16("a", a, 2)
    _bf16("b", b, 2)
    require(isinstance(d, torch.Tensor) and d.dim() == 3 and d.dtype in (torch.float32, torch.bfloat16),
            "d: expected a 3-D float32 or bfloat16 tensor")
    for name, t in (("a", a), ("b", b), ("d", d)):
        require(t.is_contiguous(), f"{name}: expected a contiguous tensor")
    groups = k_start.numel() if isinstance(k_start, torch.Tensor) else 0
    _int32_vector("k_start", k_start)
    _int32_vector("k_end", k_end, groups)
    m, n = a.size(1), b.size(1)
    require(d.shape == (groups, m, n), f"d: expected shape {(groups, m, n)} (groups, M, N), got {tuple(d.shape)}")
    k = b.size(0) if gather_a else a.size(0)
    _int32_vector("k_indices", k_indices, k)
    from ..core.config import get_mk_alignment_for_contiguous_layout
    alignment = get_mk_alignment_for_contiguous_layout()
    require(k % alignment == 0, f"{'b' if gather_a else 'a'}: expected a row count (K) that is a multiple of the "
                                f"contiguous-layout alignment {alignment}, got {k}")
    _same_device(a=a, b=b, d=d, k_indices=k_indices, k_start=k_start, k_end=k_end)
    if groups == 0 or m == 0 or n == 0:
        return
    if not _use_triton(a):
        reference.k_grouped(a, b, d, k_indices, k_start, k_end, bool(acc), gather_a)
        return
    ensure_triton()
    from . import kernels
    tile = (overrides.k_grouped_tile or K_GROUPED_TILE).for_sm(arch.sm_of_tensor(a))
    kernel = (kernels.a_fused_k_grouped_bf16_gemm_contiguous_tl_impl if gather_a
              else kernels.b_fused_k_grouped_bf16_gemm_contiguous_tl_impl)
    grid = (ceil_div(m, tile.block_m) * ceil_div(n, tile.block_n), groups)
    kernel[grid](a, b, d, k_indices, k_start, k_end, m, n, a.stride(0), b.stride(0), d.stride(0), d.stride(1),
                 ACC=bool(acc), DOT_FP32=_interpreting(), BLOCK_M=tile.block_m, BLOCK_N=tile.block_n,
                 BLOCK_K=tile.block_k, num_warps=tile.num_warps, num_stages=tile.num_stages, **COMPILE_OPTIONS)


def a_fused_k_grouped_bf16_gemm_tn_contiguous_tl(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor,
                                                 handle: Tuple[torch.Tensor, torch.Tensor, torch.Tensor],
                                                 acc: bool) -> None:
    """K-grouped BF16 GEMM gathering A's rows (MoE weight gradients):
    ``d[g] = (d[g] if acc else 0) + sum_{k in [k_start[g], k_end[g])} a[k_indices[k]]^T b[k]``.

    a : ``[K_a, M]`` contiguous (rows gathered; a negative index is a zero row); b : ``[K, N]`` contiguous, K a
    multiple of the contiguous-layout alignment; d : ``[G, M, N]`` FP32 or BF16; handle : int32
    ``(k_indices [K], k_start [G], k_end [G])``.
    """
    _k_grouped(a, b, d, handle, acc, gather_a=True)


def b_fused_k_grouped_bf16_gemm_tn_contiguous_tl(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor,
                                                 handle: Tuple[torch.Tensor, torch.Tensor, torch.Tensor],
                                                 acc: bool) -> None:
    """As :func:`a_fused_k_grouped_bf16_gemm_tn_contiguous_tl` gathering B's rows instead:
    ``d[g] = (d[g] if acc else 0) + sum_k a[k]^T b[k_indices[k]]`` with a ``[K, M]``, b ``[K_b, N]``."""
    _k_grouped(a, b, d, handle, acc, gather_a=False)
