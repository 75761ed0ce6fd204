"""Public scale-factor layout API, call-compatible with DeepGEMM's layout helpers.

Like DeepGEMM, ``get_mn_major_tma_aligned_tensor`` and ``transform_sf_into_required_layout`` return ``sf`` itself
(no copy, no kernel) when it is already in the required layout (after the same argument check as the op); otherwise
they return a fresh tensor from the dispatcher op. The ``torch.ops.deep_gemm`` ops themselves always return fresh
storage (dispatcher ops may not return aliases of their inputs).
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

import torch

from ..core.registry import CHECK_MEMO_LIMIT

from ..core.eager import eager_checked, eager_ops
from . import checks

__all__ = [
    "transform_sf_into_required_layout",
    "get_mn_major_tma_aligned_tensor",
    "get_mn_major_tma_aligned_packed_ue8m0_tensor",
    "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor",
]

_ops = eager_ops  # torch.ops.deep_gemm, skipping the dispatcher for plain eager CUDA calls (core/registry.py)


def transform_sf_into_required_layout(sf: torch.Tensor, mn: int, k: int,
                                      recipe: Union[Tuple[int, int, int], Tuple[int, int]],
                                      num_groups: Optional[int] = None, is_sfa: Optional[bool] = None,
                                      disable_ue8m0_cast: bool = False,
                                      psum_layout: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Scale factors of one GEMM operand in the layout DeepGEMM's SM90 kernels read.

    Parameters
    ----------
    sf : Tensor
        FP32 ``[(G,) ceil(mn / gran_mn), ceil(k / gran_k)]`` (any strides), or packed UE8M0 int32
        ``[(G,) mn, ceil(k / (4 * gran_k))]``. Not modified.
    mn, k : int
        Rows (M or N) and K of the operand the scales belong to.
    recipe : tuple
        ``(gran_m_a, gran_n_b, gran_k)`` together with ``is_sfa`` (True picks ``gran_m_a``, False ``gran_n_b``),
        or ``(gran_mn, gran_k)`` with ``is_sfa=None``.
    num_groups : int, optional
        Given for grouped scales: ``sf`` is then 3-D with ``num_groups`` in dim 0.
    disable_ue8m0_cast, psum_layout
        Accepted for compatibility; they only matter for DeepGEMM's SM100 UE8M0 packing, which SM90 never does.

    Returns
    -------
    Tensor
        ``sf`` itself when it is already in the required layout (rule 2 always; rules 1 and 3 when ``sf`` is
        MN-major and TMA-aligned), as DeepGEMM does; otherwise a fresh tensor, by the first matching rule (SM90):

        1. FP32, ``gran_mn == 1``, ``gran_k`` 32 or 128: MN-major, TMA-aligned FP32 copy (strides
           ``((align(mn', 4) * sfk,) 1, align(mn', 4))``), as :func:`get_mn_major_tma_aligned_tensor`;
        2. FP32, ``(128, 128)`` blocks: must be contiguous or contiguous after transposing the last two dims; a copy
           with the same layout;
        3. int32 packed UE8M0, ``gran_mn == 1``, ``gran_k`` 32 or 128: must be MN-major with a column stride
           ``>= align(mn, 4)`` and a multiple of 4; a copy in the canonical MN-major TMA-aligned layout.

        Anything else raises ``DeepGEMMError`` ("Unknown SF transformation"). DeepGEMM's SM90 build accepts only
        ``gran_k == 128`` in rule 1 and no int32 scales; 32 and int32 are accepted here as layout-only operations.

    Example
    -------
    >>> sfa = deep_gemm.transform_sf_into_required_layout(sfa, m, k, (1, 128, 128), is_sfa=True)
    """
    args = (sf, int(mn), int(k), [int(x) for x in recipe], None if num_groups is None else int(num_groups), is_sfa,
            disable_ue8m0_cast, psum_layout)
    checked = eager_checked("transform_sf_into_required_layout", args)
    if checked is None:  # tracing, fake or CPU tensors, modes: check here, then the dispatcher op
        if _transform_keeps_input(*args):
            return sf
        return _ops.transform_sf_into_required_layout.default(*args)
    # A plain eager CUDA call: the op's memoised check has passed (or raised), and whether the transformation is
    # the identity is a function of the same metadata signature, so it is decided once per signature token.
    kernels, full, token = checked
    keeps = _KEEPS_INPUT.get(token)
    if keeps is None:
        keeps = _is_identity(*full)
        if len(_KEEPS_INPUT) >= CHECK_MEMO_LIMIT:
            _KEEPS_INPUT.clear()
        _KEEPS_INPUT[token] = keeps
    return sf if keeps else kernels.run_cuda(full, token)


