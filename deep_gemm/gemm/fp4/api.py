"""Public FP4 GEMM API, call-compatible with DeepGEMM 0.2.3's ``fp4_gemm_nt``, ``m_grouped_fp4_gemm_nt_*``,
``k_grouped_fp4_gemm_nt_contiguous`` and ``cublaslt_nvfp4_gemm_nt``."""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import torch

from ...core.errors import fail
from ...core.eager import eager_ops
from ..fp8.api import fp8_fp4_gemm_nt, m_grouped_fp8_fp4_gemm_nt_contiguous, m_grouped_fp8_fp4_gemm_nt_masked

__all__ = ["fp4_gemm_nt", "m_grouped_fp4_gemm_nt_contiguous", "m_grouped_fp4_gemm_nt_masked",
           "k_grouped_fp4_gemm_nt_contiguous", "cublaslt_nvfp4_gemm_nt"]

_ops = eager_ops

# DeepGEMM binds these names to the very same functions (packed-FP4 operands are an input form of the FP8 x FP4
# GEMMs: int8 data, two E2M1 values per byte, K-major).
fp4_gemm_nt = fp8_fp4_gemm_nt
m_grouped_fp4_gemm_nt_contiguous = m_grouped_fp8_fp4_gemm_nt_contiguous
m_grouped_fp4_gemm_nt_masked = m_grouped_fp8_fp4_gemm_nt_masked

Pair = Tuple[torch.Tensor, torch.Tensor]


def _pair(name: str, pair) -> tuple:
    if isinstance(pair, (tuple, list)) and len(pair) == 2:
        return pair[0], pair[1]
    fail(f"{name}: expected a (data, scale) pair, got {type(pair).__name__}")


def k_grouped_fp4_gemm_nt_contiguous(a: Pair, b: Pair, d: torch.Tensor, ks: Optional[Sequence[int]],
                                     grouped_layout: torch.Tensor, c: Optional[torch.Tensor] = None,
                                     recipe: Tuple[int, int, int] = (1, 1, 32), compiled_dims: str = "mn",
                                     use_psum_layout: bool = False) -> None:
    """K-grouped FP4 GEMM (MoE weight gradient): ``d[g] = c[g] + A[:, K_g] @ B[:, K_g].T`` per group g.

    Parameters
    ----------
    a, b : (Tensor, Tensor)
        ``(A, SFA)``: A is packed E2M1 ``int8 [M, sum_K / 2]`` (K-major, contiguous; two values per byte, the even
        one in the low nibble), SFA the FP32 UE8M0 (power-of-two) scales ``[sum_K / 32, M]``, one per row per 32 K.
        B and SFB likewise with N.
    d : Tensor
        FP32 ``[G, M, N]``, contiguous, written in place.
    ks : list of int, optional
        Per-group K sizes (multiples of 32), required without the psum layout; ``sum(ks) == sum_K``.
    grouped_layout : Tensor
        int32 ``[G]``: each group's K size (the same as ``ks``), or with ``use_psum_layout`` each group's logical K
        end, the group starting at ``align(previous end, get_mk_alignment_for_contiguous_layout())``; each end
        repeats the previous one (an empty group) or reaches it aligned up, the last at most sum_K. Checked on the
        CPU, and on CUDA in the checked mode (``set_checks("data")``).
    c : Tensor, optional
        FP32 ``[G, M, N]`` accumulator; may be ``d`` itself.
    recipe : (int, int, int)
        Must be ``(1, 1, 32)``.

    Notes
    -----
    DeepGEMM runs this only on SM100. Here, on CUDA (sm_80 and later) a Triton kernel decodes both operands to BF16
    in registers (exact for UE8M0 scales) and accumulates BF16 dots in FP32, reading the group layout on the device
    (CUDA-graph capturable). On CPU the torch reference runs (FP64 products, one rounding).
    """
    a_data, sfa = _pair("a", a)
    b_data, sfb = _pair("b", b)
    _ops.k_grouped_fp4_gemm_nt_contiguous.default(
        a_data, sfa, b_data, sfb, d, None if ks is None else [int(k) for k in ks], grouped_layout, c,
        [int(r) for r in recipe], compiled_dims, bool(use_psum_layout))


def cublaslt_nvfp4_gemm_nt(a: Pair, b: Pair, d: torch.Tensor, c: Optional[torch.Tensor] = None) -> None:
    """NVFP4 GEMM: ``d = c + (A * SFA) @ (B * SFB).T``, FP32 accumulation.

    Parameters
    ----------
    a, b : (Tensor, Tensor)
        ``(A, SFA)``: A is packed E2M1 ``int8 [M, K / 2]`` (K-major, contiguous, ``K % 32 == 0``); SFA holds one
        UE4M3 scale byte (``uint8`` or ``int8``; an E4M3 value) per 16 elements of a row, in cuBLASLt's tiled layout
        ``[ceil(M / 128), ceil(K / 64), 32, 4, 4]`` (contiguous): scale (row r, block j) sits at tile
        ``(r // 128, j // 4)``, position ``(r % 32, (r // 32) % 4, j % 4)``. B and SFB likewise with N.
    d : Tensor
        BF16 or FP32 ``[M, N]``, row-major, written in place.
    c : Tensor, optional
        d's shape and dtype; may be ``d`` itself.

    Notes
    -----
    No per-tensor global scale is applied (fold it into the output if the recipe has one). DeepGEMM calls
    cuBLASLt on SM100. Here, on CUDA (sm_80 and later) a Triton kernel decodes E2M1 times UE4M3 exactly to BF16 in
    registers and accumulates BF16 dots in FP32. For a ``c`` that is not row-major, and on CPU, the torch reference
    runs.
    """
    a_data, sfa = _pair("a", a)
    b_data, sfb = _pair("b", b)
    _ops.cublaslt_nvfp4_gemm_nt.default(a_data, sfa, b_data, sfb, d, c)