# signature token (core/registry.py: equal tokens, equal argument metadata; never reused, and distinct across ops)
# -> whether the public function returns its input as is
_KEEPS_INPUT: dict = {}


def _already_mn_major(sf: torch.Tensor) -> bool:
    """DeepGEMM's test for an MN-major TMA-aligned tensor it returns as is: unit MN stride, MN stride padded to
    align(MN, 4), groups dense (3-D)."""
    mn, cols = sf.size(-2), sf.size(-1)
    aligned = checks.get_tma_aligned_size(mn, checks.SF_ELEMENT_SIZE)
    return (sf.dim() == 2 or sf.stride(0) == aligned * cols) and sf.stride(-2) == 1 and sf.stride(-1) == aligned


def _transform_keeps_input(sf, mn, k, recipe, num_groups, is_sfa, disable_ue8m0_cast, psum_layout) -> bool:
    """Whether the transformation is the identity, as in DeepGEMM: (128, 128) FP32 block scales (their layout is
    kept), packed int32 scales (the check accepted them as MN-major and TMA-aligned), and FP32 per-row scales already
    MN-major and TMA-aligned. Runs the op's check first (it raises on bad arguments, like the op)."""
    checks.check_transform_sf_into_required_layout(sf, mn, k, recipe, num_groups, is_sfa, disable_ue8m0_cast,
                                                   psum_layout)
    return _is_identity(sf, mn, k, recipe, num_groups, is_sfa, disable_ue8m0_cast, psum_layout)


def _is_identity(sf, mn, k, recipe, num_groups, is_sfa, disable_ue8m0_cast, psum_layout) -> bool:
    """``_transform_keeps_input`` once the check has passed: a function of the arguments' metadata only."""
    if sf.dtype == torch.int32 or checks.granularity(recipe, is_sfa) == (128, 128):
        return True
    return _already_mn_major(sf)


def get_mn_major_tma_aligned_tensor(sf: torch.Tensor, /) -> torch.Tensor:
    """FP32 scales ``[MN, SFK]`` or ``[G, MN, SFK]`` (any strides) copied into the MN-major TMA-aligned layout.

    The result has the same shape and values; its strides are ``(1, align(MN, 4))`` (2-D) or
    ``(align(MN, 4) * SFK, 1, align(MN, 4))`` (3-D), so each scale column starts on a 16-byte boundary. Always a
    fresh tensor, except that ``sf`` itself is returned (no copy) when it is already laid out so, as DeepGEMM does.
    Positional-only, like DeepGEMM's.

    Example
    -------
    >>> sf = deep_gemm.get_mn_major_tma_aligned_tensor(torch.rand(129, 7))
    >>> sf.shape, sf.stride()
    (torch.Size([129, 7]), (1, 132))
    """
    checked = eager_checked("get_mn_major_tma_aligned_tensor", (sf,))
    if checked is None:  # tracing, fake or CPU tensors, modes: check here, then the dispatcher op
        checks.check_get_mn_major_tma_aligned_tensor(sf)
        if _already_mn_major(sf):
            return sf
        return _ops.get_mn_major_tma_aligned_tensor.default(sf)
    kernels, full, token = checked  # (as in transform_sf_into_required_layout)
    keeps = _KEEPS_INPUT.get(token)
    if keeps is None:
        keeps = _already_mn_major(sf)
        if len(_KEEPS_INPUT) >= CHECK_MEMO_LIMIT:
            _KEEPS_INPUT.clear()
        _KEEPS_INPUT[token] = keeps
    return sf if keeps else kernels.run_cuda(full, token)


def get_mn_major_tma_aligned_packed_ue8m0_tensor(sf: torch.Tensor,
                                                 psum_layout: Optional[torch.Tensor] = None) -> torch.Tensor:
    """FP32 power-of-two scales ``[(G,) MN, SFK]`` packed as UE8M0, four per int32, MN-major and TMA-aligned.

    Returns int32 ``[(G,) MN, ceil(SFK / 4)]`` with strides ``((align(MN, 4) * ceil(SFK / 4),) 1, align(MN, 4))``;
    byte j of element ``[.., r, i]`` is the biased exponent of ``sf[.., r, 4i + j]`` (0 past SFK). Only the exponent
    bits are kept, so every scale must be a non-negative power of two (``deep_gemm.utils.ceil_to_ue8m0``): the CPU
    kernel raises ``DeepGEMMError`` otherwise, and so does CUDA in the checked mode (``deep_gemm.set_checks("data")``;
    by default CUDA trusts the scales, as DeepGEMM does, and would pack only their exponents).

    psum_layout : Tensor, optional
        int32 ``[G]`` cumulative group end rows for a 2-D contiguous ``sf`` (M-grouped psum layout): rows outside
        every group range ``[align(end[g-1], get_mk_alignment_for_contiguous_layout()), end[g])`` pack to 0.

    Example
    -------
    >>> sf = deep_gemm.utils.ceil_to_ue8m0(torch.rand(4096, 56))
    >>> packed = deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf)   # int32 [4096, 14], strides (1, 4096)
    """
    return _ops.get_mn_major_tma_aligned_packed_ue8m0_tensor.default(sf, psum_layout)


def get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(sf: torch.Tensor, grouped_layout: torch.Tensor,
                                                           ks_cpu: Optional[Sequence[int]], gran_k: int,
                                                           k_alignment: int,
                                                           use_psum_layout: bool = False) -> torch.Tensor:
    """UE8M0 packing of K-grouped MN-major scales (MoE weight gradients); packs never cross a group.

    Parameters
    ----------
    sf : Tensor
        FP32 ``[sum SFK_g, MN]`` contiguous, ``MN % 4 == 0``: the scale rows of each group, group after group
        (``SFK_g = ceil(K_g / gran_k)``).
    grouped_layout : Tensor
        int32 ``[G]`` (1 <= G <= 128): the K size of each group, or with ``use_psum_layout`` the cumulative K end
        offsets (group g spans ``[align(end[g-1], k_alignment), end[g])``). Read on the device.
    ks_cpu : list of int, optional
        The K sizes on the host (each a multiple of ``k_alignment`` and ``gran_k``, summing to ``SFK * gran_k``).
        ``None`` or ``[]`` requires ``use_psum_layout``; the row count is then the bound ``(SFK + 3 G) // 4``.
    gran_k : int
        32 or 128. k_alignment : int, a positive multiple of 32.

    Returns
    -------
    Tensor
        int32 ``[rows, MN]`` contiguous; each group owns ``ceil(SFK_g / 4)`` consecutive rows, row i packing its
        scale rows ``4i .. 4i + 3`` (slots past the group's end are 0, rows no group reaches are 0).

    Example
    -------
    >>> ks = [256, 0, 384]
    >>> packed = deep_gemm.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(
    ...     sf, torch.tensor(ks, dtype=torch.int32, device='cuda'), ks, 128, 128)   # [1 + 0 + 1, MN]
    """
    return _ops.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor.default(
        sf, grouped_layout, None if ks_cpu is None else [int(x) for x in ks_cpu], int(gran_k), int(k_alignment),
        use_psum_layout)
